#!/usr/bin/env bash
# Installs what is missing, builds, and runs the acceptance run (scripts/acceptance.sh: accept,
# the recovery drill, the merged report) on scenarios/accept-smoke.ini with one local rank per
# core (at least 2, at most 4), held against this development VM's thresholds
# (scenarios/hosts/dev-vm-2core.ini), and prints the verdict. More ranks than cores would
# time-slice them, and the report would rightly flag the one the scheduler starves.
# Exit code: trainproof's (0 PASS/WARN, 1 FAIL, 2 bad input, 3 runtime error).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh

ranks=$(nproc)
ranks=$((ranks < 2 ? 2 : ranks > 4 ? 4 : ranks))
echo
echo "== scripts/acceptance.sh on $ranks local ranks (scenarios/accept-smoke.ini)"
code=0
scripts/acceptance.sh -n "$ranks" -s scenarios/accept-smoke.ini \
  -g scenarios/hosts/dev-vm-2core.ini -o out/acceptance || code=$?
if [ -f out/acceptance/acceptance.html ]; then
  echo "open the report page in a browser: $(realpath out/acceptance/acceptance.html)"
fi
exit "$code"
