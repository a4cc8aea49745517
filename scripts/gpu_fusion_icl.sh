#!/usr/bin/env bash
# One lent-GPU session (15 minutes of device time) for issue 17's GPU rows with burn's kernel fusion
# and issue 18's ICL Table 1, run from the repository root with two `cuda` release builds of xtask
# made on the dev machine:
#
#   cargo build --release -p xtask --no-default-features --features cuda          # fused
#   strip -o x target/release/xtask && gzip -9 -c x >"$CARRY"/xtask-cuda.gz
#   cargo build --release -p xtask --no-default-features --features cuda-unfused  # one kernel per op
#   strip -o x target/release/xtask && gzip -9 -c x >"$CARRY"/xtask-cuda-unfused.gz
#
# (stripped and compressed, both fit in what a device call carries).
#   CARRY=.gpu-carry OUT=target/gpu-session BUDGET_S=540 scripts/gpu_fusion_icl.sh
#
# $CARRY also holds the bench checkpoint (`tint-bench-gpt2-tiny/`, written by `xtask bench`) and the
# flex logits of both executions on it (`flex-structured.safetensors`, `flex-constructed.safetensors`,
# from `xtask logits --tint --tint-prefixes 32 --tint-heads 20 --inner-lr 0.001` on its ids.json).
#
# 1. Agreement: `xtask logits --tint` of both executions with each binary, compared with the flex
#    logits (max |difference| of the first and final logits) -> agreement.txt.
# 2. Bench of the tiny config on the idle GPU, each measurement in a fresh process: fused (structured,
#    constructed, reference at B = 1, 8, 16) and unfused (structured, reference at B = 1, 16) -> performance-cuda.md, performance-cuda-unfused.md.
# 3. CGT `icl-small` (batch 64), 4 variants x seeds 0, 1, 2, as 12 concurrent processes with the fused
#    binary (the unfused one if the fused probe fails). The step count is not tuned on any result: a
#    20-step probe of the same 12 processes measures the slowest variant's seconds per step under that
#    contention, and every run gets the largest multiple of 100 steps (capped at CAP) that fits the
#    training window. Evaluation: the preset's held-out sequences, the section assembled from the final
#    checkpoints (`--only-finished`) -> cgt.tgz.
set -u
CARRY=${CARRY:-.gpu-carry}
OUT=${OUT:-target/gpu-session}
BUDGET_S=${BUDGET_S:-540}
ASSEMBLY_S=${ASSEMBLY_S:-100}
CAP=${CAP:-20000}
SEEDS=${SEEDS:-0 1 2}
PRESET=${PRESET:-icl-small}
BATCH=${BATCH:-64}
VARIANTS=(baseline cgt cgt-aux cgt-aux-reg)
start=$(date +%s)
mkdir -p "$OUT" target/gpu-logs target/gpu-sections docs/cgt
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((BUDGET_S - $(elapsed))); }
log() { echo "[$(elapsed) s] $*" | tee -a "$OUT/session.log"; }
FUSED=/tmp/xtask-cuda
UNFUSED=/tmp/xtask-cuda-unfused
gunzip -c "$CARRY/xtask-cuda.gz" >"$FUSED" && gunzip -c "$CARRY/xtask-cuda-unfused.gz" >"$UNFUSED"
chmod +x "$FUSED" "$UNFUSED"
CKPT=/tmp/tint-bench-gpt2-tiny
rm -rf "$CKPT" && cp -r "$CARRY/tint-bench-gpt2-tiny" "$CKPT"

# cubecl compiles each kernel at its first launch; a shared on-disk cache lets later processes reuse it.
[ -e cubecl.toml ] || printf '[compilation]\ncache = "target"\n[autotune]\ncache = "target"\n' >cubecl.toml
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  echo "nproc $(nproc)"
  date -u
} >"$OUT/gpu.txt" 2>&1

# 1. Agreement.
log "agreement starts"
for bin in cuda cuda-unfused; do
  for ex in structured constructed; do
    timeout 60 "/tmp/xtask-$bin" logits --model "$CKPT" --ids "$CKPT/ids.json" \
      --out "target/gpu-logs/$bin-$ex.safetensors" --tint --execution "$ex" --tint-prefixes 32 \
      --tint-heads 20 --inner-lr 0.001 >"target/gpu-logs/logits-$bin-$ex.log" 2>&1 &
  done
done
wait
python3 - "$CARRY" >"$OUT/agreement.txt" 2>&1 <<'EOF'
import sys
import numpy as np
from safetensors.numpy import load_file
carry = sys.argv[1]
ref = {ex: load_file(f"{carry}/flex-{ex}.safetensors") for ex in ("structured", "constructed")}
print("max |a - b| of first_logits / final_logits; max |logit| of flex structured:",
      {k: float(np.abs(v).max()) for k, v in ref["structured"].items()})
runs = {}
for b in ("cuda", "cuda-unfused"):
    for ex in ("structured", "constructed"):
        try:
            runs[f"{b} {ex}"] = load_file(f"target/gpu-logs/{b}-{ex}.safetensors")
        except Exception as e:
            print(f"{b} {ex}: no output ({e})")
pairs = [(k, f"flex {ex}", ref[ex]) for k in runs for ex in ("structured", "constructed") if k.endswith(ex)]
pairs += [("cuda structured", "cuda constructed", runs.get("cuda constructed")),
          ("cuda-unfused structured", "cuda-unfused constructed", runs.get("cuda-unfused constructed")),
          ("cuda structured", "cuda-unfused structured", runs.get("cuda-unfused structured"))]
for a, bname, b in pairs:
    if a not in runs or b is None:
        continue
    d = {k: float(np.abs(runs[a][k] - b[k]).max()) for k in ("first_logits", "final_logits")}
    step = float(np.abs(runs[a]["final_logits"] - runs[a]["first_logits"]).max())
    print(f"{a} vs {bname}: first {d['first_logits']:.3e} final {d['final_logits']:.3e} "
          f"(step moves logits by up to {step:.3e})")
EOF
log "agreement done: $(tr '\n' ' ' <"$OUT/agreement.txt" | cut -c1-400)"

# 2. Bench, idle GPU.
cp docs/performance.md "$OUT/performance-cuda.md"
cp docs/performance.md "$OUT/performance-cuda-unfused.md"
log "bench (fused) starts"
timeout "${BENCH_FUSED_S:-75}" "$FUSED" bench --repeat 3 --batch-sizes 1,8,16 --modes structured,constructed,ref \
  --out "$OUT/performance-cuda.md" >target/gpu-logs/bench-cuda.log 2>&1
log "bench (fused) rc=$?"
timeout "${BENCH_UNFUSED_S:-40}" "$UNFUSED" bench --repeat 3 --batch-sizes 1,16 --modes structured,ref \
  --out "$OUT/performance-cuda-unfused.md" >target/gpu-logs/bench-cuda-unfused.log 2>&1
log "bench (unfused) rc=$?"

# 3. CGT icl-small.
run_all() { # binary steps run-dir timeout
  for seed in $SEEDS; do
    for v in "${VARIANTS[@]}"; do
      timeout "$4" "$1" eval cgt --preset "$PRESET" --batch-size "$BATCH" --steps "$2" --variants "$v" \
        --seeds "$seed" --run-dir "$3" --report "target/gpu-logs/$PRESET-$v-$seed-$2.md" \
        --plots "target/gpu-logs/plots-$v-$seed-$2" >"target/gpu-logs/$PRESET-$v-$seed-$2.log" 2>&1 &
    done
  done
  wait
}
slowest_step_s() { # run-dir: the largest median step_s over every run's steps 5..
  python3 - "$1" <<'EOF'
import glob, json, statistics, sys
worst = 0.0
for path in glob.glob(f"{sys.argv[1]}/seed*/*/log.jsonl"):
    steps = [json.loads(l)["step_s"] for l in open(path)][5:]
    if steps:
        worst = max(worst, statistics.median(steps))
print(worst)
EOF
}
BIN=$FUSED
log "probe (fused) starts"
run_all "$FUSED" 20 target/gpu-probe 90
STEP_S=$(slowest_step_s target/gpu-probe)
N_RUNS=$(($(echo $SEEDS | wc -w) * ${#VARIANTS[@]}))
if [ "$STEP_S" = "0.0" ] || [ "$(find target/gpu-probe -name log.jsonl | wc -l)" -lt "$N_RUNS" ]; then
  log "fused probe incomplete; probing the unfused binary"
  BIN=$UNFUSED
  rm -rf target/gpu-probe
  run_all "$UNFUSED" 20 target/gpu-probe 90
  STEP_S=$(slowest_step_s target/gpu-probe)
fi
WINDOW=$(($(left) - ASSEMBLY_S - 25))
STEPS=$(python3 -c "import sys; s=float(sys.argv[1]); print(0 if s<=0 else min($CAP, int($WINDOW/s)//100*100))" "$STEP_S")
log "probe: slowest median step $STEP_S s under $N_RUNS processes, window $WINDOW s -> $STEPS steps with $BIN"
if [ "$STEPS" -ge 100 ]; then
  run_all "$BIN" "$STEPS" target/cgt-runs/gpu-$PRESET $((WINDOW + 20))
  log "training done"
  timeout $(($(left) - 15)) "$BIN" eval cgt --preset "$PRESET" --batch-size "$BATCH" --steps "$STEPS" \
    --variants "$(IFS=,; echo "${VARIANTS[*]}")" --seeds "$(echo $SEEDS | tr ' ' ,)" --only-finished \
    --run-dir target/cgt-runs/gpu-$PRESET --report target/gpu-sections/$PRESET.md --plots docs/cgt \
    >target/gpu-logs/assemble-$PRESET.log 2>&1
  log "assembled rc=$?"
fi
rm -f target/gpu-logs/*.safetensors
tar czf "$OUT/cgt.tgz" --exclude='*.mpk' --exclude='*.safetensors' target/gpu-sections docs/cgt \
  target/cgt-runs target/gpu-probe 2>/dev/null
tar czf "$OUT/logs.tgz" target/gpu-logs
log "done"
