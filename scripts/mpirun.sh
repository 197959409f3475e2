#!/usr/bin/env bash
# mpirun with the flags a single workstation or CI container needs: more ranks than cores, and
# root where the container runs as root. On a cluster use srun or your site's mpirun instead.
set -euo pipefail
flags=(--oversubscribe --map-by core --bind-to core:overload-allowed)
if [ "$(id -u)" -eq 0 ]; then flags+=(--allow-run-as-root); fi
exec mpirun "${flags[@]}" "$@"
