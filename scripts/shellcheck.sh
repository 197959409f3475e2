#!/usr/bin/env bash
# Runs shellcheck over every shell script of the project: scripts/, bench/, slurm/ and .ci/.
# A script is a *.sh file or one whose #! line names a shell, so the Slurm templates and .ci/run
# count; new files count before they are committed. -x follows the files a script sources, so
# variables they read are not reported unused.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v shellcheck >/dev/null; then
  echo "shellcheck: not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi

scripts=()
while IFS= read -r f; do
  [ -f "$f" ] || continue  # listed by git but deleted in the working tree
  if [[ $f == *.sh ]] || head -n 1 "$f" | grep -qE '^#!.*[/ ](ba)?sh( |$)'; then scripts+=("$f"); fi
done < <(git ls-files --cached --others --exclude-standard scripts bench slurm .ci)

[ ${#scripts[@]} -gt 0 ] || { echo "shellcheck: no shell scripts found" >&2; exit 1; }
shellcheck -x "${scripts[@]}"
echo "shellcheck: ${#scripts[@]} scripts clean"
