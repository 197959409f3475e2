#!/usr/bin/env bash
# isolate.sh MANIFEST COMMAND...: runs COMMAND with this machine's own copy of everything the
# bundle carries (each library, program and folder MANIFEST.txt names as a source) made unreadable,
# and ssh/rsh too, so that a dry run proves the bundle alone satisfies it, as on the GPU machine.
# scripts/device-check.sh runs it as root under `unshare -m`: in a private mount namespace the
# mounts hide these files from COMMAND alone, not from the rest of the machine.
set -e
manifest=$1
shift
# Files first: a folder hidden earlier would hide the file a link resolves to.
while IFS=$'\t' read -r kind _ source; do
  case $kind in library | program)
    target=$(readlink -f "$source")
    [ -f "$target" ] && mount --bind /dev/null "$target" ;;
  esac
done <"$manifest"
for tool in ssh rsh; do
  path=$(command -v "$tool" 2>/dev/null) && mount --bind /dev/null "$(readlink -f "$path")"
done
while IFS=$'\t' read -r kind _ source; do
  [ "$kind" = folder ] && [ -d "$source" ] && mount -t tmpfs -o size=1m none "$source"
done <"$manifest"
exec "$@"
