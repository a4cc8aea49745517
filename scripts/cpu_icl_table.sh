#!/usr/bin/env bash
# Issue 18's ICL Table 1 at 7000 steps (`icl-small`, 4 variants x 3 seeds, batch 64) trained on the
# CPU across sessions: WORKERS processes (default 2, one per core) at low priority take the unfinished
# (variant, seed) runs in the order below, each to its end; a run stopped with the session resumes
# from its last checkpoint (every 100 steps) when the script is started again. Run from the
# repository root, after `cargo build -p xtask`:
#
#   setsid nohup scripts/cpu_icl_table.sh >/tmp/cpu-icl-table.log 2>&1 &
#
# The binary is copied first (XTASK, default target/debug/xtask), so rebuilding the working tree
# while the runs train does not change the program that trains them. The runs live in
# target/cgt-runs/icl-small-7000steps-batch64, the directory of the 7000-step CPU baselines. The
# step count is the baselines' (fixed before any run, not chosen from a result); the table is
# assembled from the final checkpoints with the command that experiments/cgt-icl-small/README.md names
# (`--only-finished`). The checkpoints live in target/ and, kept with `keep` (below), in runs/
# (docs/cgt.md, "The `icl-small` Table 1 at 7000 steps on the CPU").
#
# ORDER lists the runs. Its default is the whole table, all twelve runs kept in runs/ (all finished
# on 2026-11-29: a start now restores them and trains nothing; on a machine without them it trains
# the table in this order): CGT + aux and CGT + aux + reg first, then the CGT column, then the
# baseline column. The first baseline and CGT runs (2026-11-27/28) lost their checkpoints, so both
# columns were trained again (2026-11-29) to evaluate them on the test stream and pair every column
# by seed; the baseline last, with WORKERS=3 ORDER="baseline:0 baseline:1 baseline:2".
#
# STEPS=9000 trains in target/cgt-runs/icl-small-9000steps-batch64, kept in runs/ of the same name:
# the 9000-step baselines (seeds 3-6) and the 9000-step Table 1's CGT columns, seeds 3, 4, 5
# (ORDER="cgt:3 cgt:4 cgt:5 cgt-aux:3 cgt-aux:4 cgt-aux:5 cgt-aux-reg:3 cgt-aux-reg:4
# cgt-aux-reg:5", fixed 2026-11-30 02:59 UTC; docs/cgt.md, "The `icl-small` Table 1 at 9000 steps").
#
# Each worker's burn-flex kernels run on one rayon thread (RAYON_NUM_THREADS=1 unless set): with two
# workers on two cores, one thread each trained 2.09 CGT steps a second together (0.96 s a step
# each), against 1.87 (1.07 s) with rayon's default of one thread per core in each process
# (2026-11-28 04:07-04:19 UTC, 5-6 minutes of each, nothing else running). The thread count can
# change how a parallel reduction splits its sum, so f32 rounding, not the computation. A CGT run
# is ~1.9 h of a core and an auxiliary-loss run about 1.5x that.
# The binary's allocator keeps freed pages (MIMALLOC_PURGE_DELAY=-1, as `cargo xtask` sets it from
# .cargo/config.toml): ~400x fewer page faults, and the 5-10 % of a CGT + aux step spent in the
# kernel saved (docs/performance.md, "Allocator: keeping freed pages"). Allocation does not change
# the arithmetic.
#
# Low priority: `nice -n 19` alone does not yield to other sessions. With the kernel's autogroup
# scheduling (on here: /proc/sys/kernel/sched_autogroup_enabled = 1), each session (this script
# under setsid is one) gets a fair share of the CPU whatever its processes' nice values; on
# 2026-11-28 a CI run beside the two workers got one core of two. So the script also sets its
# session's autogroup nice to 19 (/proc/self/autogroup), after which the CI run took both cores.
# Only when it leads a session of its own (setsid, as above): otherwise the session is the caller's
# terminal, whose shell would be lowered with it.
#
# Keeping the runs: target/ did not outlive every session (the runs were lost twice, on 2026-11-28 at
# 09:57 and 23:10 UTC), so the runs' latest checkpoints were committed under runs/ (KEEP_DIR) until
# 2026-12-02. Since then no file over 1 MB is committed (issue 63): the weights of those runs left the
# tree and come back, checksummed, from the commit that last held them (runs/ARCHIVE.sha256,
# scripts/restore_runs.sh; a start does this for KEEP_DIR). `scripts/cpu_icl_table.sh keep` copies
# each run's last whole checkpoint, its log.jsonl, curve.jsonl and evaluation.json from target/ to
# runs/; git ignores the weights and log.jsonl there, so what is committed is the state and the
# results, and a run that must outlive its machine needs that machine's target/ or runs/ kept. A start
# restores into target/ every kept run that target/ lacks or holds at an earlier step, skipping (with a
# note) a kept run whose weights are not there (`scripts/cpu_icl_table.sh restore` does only that).
# scripts/test_cpu_icl_table_keep.sh tests both.
set -u
STEPS=${STEPS:-7000}
RUN_DIR=target/cgt-runs/icl-small-${STEPS}steps-batch64
KEEP_DIR=${KEEP_DIR:-runs/icl-small-${STEPS}steps-batch64}

next_step() { # checkpoint-dir: the step its state.json resumes at, 0 without one
  grep -o '"next_step": *[0-9]*' "$1/state.json" 2>/dev/null | grep -o '[0-9]*$' || echo 0
}

# Copies run directory $1 to $2: the checkpoint files that state.json names, then state.json, then the
# run's logs. A checkpoint written while copying removes the files of the one before; the copy is
# then tried again, so the state in $2 always names files that are there.
copy_run() { # from to
  local from=$1 to=$2 tries step
  for tries in 1 2 3 4 5; do
    step=$(next_step "$from/checkpoint")
    [ "$step" -gt 0 ] || return 0
    if [ ! -e "$from/checkpoint/model-$step.mpk" ] && [ ! -e "$from/checkpoint/optimizer-$step.mpk" ]; then
      sleep 1
      if [ "$(next_step "$from/checkpoint")" = "$step" ]; then
        echo "  $from: its state names step $step, but model-$step.mpk and optimizer-$step.mpk are not" \
          "there (weights are not committed; scripts/restore_runs.sh brings back the archived ones); skipped" >&2
        return 0
      fi
      continue
    fi
    rm -rf "$to.partial" && mkdir -p "$to.partial/checkpoint" || return 1
    cp "$from/checkpoint/state.json" "$to.partial/checkpoint/state.json.copy" || return 1
    if cp "$from/checkpoint/model-$step.mpk" "$from/checkpoint/optimizer-$step.mpk" \
      "$to.partial/checkpoint/" 2>/dev/null &&
      [ "$(next_step "$from/checkpoint")" = "$step" ]; then
      mv "$to.partial/checkpoint/state.json.copy" "$to.partial/checkpoint/state.json"
      for f in log.jsonl curve.jsonl evaluation.json; do
        [ -f "$from/$f" ] && cp "$from/$f" "$to.partial/$f"
      done
      rm -rf "$to" && mv "$to.partial" "$to"
      echo "  $to: step $step"
      return 0
    fi
    sleep 2
  done
  rm -rf "$to.partial"
  echo "  $from: no whole checkpoint could be copied (one was being written at each try)" >&2
  return 1
}

# Every run directory (seedS/VARIANT) under $1 whose checkpoint is further on than $2's copy goes to $2.
copy_newer_runs() { # from to
  local run rel
  for run in "$1"/seed*/*/; do
    [ -d "$run/checkpoint" ] || continue
    rel=${run#"$1"/}
    rel=${rel%/}
    if [ "$(next_step "$run/checkpoint")" -gt "$(next_step "$2/$rel/checkpoint")" ]; then
      copy_run "${run%/}" "$2/$rel" || return 1
    fi
  done
}

case "${1:-}" in
  "" | keep | restore) ;;
  *)
    echo "usage: scripts/cpu_icl_table.sh [keep|restore] (none: restore, then train); not ${1:-}" >&2
    exit 2
    ;;
esac
if [ "${1:-}" = keep ]; then
  echo "keeping the runs of $RUN_DIR in $KEEP_DIR (commit its state.json, curve.jsonl and evaluation.json;"
  echo "the weights and log.jsonl stay on this machine, ignored by git: no file over 1 MB is committed):"
  copy_newer_runs "$RUN_DIR" "$KEEP_DIR"
  exit $?
fi
if [ -f runs/ARCHIVE.sha256 ] && grep -q "  $KEEP_DIR/" runs/ARCHIVE.sha256; then
  echo "bringing back the archived weights of $KEEP_DIR (scripts/restore_runs.sh):"
  bash scripts/restore_runs.sh "$KEEP_DIR" || exit 1
fi
if [ -d "$KEEP_DIR" ]; then
  echo "restoring the kept runs of $KEEP_DIR that $RUN_DIR lacks or holds at an earlier step:"
  copy_newer_runs "$KEEP_DIR" "$RUN_DIR" || exit 1
fi
[ "${1:-}" = restore ] && exit 0

if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ]; then
  echo 19 >/proc/self/autogroup 2>/dev/null || echo "note: could not lower this session's autogroup priority"
else
  echo "note: not started with setsid: the workers share this terminal session's CPU share"
fi
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-1}
export MIMALLOC_PURGE_DELAY=${MIMALLOC_PURGE_DELAY:--1}
WORKERS=${WORKERS:-2}
ORDER=${ORDER:-"cgt-aux:0 cgt-aux:1 cgt-aux:2 cgt-aux-reg:0 cgt-aux-reg:1 cgt-aux-reg:2 cgt:0 cgt:1 cgt:2
  baseline:0 baseline:1 baseline:2"}
BIN=/tmp/xtask-cpu-icl-table
cp "${XTASK:-target/debug/xtask}" "$BIN" || exit 1
CLAIMS=$(mktemp -d)

finished() { # variant seed
  [ "$(next_step "$RUN_DIR/seed$2/$1/checkpoint")" = "$STEPS" ]
}

worker() {
  for run in $ORDER; do
    variant=${run%%:*}
    seed=${run##*:}
    finished "$variant" "$seed" && continue
    mkdir "$CLAIMS/$run" 2>/dev/null || continue # another worker has it
    echo "[$(date -u +%H:%M:%S)] worker $1: $variant seed $seed"
    nice -n 19 "$BIN" eval cgt --preset icl-small --steps "$STEPS" --batch-size 64 \
      --variants "$variant" --eval-every 500 --checkpoint-every 100 --seeds "$seed" \
      --report "target/cpu-icl-table-$variant-$seed.md" --plots "target/cpu-icl-table-plots" \
      >>"target/cpu-icl-table-$variant-$seed.log" 2>&1
    rc=$? # before the date below, whose substitution would set $? to 0
    echo "[$(date -u +%H:%M:%S)] worker $1: $variant seed $seed stopped, rc $rc"
  done
}

for w in $(seq 1 "$WORKERS"); do
  worker "$w" &
done
wait
echo "[$(date -u +%H:%M:%S)] no run left to start"
