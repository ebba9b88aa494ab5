#!/bin/bash
# One mutant's verdict for cosmic-ray (exit 0: it survived): the unit tier, then the fixed
# simulator budget, run in a copy of the package ($MUTATION_COPY/sessionwire, imported
# first through PYTHONPATH) with the checkout's venv ($SESSIONWIRE_VENV).
set -u
cd "$MUTATION_COPY/sessionwire" || exit 2
export PYTHONPATH="$MUTATION_COPY"
PY="$SESSIONWIRE_VENV/bin/python"
"$PY" -m pytest tests/unit -x -q -n 0 -p no:randomly -p no:cacheprovider --timeout 120 \
  >/dev/null 2>&1 || exit 1
"$PY" benchmarks/mutation/simulator_budget.py >/dev/null 2>&1 || exit 1
exit 0
