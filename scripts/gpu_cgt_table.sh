#!/usr/bin/env bash
# Issue 18's CGT Table 1 on a lent GPU in one fixed window, run from the repository root with a `cuda`
# build of xtask:
#
#   cargo build --release -p xtask --no-default-features --features cuda
#   XTASK=target/release/xtask OUT=target/gpu-cgt BUDGET_S=520 scripts/gpu_cgt_table.sh
#
# Trains every (variant, seed) of `linreg-cpu` (4 variants x LINREG_SEEDS, STEPS_LINREG steps) and the
# `icl-small` ICL_VARIANTS x ICL_SEEDS (batch 64, STEPS_ICL steps) as concurrent processes on the one GPU, then
# assembles both report sections from the final checkpoints (`--only-finished`). The step counts are
# fixed in advance (800 and 2200: those of the 2026-11-26 session, which only its baselines reached),
# not chosen from any result. Runs of 2026-11-26 04:20 UTC: the defaults (12 linreg-cpu runs and the
# icl-small baseline, 185 s of training); then LINREG_SEEDS= ICL_VARIANTS="baseline cgt cgt-aux
# cgt-aux-reg" ICL_SEEDS="0 1 2". Aggregate throughput, not the process count, bounds such a session: on
# an H200 three processes ran 38 linreg steps/s together and twelve 34 steps/s, so 9,600 linreg steps
# need about 280 s whatever the split. Evaluation data are the presets' held-out sequences.
#
# Everything lands in $OUT: gpu.txt, session.log, cgt.tgz (sections, plots, run logs and checkpoint
# states) and logs.tgz (every process's output). The checkpoints' weights stay on the device (44 MB for
# linreg-cpu: more than a lent session returns).
set -u
XTASK=${XTASK:-target/release/xtask}
OUT=${OUT:-target/gpu-cgt}
BUDGET_S=${BUDGET_S:-520}
STEPS_LINREG=${STEPS_LINREG:-800}
STEPS_ICL=${STEPS_ICL:-2200}
# Which runs: linreg-cpu seeds (empty: none) and icl-small variants and seeds.
LINREG_SEEDS=${LINREG_SEEDS-1 2 3}
ICL_VARIANTS=${ICL_VARIANTS:-baseline}
ICL_SEEDS=${ICL_SEEDS:-0}
ASSEMBLY_S=${ASSEMBLY_S:-110}
start=$(date +%s)
mkdir -p "$OUT" target/gpu-logs target/gpu-sections docs/cgt
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((BUDGET_S - $(elapsed))); }
log() { echo "[$(elapsed) s] $*" | tee -a "$OUT/session.log"; }

# cubecl compiles each kernel at its first launch; a shared on-disk cache lets the processes reuse it.
[ -e cubecl.toml ] || printf '[compilation]\ncache = "target"\n' >cubecl.toml
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  echo "nproc $(nproc)"
  date -u
} >"$OUT/gpu.txt" 2>&1

train_deadline=$(($(left) - ASSEMBLY_S))
log "training starts (deadline in $train_deadline s)"
for seed in $LINREG_SEEDS; do
  for v in baseline cgt cgt-aux cgt-aux-reg; do
    timeout "$train_deadline" "$XTASK" eval cgt --preset linreg-cpu --steps "$STEPS_LINREG" \
      --variants "$v" --seeds "$seed" --run-dir target/cgt-runs/gpu-linreg-cpu \
      --report "target/gpu-logs/linreg-cpu-$v-$seed.md" --plots "target/gpu-logs/linreg-cpu-$v-$seed-plots" \
      >"target/gpu-logs/train-linreg-cpu-$v-$seed.log" 2>&1 &
  done
done
for seed in $ICL_SEEDS; do
  for v in $ICL_VARIANTS; do
    timeout "$train_deadline" "$XTASK" eval cgt --preset icl-small --batch-size 64 --steps "$STEPS_ICL" \
      --variants "$v" --seeds "$seed" --run-dir target/cgt-runs/gpu-icl-small \
      --report "target/gpu-logs/icl-small-$v-$seed.md" --plots "target/gpu-logs/icl-small-$v-$seed-plots" \
      >"target/gpu-logs/train-icl-small-$v-$seed.log" 2>&1 &
  done
done
wait
log "training done"

if [ -n "$LINREG_SEEDS" ]; then
  timeout $(($(left) - 15)) "$XTASK" eval cgt --preset linreg-cpu --steps "$STEPS_LINREG" \
    --seeds "$(echo $LINREG_SEEDS | tr ' ' ,)" --only-finished --run-dir target/cgt-runs/gpu-linreg-cpu \
    --report target/gpu-sections/linreg-cpu.md --plots docs/cgt >target/gpu-logs/assemble-linreg-cpu.log 2>&1 &
fi
timeout $(($(left) - 15)) "$XTASK" eval cgt --preset icl-small --batch-size 64 --steps "$STEPS_ICL" \
  --variants "$(echo $ICL_VARIANTS | tr ' ' ,)" --seeds "$(echo $ICL_SEEDS | tr ' ' ,)" --only-finished \
  --run-dir target/cgt-runs/gpu-icl-small --report target/gpu-sections/icl-small.md --plots docs/cgt \
  >target/gpu-logs/assemble-icl-small.log 2>&1 &
wait
log "assembled"
tar czf "$OUT/cgt.tgz" --exclude='*.mpk' --exclude='*.safetensors' target/gpu-sections docs/cgt \
  target/cgt-runs
tar czf "$OUT/logs.tgz" target/gpu-logs
log "done"
