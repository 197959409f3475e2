#!/usr/bin/env bash
# Installs what is missing, builds, runs the smoke scenario on 4 local ranks and prints the verdict.
# Exit code: trainproof's (0 PASS/WARN, 1 FAIL, 2 bad input, 3 runtime error).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh

mkdir -p out
report=out/smoke-report.json
echo
echo "== trainproof train --scenario scenarios/smoke.ini on 4 local ranks"
set +e
scripts/mpirun.sh -np 4 build/trainproof train --scenario scenarios/smoke.ini --report "$report"
code=$?
set -e
echo
echo "exit code $code; JSON report: $(pwd)/$report (reprint with: build/trainproof report $report)"
exit $code
