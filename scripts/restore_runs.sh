#!/usr/bin/env bash
# Brings back files that left the repository's tree: the weights and long logs of the kept CGT runs
# under runs/ (issue 63: no tracked file over 1 MB outside fixtures/). runs/ARCHIVE.sha256 names the
# commit that last tracked them and each file's SHA-256, size and path; this script takes each file
# from that commit, checks its SHA-256 and only then puts it in place (atomically). Files already
# present with the right digest are left alone. A shallow clone that lacks the commit fetches it from
# `origin` first (`git fetch --depth 1`).
#
#   scripts/restore_runs.sh                                     every archived file
#   scripts/restore_runs.sh runs/icl-small-9000steps-batch64    those under one or more prefixes
#
# Run from anywhere in the repository. MANIFEST names another manifest (the test uses one).
# Exits non-zero, naming the file, the rule and the values, when a prefix matches nothing, the
# manifest names no commit or a malformed line, the commit cannot be had, or a digest differs.
set -euo pipefail
cd "$(dirname "$0")/.."
MANIFEST=${MANIFEST:-runs/ARCHIVE.sha256}
fail() {
  echo "error: $*" >&2
  exit 1
}
[ -f "$MANIFEST" ] || fail "$MANIFEST does not exist (run from a checkout of the repository)"
commit=$(awk '$1 == "commit" { print $2 }' "$MANIFEST")
[[ "$commit" =~ ^[0-9a-f]{40}$ ]] ||
  fail "$MANIFEST must name the commit that holds the files on a line 'commit <40 hex digits>'; got '${commit}'"
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "commit $commit is not in this clone (a shallow clone?); fetching it from origin" >&2
  git fetch --quiet --depth 1 origin "$commit" ||
    fail "commit $commit (named by $MANIFEST) is not in this clone and could not be fetched from origin"
fi

matches() { # path: whether it lies under one of the prefixes given (every path when none)
  [ "$#" -gt 1 ] || return 0
  local path=$1 prefix
  shift
  for prefix in "$@"; do
    [[ "$path" == "${prefix%/}" || "$path" == "${prefix%/}/"* ]] && return 0
  done
  return 1
}

restored=0
present=0
line_no=0
while read -r sum size path rest; do
  line_no=$((line_no + 1))
  case "$sum" in '' | '#'* | commit) continue ;; esac
  [[ "$sum" =~ ^[0-9a-f]{64}$ && "$size" =~ ^[0-9]+$ && -n "$path" && -z "$rest" ]] ||
    fail "$MANIFEST line $line_no: expected '<sha256> <bytes> <path>', got '$sum $size $path $rest'"
  matches "$path" "$@" || continue
  if [ -f "$path" ] && [ "$(sha256sum "$path" | cut -d' ' -f1)" = "$sum" ]; then
    present=$((present + 1))
    continue
  fi
  mkdir -p "$(dirname "$path")"
  git cat-file blob "$commit:$path" >"$path.partial" 2>/dev/null || {
    rm -f "$path.partial"
    fail "$path is not in commit $commit (named by $MANIFEST line $line_no)"
  }
  got=$(sha256sum "$path.partial" | cut -d' ' -f1)
  got_size=$(stat -c %s "$path.partial")
  if [ "$got" != "$sum" ] || [ "$got_size" != "$size" ]; then
    rm -f "$path.partial"
    fail "$path from commit $commit has sha256 $got ($got_size bytes); $MANIFEST line $line_no says $sum ($size bytes)"
  fi
  mv "$path.partial" "$path"
  restored=$((restored + 1))
done <"$MANIFEST"
if [ "$((restored + present))" -eq 0 ]; then
  fail "no file of $MANIFEST lies under ${*:-any path}"
fi
echo "$restored restored, $present already present (from commit $commit, checked against $MANIFEST)"
