#!/usr/bin/env bash
# One device call (run 2026-12-04 18:26 UTC on an H200, docs/performance.md "GPU: NVIDIA H200, `cuda`,
# B = 1, 16, 64"): (1) xtask bench of the tiny config on cuda at B = 1, 16 and 64 (issue 65 item 4),
# (2) the CGT icl-small Table 1 (4 variants x seeds 3-5) at batch 1024 with STEPS=auto (issue 67
# item 3), via scripts/gpu_icl_table.sh. At batch 1024 the twelve concurrent runs took 0.9-2.5 s a
# step, so only 27 steps fitted (experiments/cgt-gpu/README.md): give the CGT part a smaller BATCH.
# Run from the repository root on a lent GPU, with a `cuda` release build of xtask carried gzipped:
#   cargo build --release -p xtask --no-default-features --features cuda
#   mkdir -p .gpu-carry && strip -o /tmp/x target/release/xtask && gzip -9 -c /tmp/x >.gpu-carry/xtask-cuda.gz
#   # device call (carry .gpu-carry, which .git/info/exclude ignores): bash scripts/gpu_bench_and_icl.sh
set -u
mkdir -p target/bench-gpu
gunzip -c .gpu-carry/xtask-cuda.gz >/tmp/xtask-cuda && chmod +x /tmp/xtask-cuda || exit 1
[ -e cubecl.toml ] || printf '[compilation]\ncache = "target"\n' >cubecl.toml
TIMEV=""; [ -x /usr/bin/time ] && TIMEV="/usr/bin/time -v"
s=$(date +%s)
for b in 1,16 64; do
  t=80; [ "$b" = 64 ] && t=70
  cp docs/performance.md "target/bench-gpu/performance-$b.md"
  $TIMEV timeout $t /tmp/xtask-cuda bench --repeat 3 --batch-sizes "$b" \
    --modes structured,constructed,ref,dyn,aux,sgemm --out "target/bench-gpu/performance-$b.md" \
    >"target/bench-gpu/bench-$b.log" 2>&1
  echo "bench $b rc=$? at $(($(date +%s) - s)) s" | tee -a target/bench-gpu/bench-rc.txt
done
nvidia-smi >target/bench-gpu/nvidia-smi.txt 2>&1
tar czf "$OUT/bench.tgz" target/bench-gpu
used=$(($(date +%s) - s))
echo "bench used $used s"
XTASK=/tmp/xtask-cuda CARRY=.gpu-carry PRESET=icl-small SEEDS="3 4 5" BATCH=1024 STEPS=auto \
  PROBE_S=45 SAFETY=0.8 BUDGET_S=$((575 - used)) ASSEMBLY_S=75 OUT=$OUT bash scripts/gpu_icl_table.sh
