#!/usr/bin/env bash
# Fails on an #include that runs against the layer order (docs/architecture.md, "Layers"): a
# folder includes from itself and from the folders listed for it here, nothing else. bench/ and
# tests/ sit outside the order and may include anything.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A may_include=(
  [common]=""
  [kernels]="common"
  [mpi]="common"
  [checkpoint]="mpi common"
  [data]="kernels common"
  [gpu]="kernels mpi common"
  [train]="checkpoint data kernels mpi common"
  [fabric]="mpi common"
  [app]="train fabric checkpoint data gpu kernels mpi common"
)

folders=()
for folder in "${!may_include[@]}"; do folders+=("$folder/"); done

violations=0
checked=0
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  from=${file%%/*}
  to=$(sed -E 's|^[^"]*"([A-Za-z0-9_]+)/.*|\1|' <<<"${rest#*:}")
  checked=$((checked + 1))
  [ "$to" = "$from" ] && continue
  case " ${may_include[$from]} " in
    *" $to "*) continue ;;
  esac
  echo "check-layers: $file:$line: $from/ includes from $to/, but $from/ may include only: ${may_include[$from]:-nothing outside itself}" >&2
  violations=$((violations + 1))
done < <(git ls-files --cached --others --exclude-standard -- "${folders[@]}" |
  grep -E '\.(h|cpp|cu|cuh|in)$' | xargs -r grep -HnE '^#include "[A-Za-z0-9_]+/')

if [ "$violations" -gt 0 ]; then
  echo "check-layers: $violations include(s) against the layer order (docs/architecture.md)" >&2
  exit 1
fi
echo "check-layers: $checked project includes follow the layer order"
