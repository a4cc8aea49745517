#!/usr/bin/env bash
# Issue 62 item 4: paper Table 1 at the paper's budget on SmolLM2-135M-Instruct (Q4_1 GGUF
# dequantised to float32): in-context classification with 32 demonstrations (as many as fit; every
# cell records how many it kept), every layer updated for one step, on the four offline tasks.
#
#   task T        one task (mr-snippets, cr-snippets, bbc-topics, amazon-fine-food): 0 and 32 shots,
#                 seeds 0,1,2, single and multi format, label and full-context loss, with and
#                 without the paper's calibration; `icl`, `dyn-eval` (every parameter) and `tint-ref`
#                 (the functional reference of the TinT step, all 30 layers); 100 evaluation examples
#                 balanced by class; every step size tuned per (format, loss) and per seed on 16 dev
#                 examples carved from the demonstration pool, bracketed (an edge choice extends
#                 the grid up to 3 values or stops the run). Resumable cell by cell (`--resume`).
#   constructed   the constructed network (`tint`) beside `tint-ref` on a stated subset: movie
#                 reviews, 4 shots, multi format, label loss, seed 0, 16 evaluation examples, at the
#                 first non-zero step tuned for `tint-ref` (multi, label; seeds in order) in the
#                 mr-snippets piece (seed 0's dev set chose no step; the constructed network needs
#                 P + T <= 2048 positions, which 32 shots exceed).
#   matched T     the control for the paper's best TinT setting (Single format, label loss) on
#                 one task: `dyn-eval-matched` (one exact SGD step on exactly TinT's parameter
#                 groups, all 30 layers) beside `icl`, `dyn-eval` and `tint-ref`, 32 shots, seeds
#                 0,1,2, tuned as above, in one run so every difference is paired within it;
#                 the cells it shares with the task piece are taken from T.json (`--cells-from`)
#                 when the same code made it.
#   merge         one report of the task pieces present (`table1.json`, `.md`, SVGs; tasks as
#                 columns and their average): `cargo xtask eval icl-merge`, which refuses pieces of
#                 other settings (but the task) or checkpoints and cells found in two pieces.
#   merge-check   prints each piece's tuning records (grid, scores, choice, interior).
#
#   scripts/table1_paper.sh task mr-snippets
#   scripts/table1_paper.sh matched mr-snippets
#   scripts/table1_paper.sh constructed
#
# XTASK names the binary (default: a copy of target/debug/xtask made at the start). Run from the
# repository root after `cargo build -p xtask` and `cargo xtask fetch smollm2 sentiment-snippets
# bbc-topics amazon-fine-food`.
set -euo pipefail
cd "$(dirname "$0")/.."
# TABLE_OUT: where the pieces read and write their JSON (default: the committed folder; a timing
# rerun, scripts/protocol.sh, points it at a scratch folder).
OUT=${TABLE_OUT:-experiments/table1-paper}
mkdir -p "$OUT"
export MIMALLOC_PURGE_DELAY=${MIMALLOC_PURGE_DELAY:--1}
if [[ -z "${XTASK:-}" ]]; then
    XTASK=$(mktemp /tmp/xtask-table1.XXXXXX)
    cp target/debug/xtask "$XTASK"
    chmod +x "$XTASK"
fi

case "${1:-}" in
task)
    t=${2:?task: mr-snippets, cr-snippets, bbc-topics or amazon-fine-food}
    "$XTASK" eval icl --task "$t" --methods icl,dyn-eval,tint-ref --shots 0,32 --seeds 0,1,2 \
        --formats single,multi --losses label,full-context --n-test 100 --balanced-test \
        --n-dev 16 --calibration prompt --tune lr=1e-4,3e-4,1e-3,3e-3 \
        --tune eta=1e-5,1e-4,1e-3,1e-2 --tune-per-seed --sim-layers all --resume \
        --out "$OUT/$t.json"
    ;;
constructed)
    eta=$(python3 -c "
import json
r = json.load(open('$OUT/mr-snippets.json'))
print(next(t['choice'] for t in r['tuning']
           if t['method'].startswith('tint-ref on mr-snippets [multi, label], seed ')
           and t['choice'] > 0))")
    "$XTASK" eval icl --task mr-snippets --methods tint,tint-ref --shots 4 --seeds 0 \
        --formats multi --losses label --n-test 16 --balanced-test --n-dev 16 \
        --inner-lr "$eta" --sim-layers all --resume --out "$OUT/constructed-mr.json"
    ;;
matched)
    t=${2:?task: mr-snippets, cr-snippets, bbc-topics or amazon-fine-food}
    # The `icl`, `dyn-eval` and `tint-ref` cells are the task piece's (same seeds, examples,
    # tuned steps): taken from its JSON when it was made by the same code (--cells-from checks
    # that, and every cell's inputs), so only `dyn-eval-matched`'s cells are computed.
    from=()
    [[ -f "$OUT/$t.json" ]] && from=(--cells-from "$OUT/$t.json")
    "$XTASK" eval icl --task "$t" --methods icl,dyn-eval,dyn-eval-matched,tint-ref --shots 32 \
        --seeds 0,1,2 --formats single --losses label --n-test 100 --balanced-test \
        --n-dev 16 --calibration prompt --tune lr=1e-4,3e-4,1e-3,3e-3 \
        --tune eta=1e-5,1e-4,1e-3,1e-2 --tune-per-seed --sim-layers all --resume \
        "${from[@]}" --out "$OUT/$t-matched.json"
    ;;
merge)
    pieces=()
    for t in mr-snippets cr-snippets bbc-topics amazon-fine-food; do
        [[ -f "$OUT/$t.json" ]] && pieces+=("$OUT/$t.json")
    done
    "$XTASK" eval icl-merge --out "$OUT/table1.json" "${pieces[@]}"
    ;;
merge-check)
    python3 - "$OUT" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob('*.json')):
    r = json.load(open(f))
    for t in r.get('tuning', []):
        print(f.name, t['method'], t['choice'], 'interior' if t.get('interior') else 'EDGE')
PY
    ;;
*)
    echo "usage: $0 task T | constructed | matched T | merge | merge-check" >&2
    exit 2
    ;;
esac
