#!/usr/bin/env bash
# Fails when a function in app/**/*.cpp is longer than .clang-tidy allows (readability-function-size,
# LineThreshold). Reads the compile flags from BUILD_DIR/compile_commands.json, so run it after a
# build: scripts/function-size.sh [BUILD_DIR] (default build/, or $TRAINPROOF_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-${TRAINPROOF_BUILD_DIR:-build}}
config=$PWD/.clang-tidy

tidy=$(command -v clang-tidy || command -v clang-tidy-14 || true)
if [ -z "$tidy" ]; then
  echo "function-size: clang-tidy not found (scripts/setup.sh installs it)" >&2
  exit 1
fi
[ -f "$build_dir/compile_commands.json" ] ||
  { echo "function-size: no $build_dir/compile_commands.json; build first" >&2; exit 1; }

# The compile commands are g++'s, with -Wall -Wextra -Werror: warnings that clang gives and g++
# does not would fail this check, which is about function size only. -w keeps them out; real
# compile errors still fail it.
tidy_args=(--config-file="$config" --quiet --extra-arg=-w)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A config that parses but measures nothing (a misspelt key, a clang-tidy that counts otherwise)
# would pass every tree. Prove the threshold on two generated functions first: braces 80 lines
# apart pass, 81 lines apart fail.
threshold=$(sed -n '/LineThreshold/{n;s/.*value: *//p}' "$config")
[[ $threshold =~ ^[0-9]+$ ]] || { echo "function-size: no LineThreshold in $config" >&2; exit 1; }
make_function() {  # NAME LINES_BETWEEN_BRACES
  echo "int $1(int x) {"
  for ((i = 1; i < $2; i++)); do echo "  x += $i;"; done
  echo "}"
}
make_function at_threshold "$threshold" >"$work/short.cpp"
make_function over_threshold "$((threshold + 1))" >"$work/long.cpp"
if ! "$tidy" "${tidy_args[@]}" "$work/short.cpp" -- -std=c++20 >"$work/short.out" 2>&1; then
  cat "$work/short.out" >&2
  echo "function-size: self-test: a function at the threshold failed" >&2
  exit 1
fi
if "$tidy" "${tidy_args[@]}" "$work/long.cpp" -- -std=c++20 >"$work/long.out" 2>&1 ||
  ! grep -q "function 'over_threshold' exceeds" "$work/long.out"; then
  cat "$work/long.out" >&2
  echo "function-size: self-test: a function one line over the threshold was not flagged" >&2
  exit 1
fi

# One clang-tidy per room of app/ (docs/architecture.md, "Rooms of app/"), not per file: each
# room's .cpp files are read as one translation unit, as the unity build compiles them, so the
# heavy headers are parsed once a room instead of once a file. --header-filter makes the
# functions of every included .cpp count, and nothing else (headers are not checked).
rooms=()
while IFS= read -r f; do
  [ -f "$f" ] || continue  # git lists files deleted in the working tree too
  room=$(dirname "$f")
  [ -e "$work/room.${room//\//_}" ] || rooms+=("$room")
  echo "#include \"$PWD/$f\"" >>"$work/room.${room//\//_}"
done < <(git ls-files --cached --others --exclude-standard 'app/*.cpp' | sort)

# The compile flags of the app/ rooms are alike (they share their libraries' interfaces); take
# one room's from the compilation database, without its output and input.
mapfile -t flags < <(python3 - "$build_dir/compile_commands.json" <<'PY'
import json, shlex, sys
for entry in json.load(open(sys.argv[1])):
    if "/app/" not in entry["file"] and "/app/" not in entry.get("output", ""):
        continue
    args = shlex.split(entry["command"])[1:]
    keep, skip = [], False
    for a in args:
        if skip: skip = False; continue
        if a in ("-o", "-c"): skip = True; continue
        if a.startswith(("-W", "-f")) and a not in ("-fPIC",): continue
        keep.append(a)
    print("\n".join(keep)); break
PY
)
[ ${#flags[@]} -gt 0 ] || { echo "function-size: no app/ entry in $build_dir/compile_commands.json" >&2; exit 1; }

count=0
for room in "${rooms[@]}"; do
  unit=$work/${room//\//_}.cpp
  mv "$work/room.${room//\//_}" "$unit"
  count=$((count + $(wc -l <"$unit")))
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
  { "$tidy" "${tidy_args[@]}" --header-filter="^$PWD/app/.*\.cpp\$" "$unit" -- "${flags[@]}" -w \
      >"$unit.log" 2>&1 || touch "$work/failed"; } &
done
wait

for room in "${rooms[@]}"; do
  grep -E "error:|note: [0-9]+ lines|Error while" "$work/${room//\//_}.cpp.log" || true
done
if [ -e "$work/failed" ]; then
  echo "function-size: FAIL: functions over $threshold lines in app/, or clang-tidy errors" >&2
  exit 1
fi
echo "function-size: $count files in ${#rooms[@]} rooms of app/, no function over $threshold lines"
