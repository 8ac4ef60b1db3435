#!/usr/bin/env bash
# `make test`'s pytest in two lanes at once: the tests that start a real vLLM engine (marker e2e) and all the others.
# Why: one after the other the suite took 44-45 min on a 2-core development machine (2026-12-07, 2,005 tests), and
# CI's whole run 3,748 s on stop 55. Both halves are mostly one thread of Python (vLLM's import, ~13 s twice per
# engine start; the resolver, kernel-interpreter and harness tests), so two lanes use both cores.
# The other lane prints as it goes; the e2e lane's output is kept in a file and printed when both have ended.
# Exit status: the first non-zero of the two lanes. An interrupt stops both (each pytest stops the servers it started).
# usage: PY=.venv/bin/python bash scripts/pytest_lanes.sh
set -uo pipefail
PY=${PY:-.venv/bin/python}
SELECT="not gpu and not image"
e2e_log=$(mktemp -t pytest-e2e-lane.XXXXXX)
"$PY" -m pytest -q -p no:cacheprovider --durations=15 -m "e2e and $SELECT" tests >"$e2e_log" 2>&1 &
e2e_pid=$!
trap 'kill -INT "$e2e_pid" 2>/dev/null; wait "$e2e_pid" 2>/dev/null; exit 130' INT TERM

began=$SECONDS
"$PY" -m pytest -q -p no:cacheprovider --durations=15 -m "not e2e and $SELECT" tests
other_rc=$?
echo "pytest lanes: the other lane ended (exit $other_rc) after $((SECONDS - began)) s; waiting for the e2e lane"
wait "$e2e_pid"
e2e_rc=$?
trap - INT TERM
echo "===================== the e2e lane (marker e2e: real vLLM engines) ====================="
cat "$e2e_log"
rm -f "$e2e_log"
echo "pytest lanes: e2e exit $e2e_rc, the other lane exit $other_rc; both ended after $((SECONDS - began)) s"
if ((other_rc != 0)); then exit "$other_rc"; fi
exit "$e2e_rc"
