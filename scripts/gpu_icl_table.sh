#!/usr/bin/env bash
# Issue 18's ICL Table 1 (`icl-small`, 4 variants x 3 seeds) trained across several lent-GPU calls,
# run from the repository root with a `cuda` release build of xtask made on the dev machine:
#
#   cargo build --release -p xtask --no-default-features --features cuda
#   mkdir -p .gpu-carry && strip -o /tmp/x target/release/xtask && gzip -9 -c /tmp/x >.gpu-carry/xtask-cuda.gz
#   # device call (carry .gpu-carry): CARRY=.gpu-carry BUDGET_S=540 scripts/gpu_icl_table.sh
#   # back here: cat $FILES_AT/runs.tgz.part-* >.gpu-carry/runs.tgz   (the next call resumes from it)
#
# The working tree a device call sends must stay under 64 MiB. The committed runs/ (48 MB of kept CPU
# runs) puts it over that limit, so move runs/ out of the checkout for the calls and back afterwards.
# The job needs none of it.
#
# `icl-paper` in one 15-minute lease (2026-11-29, experiments/cgt-gpu/README.md, section `gpu-icl-paper-240`):
#   # call 1: CARRY=.gpu-carry PRESET=icl-paper SEEDS=0 BATCH=128 STEPS=auto PROBE_S=70 SAFETY=0.8 \
#   #         BUDGET_S=530 ASSEMBLY_S=100 scripts/gpu_icl_table.sh          (probe -> STEPS=240)
#   # call 2 (machine still warm, seed 0's runs kept): CARRY=.gpu-carry PRESET=icl-paper SEEDS="0 1" \
#   #         BATCH=128 STEPS=240 EVAL_EVERY=80 CHECKPOINT_EVERY=80 SECTION=gpu-icl-paper-240 \
#   #         BUDGET_S=430 ASSEMBLY_S=150 scripts/gpu_icl_table.sh
#
# Issue 18's ICL bar on a GPU (run 2026-11-29 23:45-23:56 UTC on an H200, experiments/cgt-icl-small/README.md, sections
# `gpu-icl-small-7000-baseline` and `gpu-icl-small-9000-baseline`; three processes at 0.027-0.029 s a
# step, so each call finished its runs): the icl-small baselines at the CPU's schedule, then three
# more seeds, then a longer schedule, three calls in one warm lease:
#   # call 1: CARRY=.gpu-carry PRESET=icl-small VARIANTS=baseline SEEDS="0 1 2" BATCH=64 STEPS=7000 \
#   #   EVAL_EVERY=500 CHECKPOINT_EVERY=100 SECTION=gpu-icl-small-7000-baseline BUDGET_S=530 \
#   #   ASSEMBLY_S=60 scripts/gpu_icl_table.sh
#   # call 2: the same with SEEDS="0 1 2 3 4 5" BUDGET_S=330 ASSEMBLY_S=50 (trains seeds 3-5 only)
#   # call 3: the same as call 1 with STEPS=9000 SECTION=gpu-icl-small-9000-baseline BUDGET_S=395 \
#   #   ASSEMBLY_S=40
#
# Why several calls: on an H100 (2026-11-27 21:56 UTC) the twelve processes together take 0.102 /
# 0.191 / 0.255 / 0.263 s a step (baseline / CGT / + aux / + aux + reg), so a call's window of about
# 470 s trains the whole twelve-run table about 1100 steps (STEPS=1100: experiments/cgt-gpu/README.md, "`icl-small`
# Table 1 — trained on an H100"), where the baseline's in-context gain is 8.6 points; the CPU baseline
# reaches issue 18's 20 points at 7000 steps. So the total step count STEPS (default 7000, the CPU
# baselines' schedule) is fixed in advance (not chosen from any result), every run checkpoints every
# CHECKPOINT_EVERY steps, each call trains until its deadline and returns the run directories with
# their checkpoints (`runs.tgz.part-*`, split under the 16-MiB limit of a returned file), and the next
# call resumes every run where it stopped (same cosine schedule: it depends on STEPS only): within one
# lease the device keeps the run directory between calls; in a later lease, given the returned parts
# back as `$CARRY/runs.tgz`. 7000 steps of CGT + aux + reg are about 1840 s of training: four to five calls.
# Once every run has its final checkpoint the report section is assembled from them
# (`--only-finished`), evaluation on the preset's held-out sequences (or on the CPU from the returned
# checkpoints, as for the 1100-step table).
#
# (The first try, `scripts/gpu_fusion_icl.sh` of commit 3b7cc90, fixed the step count from a 20-step
# probe; the faster variants' probe processes stopped early and left the slower ones a quieter GPU,
# so the probe underestimated their step 3.4x and only the baselines finished: experiments/cgt-gpu/README.md.)
#
# STEPS=auto (for a run that must finish within one call, e.g. `icl-paper` in a single 15-minute lease):
# before any run that counts, every (variant, seed) run trains concurrently for PROBE_S seconds in a
# scratch run directory (`--steps 100000`, a learning curve point every PROBE_EVAL_EVERY steps), so
# under the contention of the real runs with PROCESSES=run (with PROCESSES=seed the real runs are fewer
# processes, and the probe's step times err long); the first seed's log.jsonl gives each variant's
# step time (median of its last logged steps), its evaluation time (the largest gap between
# consecutive steps beyond their step times) and its start-up time. STEPS is then the largest multiple of 3 * ROUND (at least 3) whose slowest run
# (start-up + STEPS steps + 3 evaluations) fits SAFETY of the training window, EVAL_EVERY = STEPS / 3
# and CHECKPOINT_EVERY = EVAL_EVERY. The step count depends on timings only, never on a result.
#
# Lands in $OUT: gpu.txt, session.log, progress.txt (last logged step of every run), probe.txt (with
# STEPS=auto), runs-light.tgz (the runs without their checkpoints' weights and specialised exports:
# logs, curves, evaluation.json, state.json), runs.tgz.part-* (everything, when its parts of 15 MB
# fit in the 8 files a call returns) and once finished section.tgz (report section and plots).
set -u
CARRY=${CARRY:-.gpu-carry}
OUT=${OUT:-target/gpu-session}
BUDGET_S=${BUDGET_S:-540}
ASSEMBLY_S=${ASSEMBLY_S:-100}
STEPS=${STEPS:-7000}
CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-100}
# The learning curve (held-out accuracy and in-context gain) every EVAL_EVERY steps, kept in each
# run's curve.jsonl (so it travels with runs.tgz) and tabulated by the assembly.
EVAL_EVERY=${EVAL_EVERY:-500}
SEEDS=${SEEDS:-0 1 2}
PRESET=${PRESET:-icl-small}
BATCH=${BATCH:-64}
# VARIANTS: which columns to train and assemble, e.g. VARIANTS="cgt-aux cgt-aux-reg" for the two
# columns of the 7000-step table whose CPU runs were lost (docs/cgt.md, "Presets"); the section then
# holds those columns only, and a reading that sets them beside the CPU columns must name both backends.
# shellcheck disable=SC2206
VARIANTS=(${VARIANTS:-baseline cgt cgt-aux cgt-aux-reg})
# PROCESSES=run: one process per (seed, variant), all concurrent (the runs of 2026-11-27); =seed: one
# process per seed, training its unfinished variants in turn. On the H100 the step time grew with the
# number of concurrent processes (time-slicing, experiments/cgt-gpu/README.md); whether fewer processes train more
# steps in all is what PROCESSES=seed measures (compare the summed steps per second of the runs'
# log.jsonl with the twelve-process calls of 2026-11-27).
PROCESSES=${PROCESSES:-run}
# SECTION: the report section's and charts' name (`--section`; default gpu-<preset>-<steps>), so that
# the assembled section and the charts it ships in section.tgz do not replace the preset's own.
SECTION_GIVEN=${SECTION:-}
SECTION=${SECTION:-gpu-$PRESET-$STEPS}
PROBE_S=${PROBE_S:-60}
PROBE_EVAL_EVERY=${PROBE_EVAL_EVERY:-4}
SAFETY=${SAFETY:-0.75}
ROUND=${ROUND:-10}
start=$(date +%s)
mkdir -p "$OUT" target/gpu-logs target/gpu-sections docs/cgt
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((BUDGET_S - $(elapsed))); }
# Seconds the runs may train from now: what is left, less the assembly's share and packaging.
training_window() { echo $(($(left) - ASSEMBLY_S - 20)); }
log() { echo "[$(elapsed) s] $*" | tee -a "$OUT/session.log"; }

if [ -n "${XTASK:-}" ]; then
  BIN=$XTASK
else
  BIN=/tmp/xtask-cuda
  # BINARY: the gzipped build in $CARRY (xtask-cuda.gz, one kernel per op; or a `cuda-fused` build).
  gunzip -c "$CARRY/${BINARY:-xtask-cuda.gz}" >"$BIN" || exit 1
  chmod +x "$BIN"
fi
if [ -f "$CARRY/runs.tgz" ]; then
  tar xzf "$CARRY/runs.tgz" || exit 1
  log "resuming from $CARRY/runs.tgz"
fi
# cubecl compiles each kernel at its first launch; a shared on-disk cache lets the processes reuse it.
[ -e cubecl.toml ] || printf '[compilation]\ncache = "target"\n' >cubecl.toml
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  echo "nproc $(nproc)"
  date -u
} >"$OUT/gpu.txt" 2>&1

if [ "$STEPS" = auto ]; then
  probe_dir=target/cgt-runs/probe-$PRESET
  rm -rf "$probe_dir"
  first_seed=${SEEDS%% *}
  log "probe: ${VARIANTS[*]} x seeds $SEEDS concurrently for $PROBE_S s (timed: seed $first_seed)"
  for seed in $SEEDS; do
    for v in "${VARIANTS[@]}"; do
      timeout -k 5 "$PROBE_S" "$BIN" eval cgt --preset "$PRESET" --batch-size "$BATCH" --steps 100000 \
        --checkpoint-every 0 --eval-every "$PROBE_EVAL_EVERY" --variants "$v" --seeds "$seed" \
        --run-dir "$probe_dir" --report "target/gpu-logs/probe-$v-$seed.md" \
        --plots "target/gpu-logs/probe-plots-$v-$seed" >"target/gpu-logs/probe-$v-$seed.log" 2>&1 &
    done
  done
  wait
  window=$(training_window)
  STEPS=$(python3 - "$probe_dir/seed$first_seed" "$PROBE_S" "$window" "$SAFETY" "$ROUND" "${VARIANTS[@]}" \
    2>>"$OUT/probe.txt" <<'PY'
import json, statistics, sys
root, probe_s, window, safety, round_to = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
best = None
report = sys.stderr
for variant in sys.argv[6:]:
    records = []
    try:
        for line in open(f"{root}/{variant}/log.jsonl"):
            try:
                records.append(json.loads(line))
            except ValueError:
                pass  # the line being written when the probe was stopped
    except OSError:
        pass
    if len(records) < 3:
        print(f"{variant}: {len(records)} steps logged in {probe_s:.0f} s: too slow to size", file=report)
        print(0)
        sys.exit(0)
    step_s = statistics.median(r["step_s"] for r in records[2:][-6:])
    gaps = [b["elapsed_s"] - a["elapsed_s"] - b["step_s"] for a, b in zip(records, records[1:])]
    # No evaluation seen: assume one costs 20 steps (an evaluation is 50 batches of forwards).
    eval_s = max(gaps) if max(gaps) > 2 * step_s else 20 * step_s
    startup_s = max(probe_s - records[-1]["elapsed_s"], records[0]["step_s"])
    fit = (safety * window - startup_s - 3 * eval_s) / step_s
    print(f"{variant}: {len(records)} steps; step {step_s:.3f} s, evaluation {eval_s:.1f} s, "
          f"start-up + first step {startup_s:.1f} s; {fit:.0f} steps fit {safety} x {window:.0f} s", file=report)
    best = fit if best is None else min(best, fit)
unit = 3 * round_to
steps = int(best // unit) * unit if best >= unit else int(best // 3) * 3
print(f"STEPS = {steps}", file=report)
print(max(steps, 0))
PY
  )
  tee -a "$OUT/session.log" <"$OUT/probe.txt"
  if [ "${STEPS:-0}" -lt 3 ]; then
    log "the probe leaves no step count that fits the window; stopping"
    exit 1
  fi
  EVAL_EVERY=$((STEPS / 3))
  CHECKPOINT_EVERY=$EVAL_EVERY
  SECTION=${SECTION_GIVEN:-gpu-$PRESET-$STEPS}
fi
RUN_DIR=target/cgt-runs/gpu-$PRESET-${STEPS}steps-batch$BATCH
finished() { # variant seed
  grep -q "\"next_step\":$STEPS," "$RUN_DIR/seed$2/$1/checkpoint/state.json" 2>/dev/null
}
window=$(training_window)
log "training up to $STEPS steps until the deadline in $window s"
train() { # variants (comma-separated) seed name
  timeout "$window" "$BIN" eval cgt --preset "$PRESET" --batch-size "$BATCH" --steps "$STEPS" \
    --checkpoint-every "$CHECKPOINT_EVERY" --eval-every "$EVAL_EVERY" --variants "$1" --seeds "$2" --run-dir "$RUN_DIR" \
    --report "target/gpu-logs/$PRESET-$3.md" --plots "target/gpu-logs/plots-$3" \
    >>"target/gpu-logs/$PRESET-$3.log" 2>&1 &
}
log "processes: one per $PROCESSES"
for seed in $SEEDS; do
  todo=()
  for v in "${VARIANTS[@]}"; do
    finished "$v" "$seed" || todo+=("$v")
  done
  [ ${#todo[@]} -gt 0 ] || continue
  if [ "$PROCESSES" = seed ]; then
    train "$(IFS=,; echo "${todo[*]}")" "$seed" "seed-$seed"
  else
    for v in "${todo[@]}"; do train "$v" "$seed" "$v-$seed"; done
  fi
done
wait
all=1
for seed in $SEEDS; do
  for v in "${VARIANTS[@]}"; do
    last=$(tail -n 1 "$RUN_DIR/seed$seed/$v/log.jsonl" 2>/dev/null | python3 -c \
      "import json,sys; print(json.loads(sys.stdin.read())['step'] + 1)" 2>/dev/null || echo 0)
    echo "$v seed $seed: $last / $STEPS steps logged; checkpoint: $(cat "$RUN_DIR/seed$seed/$v/checkpoint/state.json" 2>/dev/null | tr -d '\n' | cut -c1-120)" >>"$OUT/progress.txt"
    finished "$v" "$seed" || all=0
  done
done
log "training stopped; every run finished: $all"
if [ "$all" = 1 ]; then
  timeout $(($(left) - 15)) "$BIN" eval cgt --preset "$PRESET" --batch-size "$BATCH" --steps "$STEPS" \
    --variants "$(IFS=,; echo "${VARIANTS[*]}")" --seeds "$(echo $SEEDS | tr ' ' ,)" --only-finished --eval-every "$EVAL_EVERY" \
    --section "$SECTION" --run-dir "$RUN_DIR" --report "target/gpu-sections/$PRESET.md" --plots docs/cgt \
    >target/gpu-logs/assemble.log 2>&1
  log "assembled rc=$?"
  tar czf "$OUT/section.tgz" target/gpu-sections docs/cgt target/gpu-logs/assemble.log
fi
# The runs without their weights (small: logs, curves, evaluation.json, state.json) and the whole runs
# (logs, checkpoints, specialised exports) in parts under the returned-file limit, when the parts fit
# in the 8 files a call returns beside the others.
tar czf "$OUT/runs-light.tgz" --exclude='*.mpk' --exclude='*.safetensors' "$RUN_DIR" target/gpu-logs/*.log
tar czf /tmp/runs.tgz "$RUN_DIR" target/gpu-logs/*.log
split -b 15m -d -a 1 /tmp/runs.tgz "$OUT/runs.tgz.part-"
parts=$(ls "$OUT"/runs.tgz.part-* | wc -l)
room=$((8 - $(ls "$OUT" | grep -vc '^runs.tgz.part-'))) # a call returns 8 files
if [ "$parts" -gt "$room" ]; then
  rm -f "$OUT"/runs.tgz.part-*
  log "the whole runs take $parts parts of 15 MB, more than the $room a call returns beside the other files: only runs-light.tgz comes back"
fi
log "done: $(ls "$OUT" | tr '\n' ' ')"
