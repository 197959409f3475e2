#!/usr/bin/env bash
# Installs what is missing, builds, runs the smoke scenario on one local rank per core (at least 2,
# at most 4) and prints the verdict. More ranks than cores would time-slice them, and the report
# would rightly flag the one the scheduler starves.
# Exit code: trainproof's (0 PASS/WARN, 1 FAIL, 2 bad input, 3 runtime error).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh

ranks=$(nproc)
ranks=$((ranks < 2 ? 2 : ranks > 4 ? 4 : ranks))
mkdir -p out
report=out/smoke-report.json
echo
echo "== trainproof train --scenario scenarios/smoke.ini on $ranks local ranks"
set +e
scripts/mpirun.sh -np "$ranks" build/trainproof train --scenario scenarios/smoke.ini --report "$report"
code=$?
set -e
echo
echo "exit code $code; JSON report: $(pwd)/$report (reprint with: build/trainproof report $report)"
exit $code
