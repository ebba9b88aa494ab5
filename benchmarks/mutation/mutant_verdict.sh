#!/bin/bash
# One mutant's verdict for cosmic-ray (exit 0: it survived): it survives only if the whole
# unit tier AND the fixed simulator budget pass, run in a copy of the package
# ($MUTATION_COPY/sessionwire, imported first through PYTHONPATH) with the checkout's venv
# ($SESSIONWIRE_VENV). Cheapest first, since most mutants die early: (1) the unit tests
# that import the mutated module (found by comparing the copy with the checkout,
# $MUTATION_ORIGINAL, default the venv's checkout), (2) the budget, (3) the whole unit
# tier. A mutant that passes (1) and (2) still runs (3) in full, so the verdict is the
# same as running the tier and the budget alone; only the time to a kill changes.
set -u
ORIGINAL="${MUTATION_ORIGINAL:-$SESSIONWIRE_VENV/..}"
cd "$MUTATION_COPY/sessionwire" || exit 2
export PYTHONPATH="$MUTATION_COPY"
PY="$SESSIONWIRE_VENV/bin/python"
# Only the plugins the unit tier uses (hypothesis and schemathesis take ~4 s to load, for
# each of the ~3,000 runs); the tier passes the same without the others.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
PYTEST=("$PY" -m pytest -x -q -p no:cacheprovider -p pytest_asyncio.plugin -p pytest_timeout
  -p sessionwire.adapters.testkit.pytest_plugin --timeout 120)

mutated=$(diff -rq --exclude __pycache__ "$ORIGINAL/domain" domain; \
  diff -rq --exclude __pycache__ "$ORIGINAL/application" application) || true
module=$(sed -n 's|^Files .* and \(.*\)\.py differ$|\1|p' <<<"$mutated" | head -1)
if [ -n "$module" ]; then
  dotted=${module//\//.}
  package=${dotted%.*}
  name=${dotted##*.}
  mapfile -t direct < <(grep -lE "sessionwire\.$dotted\b|from sessionwire\.$package import .*\b$name\b" tests/unit/*.py)
  if [ ${#direct[@]} -gt 0 ]; then
    "${PYTEST[@]}" "${direct[@]}" >/dev/null 2>&1 || exit 1
  fi
fi
"$PY" benchmarks/mutation/simulator_budget.py >/dev/null 2>&1 || exit 1
"${PYTEST[@]}" tests/unit >/dev/null 2>&1 || exit 1
exit 0
