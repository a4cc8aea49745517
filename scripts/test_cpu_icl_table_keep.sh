#!/usr/bin/env bash
# Tests `scripts/cpu_icl_table.sh keep` and `restore` on stand-in runs (tiny files, no training):
# keep copies each run's last whole checkpoint (the state and the two files it names) and its logs;
# restore brings back what target/ lacks or holds at an earlier step, and leaves a further-on run
# alone. Prints "N passed, 0 failed" or exits non-zero at the first failed check. Run from the
# repository root (CI does, from .ci/run).
set -euo pipefail
# shellcheck source=scripts/lib/check.sh
source "$(dirname "$0")/lib/check.sh"
SCRIPT=$(pwd)/scripts/cpu_icl_table.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
RUNS=target/cgt-runs/icl-small-7000steps-batch64
KEPT=runs/icl-small-7000steps-batch64
checkpoint() { # run-dir step
  mkdir -p "$1/checkpoint"
  echo "{\"next_step\":$2,\"steps\":7000,\"batch_size\":64}" >"$1/checkpoint/state.json"
  echo "model $2" >"$1/checkpoint/model-$2.mpk"
  echo "optimizer $2" >"$1/checkpoint/optimizer-$2.mpk"
  echo "log to $2" >"$1/log.jsonl"
}
same() { cmp -s "$1" "$2"; }

checkpoint "$RUNS/seed0/cgt-aux" 300
checkpoint "$RUNS/seed1/cgt-aux" 7000
echo '{"accuracy":0.5}' >"$RUNS/seed1/cgt-aux/evaluation.json"
mkdir -p "$RUNS/seed2/cgt-aux" # a run without a checkpoint yet: nothing to keep
bash "$SCRIPT" keep >/dev/null
check "keep copies the state" same "$RUNS/seed0/cgt-aux/checkpoint/state.json" "$KEPT/seed0/cgt-aux/checkpoint/state.json"
check "keep copies the model the state names" same "$RUNS/seed0/cgt-aux/checkpoint/model-300.mpk" "$KEPT/seed0/cgt-aux/checkpoint/model-300.mpk"
check "keep copies the optimiser the state names" same "$RUNS/seed0/cgt-aux/checkpoint/optimizer-300.mpk" "$KEPT/seed0/cgt-aux/checkpoint/optimizer-300.mpk"
check "keep copies the log" same "$RUNS/seed0/cgt-aux/log.jsonl" "$KEPT/seed0/cgt-aux/log.jsonl"
check "keep copies a finished run's evaluation" same "$RUNS/seed1/cgt-aux/evaluation.json" "$KEPT/seed1/cgt-aux/evaluation.json"
check "keep skips a run without a checkpoint" test ! -e "$KEPT/seed2/cgt-aux"

# The run goes on: a later keep replaces the kept checkpoint, and the old files go with it.
checkpoint "$RUNS/seed0/cgt-aux" 400
rm "$RUNS/seed0/cgt-aux/checkpoint/model-300.mpk" "$RUNS/seed0/cgt-aux/checkpoint/optimizer-300.mpk"
bash "$SCRIPT" keep >/dev/null
check "a later keep takes the new checkpoint" same "$RUNS/seed0/cgt-aux/checkpoint/model-400.mpk" "$KEPT/seed0/cgt-aux/checkpoint/model-400.mpk"
check "a later keep drops the old checkpoint's files" test ! -e "$KEPT/seed0/cgt-aux/checkpoint/model-300.mpk"

# A fresh machine: restore brings every kept run back.
rm -rf target
bash "$SCRIPT" restore >/dev/null
check "restore brings back a run's state" same "$KEPT/seed0/cgt-aux/checkpoint/state.json" "$RUNS/seed0/cgt-aux/checkpoint/state.json"
check "restore brings back the files the state names" same "$KEPT/seed0/cgt-aux/checkpoint/optimizer-400.mpk" "$RUNS/seed0/cgt-aux/checkpoint/optimizer-400.mpk"
check "restore brings back a finished run" same "$KEPT/seed1/cgt-aux/evaluation.json" "$RUNS/seed1/cgt-aux/evaluation.json"

# A machine that kept target/: a run further on than its kept copy is left as it is; one behind it
# is replaced.
checkpoint "$RUNS/seed0/cgt-aux" 500
rm -rf "$RUNS/seed1/cgt-aux"
checkpoint "$RUNS/seed1/cgt-aux" 200
bash "$SCRIPT" restore >/dev/null
check "restore leaves a further-on run" test -e "$RUNS/seed0/cgt-aux/checkpoint/model-500.mpk"
check "restore replaces a run behind its kept copy" grep -q '"next_step":7000' "$RUNS/seed1/cgt-aux/checkpoint/state.json"
check "a replaced run holds no files of its old checkpoint" test ! -e "$RUNS/seed1/cgt-aux/checkpoint/model-200.mpk"
# A kept run whose weights are not there (they are not committed) is skipped with a note; the others
# are restored.
rm -rf target
rm "$KEPT/seed0/cgt-aux/checkpoint/model-400.mpk" "$KEPT/seed0/cgt-aux/checkpoint/optimizer-400.mpk"
note=$(bash "$SCRIPT" restore 2>&1 >/dev/null)
check "restore skips a kept run without its weights" test ! -e "$RUNS/seed0/cgt-aux/checkpoint/state.json"
check "and says why" grep -q "optimizer-400.mpk are not there" <<<"$note"
check "and restores the others" same "$KEPT/seed1/cgt-aux/evaluation.json" "$RUNS/seed1/cgt-aux/evaluation.json"
check "an unknown argument is refused" bash -c "! bash '$SCRIPT' kepp 2>/dev/null"

checks_passed
