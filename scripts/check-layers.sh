#!/usr/bin/env bash
# Fails on an #include that runs against the layer order (docs/architecture.md, "Layers" and
# "Rooms of app/"): a folder includes from itself and from the folders listed for it here, nothing
# else. The rooms of app/ are folders of their own (app/cli, app/report, ...), and files directly
# in app/ are the folder "app". bench/ and tests/ sit outside the order and may include anything.
# A source folder that this table does not know fails the check, so a new room must be placed.
set -euo pipefail
cd "$(dirname "$0")/.."

below_app="train node fabric trace checkpoint data gpu kernels mpi common"
declare -A may_include=(
  [common]=""
  [kernels]="common"
  [mpi]="common"
  [checkpoint]="mpi common"
  [data]="kernels common"
  [gpu]="kernels mpi common"
  [train]="checkpoint data kernels mpi common"
  [fabric]="mpi common"
  [node]="fabric gpu kernels mpi common"
  [trace]="mpi common"
  # app/, lowest room first. A subcommand's room (accept, drill) uses the shared rooms and the
  # stages, never another subcommand's room; main and the thin subcommands in app/ use them all.
  [app/cli]="$below_app"
  [app/job]="app/cli $below_app"
  [app/report]="app/job app/cli $below_app"
  [app/judge]="app/report app/job app/cli $below_app"
  [app/stages]="app/report app/job app/cli $below_app"
  [app/accept]="app/stages app/judge app/report app/job app/cli $below_app"
  [app/drill]="app/stages app/judge app/report app/job app/cli $below_app"
  [app]="app/accept app/drill app/stages app/judge app/report app/job app/cli $below_app"
)

# Sets `layer` to the layer a path belongs to: app/ROOM for a file in a room of app/, else the
# top folder ("app" for a file directly in app/). No subshell: it runs once per include.
layer_of() {
  case $1 in
    app/*/*) layer=${1#app/} && layer="app/${layer%%/*}" ;;
    *) layer=${1%%/*} ;;
  esac
}

violations=0
checked=0
sources=$(git ls-files --cached --others --exclude-standard -- common kernels mpi checkpoint data \
  gpu train fabric node trace app | grep -E '\.(h|cpp|cu|cuh|in)$' || true)
while IFS= read -r file; do
  [ -n "$file" ] || continue
  layer_of "$file"
  from=$layer
  if [ -z "${may_include[$from]+set}" ]; then
    echo "check-layers: $file: $from/ is not in the layer table of scripts/check-layers.sh; place it there and in docs/architecture.md" >&2
    violations=$((violations + 1))
  fi
done <<<"$sources"

while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  layer_of "$file"
  from=$layer
  [ -n "${may_include[$from]+set}" ] || continue  # reported above
  [[ ${rest#*:} =~ \"([^\"]+)\" ]] || continue
  layer_of "${BASH_REMATCH[1]}"
  to=$layer
  checked=$((checked + 1))
  [ "$to" = "$from" ] && continue
  case " ${may_include[$from]} " in
    *" $to "*) continue ;;
  esac
  echo "check-layers: $file:$line: $from/ includes from $to/, but $from/ may include only: ${may_include[$from]:-nothing outside itself}" >&2
  violations=$((violations + 1))
done < <(xargs -r grep -HnE '^#include "[A-Za-z0-9_]+/' <<<"$sources")

if [ "$violations" -gt 0 ]; then
  echo "check-layers: $violations include(s) against the layer order (docs/architecture.md)" >&2
  exit 1
fi
echo "check-layers: $checked project includes follow the layer order"
