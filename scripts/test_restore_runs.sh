#!/usr/bin/env bash
# Tests scripts/restore_runs.sh in a scratch repository: files removed from the tree come back from
# the commit the manifest names, byte for byte; a second run restores nothing; a prefix restores only
# its files; a wrong digest, an unknown prefix and a manifest without a commit stop with an error that
# names the file and the values, leaving no file behind. Prints "N passed, 0 failed" or exits
# non-zero at the first failed check. Run from the repository root (CI does, from .ci/run).
set -euo pipefail
# shellcheck source=scripts/lib/check.sh
source "$(dirname "$0")/lib/check.sh"
SCRIPT=$(pwd)/scripts/restore_runs.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
fails_saying() { # text command...: the command fails and its stderr contains text
  local text=$1 err
  shift
  if err=$("$@" 2>&1 >/dev/null); then return 1; fi
  [[ "$err" == *"$text"* ]] || { echo "stderr was: $err" >&2; return 1; }
}

git init --quiet .
git config user.email test@example.invalid
git config user.name test
mkdir -p scripts runs/a/checkpoint runs/b
cp "$SCRIPT" scripts/
head -c 3000 /dev/urandom >runs/a/checkpoint/model-7.mpk
printf 'log line\n' >runs/b/log.jsonl
cp runs/a/checkpoint/model-7.mpk "$WORK/model.orig"
git add . && git commit --quiet -m archive
commit=$(git rev-parse HEAD)
manifest() { # sum-of-a
  echo "# test manifest"
  echo "commit $commit"
  echo "$1  3000  runs/a/checkpoint/model-7.mpk"
  echo "$(sha256sum runs/b/log.jsonl.orig 2>/dev/null | cut -d' ' -f1 || true)  9  runs/b/log.jsonl"
}
cp runs/b/log.jsonl runs/b/log.jsonl.orig
sum_a=$(sha256sum runs/a/checkpoint/model-7.mpk | cut -d' ' -f1)
manifest "$sum_a" >runs/ARCHIVE.sha256
git rm --quiet runs/a/checkpoint/model-7.mpk runs/b/log.jsonl
git add runs/ARCHIVE.sha256 && git commit --quiet -m "files leave the tree"

check "the files are gone from the tree" test ! -e runs/a/checkpoint/model-7.mpk
bash scripts/restore_runs.sh runs/a >/dev/null
check "a prefix restores its file, byte for byte" cmp -s runs/a/checkpoint/model-7.mpk "$WORK/model.orig"
check "a prefix leaves other files alone" test ! -e runs/b/log.jsonl
check "a second run restores nothing" bash -c "bash scripts/restore_runs.sh | grep -q '^1 restored, 1 already present'"
check "everything is back" cmp -s runs/b/log.jsonl runs/b/log.jsonl.orig

rm runs/a/checkpoint/model-7.mpk
manifest "$(printf '0%.0s' {1..64})" >runs/ARCHIVE.sha256
check "a wrong digest is refused, naming the file and both digests" \
  fails_saying "runs/a/checkpoint/model-7.mpk from commit $commit has sha256 $sum_a (3000 bytes); runs/ARCHIVE.sha256 line 3 says 0000" \
  bash scripts/restore_runs.sh
check "a refused file leaves nothing behind" bash -c "! ls runs/a/checkpoint/model-7.mpk* 2>/dev/null"
manifest "$sum_a" >runs/ARCHIVE.sha256
check "an unknown prefix is refused" fails_saying "no file of runs/ARCHIVE.sha256 lies under runs/c" \
  bash scripts/restore_runs.sh runs/c
grep -v '^commit' runs/ARCHIVE.sha256 >runs/other.sha256
check "a manifest without a commit is refused" \
  fails_saying "runs/other.sha256 must name the commit" env MANIFEST=runs/other.sha256 bash scripts/restore_runs.sh
printf 'commit %s\nnot-a-digest 3 runs/x\n' "$commit" >runs/other.sha256
check "a malformed line is refused with its number" \
  fails_saying "runs/other.sha256 line 2: expected '<sha256> <bytes> <path>'" env MANIFEST=runs/other.sha256 bash scripts/restore_runs.sh

checks_passed
