#!/usr/bin/env bash
# The authors' TinT timed side by side with ours (issue 65 item 1): the same seeded tiny GPT-2
# checkpoint, the same token ids, interleaved in the same minutes, every step in a fresh process.
#
#   TINT_MIRROR=<git dir of abhishekpanigrahi1996/transformer_in_transformer> scripts/official_side_by_side.sh
#
# 1. Sets up, once, in $DEST (default target/official-tint; nothing of it is committed: the authors'
#    repository has no licence file): their code at commit 1722081 (`git archive` of the mirror)
#    and a venv with torch 2.3.1, numpy 1.26.4, transformers 4.40.2 and safetensors from PyPI.
# 2. Builds xtask (dev profile, flex; the bench's build) and copies it to $DEST, then writes the
#    bench's seeded tiny checkpoint ($TMPDIR/tint-bench-gpt2-tiny: "gpt" in its path, which the
#    authors' model dispatch needs) with a one-row sgemm bench into a scratch report.
# 3. ROUNDS rounds (default 6); in each, for every B in BATCHES (default "1 2"), in turn: the
#    authors' step (scripts/official/time_official.py, torch on 2 threads, no_grad), our structured
#    and our constructed step (`xtask logits --tint --timing`), REPEAT timed steps (default 3) after
#    one untimed warm-up each. Settings on both sides: D 128, 4 layers, T 256 with the first half
#    for training, Ds 640, P 32, Hs 20, all layers simulated, one step, inner lr 1e-4, reuse on,
#    restricted prefixes.
# 4. Writes $OUT/side_by_side.json (every step time, the machine, the commit, the date) and
#    $OUT/side_by_side.md (per execution and B: median and minimum of the steps, and the ratio
#    authors' / ours of the medians, with the range of the per-round ratios).
#
# Run it on an otherwise idle machine: no build, test or training beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MIRROR=${TINT_MIRROR:?set TINT_MIRROR to a git directory of abhishekpanigrahi1996/transformer_in_transformer}
DEST=${DEST:-$ROOT/target/official-tint}
OUT=${OUT:-$ROOT/target/official-side-by-side}
ROUNDS=${ROUNDS:-6}
BATCHES=${BATCHES:-1 2}
REPEAT=${REPEAT:-3}
COMMIT=1722081db59c1a9459941ec9e2c2f039fba9f331
# Our binary's allocator keeps the pages it frees, as `cargo xtask` runs it (.cargo/config.toml's
# [env]): the copied binary below is started directly, so the script sets it. Runs before commit
# bae30c6 (2026-12-05, night) had mimalloc's default (purge after 1 s): ~6 % slower constructed steps.
export MIMALLOC_PURGE_DELAY=${MIMALLOC_PURGE_DELAY:--1}
mkdir -p "$DEST/official_run" "$OUT/logs"

# 1. The authors' code and its venv.
if [ ! -f "$DEST/official_run/README.md" ]; then
  git --git-dir="$MIRROR" archive "$COMMIT" | tar -x -C "$DEST/official_run"
fi
if [ ! -x "$DEST/venv/bin/python" ] || ! "$DEST/venv/bin/python" -c 'import torch, transformers' 2>/dev/null; then
  python3 -m venv "$DEST/venv"
  "$DEST/venv/bin/pip" install -q torch==2.3.1 numpy==1.26.4 transformers==4.40.2 safetensors
fi
TORCH=$("$DEST/venv/bin/python" -c 'import torch; print(torch.__version__)')

# 2. Our binary and the shared checkpoint.
cargo build -q -p xtask
cp target/debug/xtask "$DEST/xtask"
X=$DEST/xtask
"$X" bench --modes sgemm --repeat 1 --batch-sizes 1 --out "$OUT/checkpoint-bench.md" >"$OUT/logs/checkpoint.log" 2>&1
MODEL=${TMPDIR:-/tmp}/tint-bench-gpt2-tiny
[ -f "$MODEL/ids.json" ] || { echo "no checkpoint at $MODEL" >&2; exit 1; }
# The authors' loader (transformers 4.40) wants the safetensors metadata {"format": "pt"}: a copy of
# the checkpoint with it (same tensors), still with "gpt" in its path.
HF_MODEL=$OUT/gpt2-tiny-hf
mkdir -p "$HF_MODEL"
cp "$MODEL/config.json" "$HF_MODEL/"
"$DEST/venv/bin/python" - "$MODEL/model.safetensors" "$HF_MODEL/model.safetensors" <<'PY'
import sys
from safetensors.torch import load_file, save_file
save_file(load_file(sys.argv[1]), sys.argv[2], metadata={"format": "pt"})
PY
# B rows of the bench's sequence (the same ids in every row), with its train mask; the authors'
# code takes its 1 or 2 rows from ids-2.json, so that one is always written.
for b in $(printf '%s\n' $BATCHES 2 | sort -un); do
  python3 - "$MODEL/ids.json" "$OUT/ids-$b.json" "$b" <<'PY'
import json, sys
ids = json.load(open(sys.argv[1]))
b = int(sys.argv[3])
json.dump({"input_ids": ids["input_ids"][:1] * b, "train_mask": ids["train_mask"][:1] * b}, open(sys.argv[2], "w"))
PY
done

official() { # B round
  (cd "$DEST" && OMP_NUM_THREADS=2 TRANSFORMERS_OFFLINE=1 HF_HUB_OFFLINE=1 \
    TINT_OFFICIAL_DIR="$DEST/official_run" venv/bin/python "$ROOT/scripts/official/time_official.py" \
    "$1" "$REPEAT" --model "$HF_MODEL" --ids "$OUT/ids-2.json" --inner_lr 1e-4 \
    >"$OUT/logs/official-b$1-r$2.out" 2>"$OUT/logs/official-b$1-r$2.err")
}
ours() { # execution B round
  "$X" logits --model "$MODEL" --ids "$OUT/ids-$2.json" --out "$OUT/logits.safetensors" --tint \
    --execution "$1" --tint-prefixes 32 --tint-heads 20 --inner-lr 1e-4 --timing --repeat "$REPEAT" \
    >"$OUT/logs/$1-b$2-r$3.out" 2>"$OUT/logs/$1-b$2-r$3.err"
}
# 3. Interleaved rounds.
start=$(date -u +%FT%TZ)
for r in $(seq 1 "$ROUNDS"); do
  for b in $BATCHES; do
    official "$b" "$r"
    ours structured "$b" "$r"
    ours constructed "$b" "$r"
    echo "round $r B=$b done ($(date -u +%T))"
  done
done
end=$(date -u +%FT%TZ)

# 4. Summary.
python3 - "$OUT" "$ROUNDS" "$BATCHES" "$start" "$end" "$TORCH" "$(git rev-parse --short HEAD)" \
  "$(git status --porcelain --untracked-files=no | wc -l)" <<'PY'
import json, os, platform, statistics, sys
out, rounds, batches, start, end, torch, commit, dirty = sys.argv[1:9]
rounds, batches = int(rounds), [int(b) for b in batches.split()]
def steps(path):
    return [float(l.split()[1]) for l in open(path) if l.startswith("step_seconds")]
def rss(path):
    return next((float(l.split()[1]) for l in open(path) if l.startswith("peak_rss_mb")), None)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
machine = f"{cpu}, {os.cpu_count()} cores (nproc), {platform.machine()}"
runs = {}
for b in batches:
    for r in range(1, rounds + 1):
        runs.setdefault(("official", b), []).append(steps(f"{out}/logs/official-b{b}-r{r}.out"))
        for e in ("structured", "constructed"):
            runs.setdefault((e, b), []).append(steps(f"{out}/logs/{e}-b{b}-r{r}.out"))
med = statistics.median
rows, ratios = [], {}
for (what, b), per_round in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    flat = [s for r in per_round for s in r]
    rows.append({"what": what, "batch_size": b, "steps": per_round,
                 "median_s": med(flat), "min_s": min(flat)})
for b in batches:
    off = [med(r) for r in runs[("official", b)]]
    for e in ("structured", "constructed"):
        ours = [med(r) for r in runs[(e, b)]]
        per_round = [o / x for o, x in zip(off, ours)]
        ratios[f"{e} B={b}"] = {"ratio_of_medians": med(off) / med(ours),
                               "per_round_min": min(per_round), "per_round_max": max(per_round)}
report = {"machine": machine, "torch": torch, "authors_commit": "1722081", "ours_commit": commit,
          "ours_dirty_files": int(dirty), "start": start, "end": end, "rounds": rounds,
          "official_peak_rss_mb": {b: [rss(f"{out}/logs/official-b{b}-r{r}.out") for r in range(1, rounds + 1)] for b in batches},
          "rows": rows, "ratios": ratios}
json.dump(report, open(f"{out}/side_by_side.json", "w"), indent=1)
lines = [f"Side by side, {start} – {end}: {machine}; authors' TinT at 1722081 with torch {torch} "
         f"(2 threads, no_grad) against ours at {commit} (flex, dev profile); {rounds} interleaved rounds, "
         f"each step time the median of its process's timed steps.", "",
         "| execution | B | authors' median s | our median s | our min s | authors' / ours (ratio of medians) | per-round range |",
         "|---|---|---|---|---|---|---|"]
for b in batches:
    o = next(r for r in rows if r["what"] == "official" and r["batch_size"] == b)
    for e in ("structured", "constructed"):
        x = next(r for r in rows if r["what"] == e and r["batch_size"] == b)
        q = ratios[f"{e} B={b}"]
        lines.append(f"| {e} | {b} | {o['median_s']:.3f} | {x['median_s']:.3f} | {x['min_s']:.3f} | "
                     f"{q['ratio_of_medians']:.1f}x | {q['per_round_min']:.1f}–{q['per_round_max']:.1f}x |")
open(f"{out}/side_by_side.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
