#!/usr/bin/env bash
# Tests scripts/cgt_text.sh with a stand-in for xtask (it records its arguments, trains nothing):
# every seed is trained by its own `eval cgt --seeds S` call, then one `--only-finished` call over
# all seeds writes the report; a kept unfinished run without its weights is removed (it cannot
# resume), while a finished one without weights and an unfinished one with weights stay. Prints
# "N passed, 0 failed" or exits non-zero at the first failed check. Run from the repository root (CI
# does, from .ci/run).
set -euo pipefail
# shellcheck source=scripts/lib/check.sh
source "$(dirname "$0")/lib/check.sh"
SCRIPT=$(pwd)/scripts/cgt_text.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

cat >fake-xtask <<EOF
#!/usr/bin/env bash
echo "\$*" >>$WORK/calls
EOF
chmod +x fake-xtask
runs=runs/cgt-text-small
state() { # dir next_step
  mkdir -p "$1/checkpoint"
  printf '{"next_step":%s,"steps":3000,"training":"{\\"steps\\":3000}"}' "$2" >"$1/checkpoint/state.json"
}
state "$runs/seed1/cgt" 3000               # finished, weights gone: read back, kept
state "$runs/seed2/cgt" 1500               # unfinished, weights gone: removed
state "$runs/seed2/baseline" 1500          # unfinished, weights here: kept
touch "$runs/seed2/baseline/checkpoint/model-1500.mpk"

out=$(XTASK=./fake-xtask SEEDS="1 2" "$SCRIPT" 2>&1)
check "the unresumable run is named and removed" \
  bash -c "[[ '$out' == *'seed2/cgt: kept at step 1500 without its weights'* ]] && [ ! -e $runs/seed2/cgt ]"
check "the finished run and the resumable one stay" \
  test -e "$runs/seed1/cgt/checkpoint/state.json" -a -e "$runs/seed2/baseline/checkpoint/model-1500.mpk"
check "one training call per seed" \
  bash -c "[ \$(grep -c -- '--seeds 1 --checkpoint-every 500' calls) = 1 ] && [ \$(grep -c -- '--seeds 2 --checkpoint-every 500' calls) = 1 ]"
check "then one assembly of all seeds, last" \
  bash -c "tail -1 calls | grep -q -- 'eval cgt --preset text-small --seeds 1,2 --only-finished --run-dir $runs'"
check "each worker's log is in the run directory" test -e "$runs/seed1.log" -a -e "$runs/seed2.log"
checks_passed
