#!/bin/bash
# Does a new test kill a mutant? (docs/benchmarks.md, round 2.) Runs the test files on the
# checkout's code, then on the one mutant (cosmic-ray's module path, operator and
# occurrence, as `cr-report` names them), in a fresh copy ($KILL_CHECK_COPY, default
# /tmp/kill-check) so the checkout is never mutated. Prints each run's exit status:
# 0 then 1 is a kill.
#   benchmarks/mutation/kill_check.sh domain/outbox.py core/ReplaceBinaryOperator_Add_LShift 3 \
#     tests/unit/test_causality_and_outbox.py
set -u
path=$1 op=$2 occ=$3; shift 3
CHECKOUT=$(cd "$(dirname "$0")/../.." && pwd)
COPY=${KILL_CHECK_COPY:-/tmp/kill-check}
COSMIC_RAY=${COSMIC_RAY:-/tmp/cr-venv/bin/cosmic-ray}
mkdir -p "$COPY/sessionwire"
rsync -a --delete --exclude .venv --exclude build --exclude .git --exclude __pycache__ \
  "$CHECKOUT/" "$COPY/sessionwire/"
cp "$CHECKOUT/public/__init__.py" "$CHECKOUT/public/testing.py" "$COPY/sessionwire/"
cd "$COPY/sessionwire" || exit 2
export PYTHONPATH="$COPY" PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONDONTWRITEBYTECODE=1
PYTEST=("$CHECKOUT/.venv/bin/python" -m pytest -q -p no:cacheprovider -p pytest_asyncio.plugin
  -p pytest_timeout -p sessionwire.adapters.testkit.pytest_plugin --timeout 120)
"${PYTEST[@]}" "$@" >"$COPY/code.log" 2>&1
echo "code: exit $? ($COPY/code.log)"
"$COSMIC_RAY" apply "$path" "$op" "$occ"
"${PYTEST[@]}" "$@" >"$COPY/mutant.log" 2>&1
echo "mutant: exit $? ($COPY/mutant.log)"
