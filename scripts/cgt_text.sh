#!/usr/bin/env bash
# Issue 67: CGT on text mixtures (`text-small`: the four variants of Table 1 and the widened baseline,
# 3,000 steps, seeds 1-3) on the 2-core CPU, then the report. One command, resumable across sessions:
#
#   cargo build -p xtask && setsid nohup scripts/cgt_text.sh >/tmp/cgt-text.log 2>&1 &
#
# Each seed is one `cargo xtask eval cgt --preset text-small --seeds S` process (its five variants
# in turn; about 1.8 h of one core on an idle machine, so one seed fits in a session). WORKERS seeds
# (default 2, one per core) train at once, each on one rayon thread (RAYON_NUM_THREADS=1: one thread
# each gives about twice the throughput of two processes of two threads, or of one; the thread
# count changes f32 rounding only). Checkpoints every 500 steps; a stopped run resumes from its last
# one when the script is started again.
#
# The runs live in RUN_DIR (runs/cgt-text-small): git keeps their `evaluation.json` and
# `checkpoint/state.json` and ignores weights and `log.jsonl`. A finished run whose weights are gone
# (a fresh clone) is read back from its `evaluation.json`, so the finished seeds need no training
# again; an unfinished run whose weights are gone cannot resume and is started again (its directory
# is removed first, with a note).
#
# Then the section `cgt:text-small` of experiments/cgt-text/README.md and its charts in docs/cgt/
# are written from the finished runs (`--only-finished`), and each worker's progress and
# `/usr/bin/time -v` are in RUN_DIR/seedS.log. The binary is copied first (XTASK, default
# target/debug/xtask), so rebuilding the tree while the runs train does not change the program.
set -euo pipefail
SEEDS=${SEEDS:-"1 2 3"}
WORKERS=${WORKERS:-2}
RUN_DIR=${RUN_DIR:-runs/cgt-text-small}
XTASK=${XTASK:-target/debug/xtask}
REPORT=${REPORT:-experiments/cgt-text/README.md}
PLOTS=${PLOTS:-docs/cgt}

[ -x "$XTASK" ] || { echo "no $XTASK: run cargo build -p xtask first" >&2; exit 1; }
BIN_DIR=$(mktemp -d)
trap 'rm -rf "$BIN_DIR"' EXIT
cp "$XTASK" "$BIN_DIR/xtask"
mkdir -p "$RUN_DIR"

# A kept state of an unfinished run without the weights it names cannot be resumed.
for state in "$RUN_DIR"/seed*/*/checkpoint/state.json; do
  [ -e "$state" ] || continue
  checkpoint=$(dirname "$state")
  step=$(grep -o '"next_step": *[0-9]*' "$state" | grep -o '[0-9]*$')
  final=$(grep -o '"steps": *[0-9]*' "$state" | head -1 | grep -o '[0-9]*$')
  if [ "$step" != "$final" ] && [ ! -e "$checkpoint/model-$step.mpk" ]; then
    echo "$(dirname "$checkpoint"): kept at step $step without its weights; training it again"
    rm -rf "$(dirname "$checkpoint")"
  fi
done

train_seed() { # seed
  RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-1} /usr/bin/time -v "$BIN_DIR/xtask" eval cgt \
    --preset text-small --seeds "$1" --checkpoint-every 500 --run-dir "$RUN_DIR" \
    --plots "$BIN_DIR/plots-$1" --report "$BIN_DIR/report-$1.md" >>"$RUN_DIR/seed$1.log" 2>&1
}
export -f train_seed
export BIN_DIR RUN_DIR
echo "$(date -u +%FT%TZ) training seeds $SEEDS, $WORKERS at a time, in $RUN_DIR"
# shellcheck disable=SC2086
printf '%s\n' $SEEDS | xargs -P "$WORKERS" -I{} bash -c 'train_seed {} || echo "seed {} failed: see $RUN_DIR/seed{}.log"'

seeds=$(printf '%s\n' $SEEDS | paste -sd, -)
echo "$(date -u +%FT%TZ) assembling seeds $seeds into $REPORT"
"$BIN_DIR/xtask" eval cgt --preset text-small --seeds "$seeds" --only-finished \
  --run-dir "$RUN_DIR" --plots "$PLOTS" --report "$REPORT"
