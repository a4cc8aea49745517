#!/usr/bin/env bash
# Fails when git tracks a file over 1 MB (1,000,000 bytes) outside fixtures/ (issue 63: a small
# clone; a run's weights are regenerated or restored by a command, checksummed, never committed).
# Lists every such file with its size. Run from anywhere in the repository (CI does, from .ci/run).
# LIMIT overrides the bound in bytes (the test of this script uses it).
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${LIMIT:-1000000}
over=$(git ls-files -z | while IFS= read -r -d '' path; do
  case "$path" in fixtures/*) continue ;; esac
  [ -f "$path" ] || continue
  size=$(stat -c %s "$path")
  [ "$size" -gt "$LIMIT" ] && echo "  $path: $size bytes"
done || true)
if [ -n "$over" ]; then
  echo "error: tracked files over $LIMIT bytes outside fixtures/ (keep JSON and small SVGs in git;" >&2
  echo "regenerate or restore the rest by a command, checksummed: runs/ARCHIVE.sha256):" >&2
  echo "$over" >&2
  exit 1
fi
echo "no tracked file over $LIMIT bytes outside fixtures/"
