#!/usr/bin/env bash
# The dry run's stand-in for `nvidia-smi -L` on an 8-GPU node: it makes the device check take the
# multi-GPU branch on a machine without a GPU (where those stages then skip).
if [ "${1:-}" = -L ]; then
  for i in 0 1 2 3 4 5 6 7; do
    printf 'GPU %d: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-00000000000%d)\n' "$i" "$i"
  done
  exit 0
fi
echo "fake-nvidia-smi: only -L is faked" >&2
exit 9
