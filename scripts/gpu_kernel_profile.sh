#!/usr/bin/env bash
# Per-kernel GPU profile (Nsight Compute, gpu__time_duration) of the TinT step of the bench's tiny
# config at B = 1, constructed and structured, each with `logits --timing --repeat 1` and `2` (one
# warm-up step before the timed ones); scripts/ncu_step_kernels.py finds one step in the CSV as the
# longest block repeated back to back. Run 2026-12-04 18:31 UTC on an H200 (docs/performance.md, "GPU:
# NVIDIA H200, `cuda`, B = 1, 16, 64"): ncu serialises every launch, and the constructed runs did
# not finish a step within 150 s; a next run should give them longer, or limit the capture with
# ncu's --launch-skip / --launch-count.
# Run from the repository root on a lent GPU, with a `cuda` release build of xtask carried gzipped:
#   cargo build --release -p xtask --no-default-features --features cuda
#   mkdir -p .gpu-carry && strip -o /tmp/x target/release/xtask && gzip -9 -c /tmp/x >.gpu-carry/xtask-cuda.gz
#   # device call (carry .gpu-carry, which .git/info/exclude ignores): bash scripts/gpu_kernel_profile.sh
set -u
gunzip -c .gpu-carry/xtask-cuda.gz >/tmp/xtask-cuda && chmod +x /tmp/xtask-cuda || exit 1
[ -e cubecl.toml ] || printf '[compilation]\ncache = "target"\n' >cubecl.toml
s=$(date +%s)
mkdir -p target/prof
timeout 60 /tmp/xtask-cuda bench --repeat 1 --batch-sizes 1 --modes structured --out target/prof/p.md >target/prof/bench.log 2>&1
echo "bench rc=$? at $(($(date +%s) - s)) s"
D=/tmp/tint-bench-gpt2-tiny
which ncu || ls /opt/nvidia/nsight-compute/*/ncu
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
for e in constructed structured; do
  for r in 1 2; do
    left=$((460 - ($(date +%s) - s)))
    [ $left -gt 20 ] || break
    t=$(( left < 150 ? left : 150 ))
    timeout -s INT -k 15 $t "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv \
      --log-file "target/prof/ncu-$e-$r.csv" /tmp/xtask-cuda logits --model $D --ids $D/ids.json \
      --out /tmp/l.safetensors --tint --execution $e --tint-prefixes 32 --tint-heads 20 --inner-lr 0.001 \
      --timing --repeat $r >"target/prof/run-$e-$r.log" 2>&1
    echo "$e repeat $r rc=$? at $(($(date +%s) - s)) s; lines $(wc -l <target/prof/ncu-$e-$r.csv)"
  done
done
# and the same steps without the profiler, for the wall time beside the kernel time
for e in constructed structured; do
  timeout 40 /tmp/xtask-cuda logits --model $D --ids $D/ids.json --out /tmp/l.safetensors --tint \
    --execution $e --tint-prefixes 32 --tint-heads 20 --inner-lr 0.001 --timing --repeat 5 >"target/prof/plain-$e.log" 2>&1
done
tar czf "$OUT/prof.tgz" target/prof
echo "done at $(($(date +%s) - s)) s"
