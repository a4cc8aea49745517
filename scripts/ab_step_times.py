#!/usr/bin/env python3
"""Interleaved A/B timing of one TinT step: two (or more) xtask binaries, the same checkpoint and ids.

    scripts/ab_step_times.py ROUNDS EXECUTION B LABEL=BINARY[:VAR=VALUE...] LABEL=BINARY[:...] ...

Each round runs every binary once, in a fresh process (the order alternating between rounds):
`xtask logits --tint --execution EXECUTION --timing --repeat 5` on the bench's seeded tiny GPT-2
(`$TMPDIR/tint-bench-gpt2-tiny`, written by `cargo xtask bench`) with the bench's sequence repeated
B times (T = 256, the first 128 tokens training; Ds 640, P 32, Hs 20, all layers, one step, inner lr
1e-4: the settings of scripts/official_side_by_side.sh). Prints each round's median / minimum per
binary, then the median and minimum over all timed steps. Each binary's logits go to
`$TMPDIR/ab-LABEL.safetensors`: `cmp` two of them to check that a speed change kept the outputs.
Every binary runs with `MIMALLOC_PURGE_DELAY=-1`, as `cargo xtask` and
scripts/official_side_by_side.sh run it, unless its variant sets another value. Run it on an
otherwise idle machine (docs/performance.md: "Performance is measured side by side").
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

if len(sys.argv) < 5:
    sys.exit(__doc__)
rounds, execution, batch = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
tmp = tempfile.gettempdir()
model = os.path.join(tmp, "tint-bench-gpt2-tiny")
if not os.path.isfile(os.path.join(model, "ids.json")):
    sys.exit(f"no bench checkpoint at {model}: run `cargo xtask bench` first")
one = json.load(open(os.path.join(model, "ids.json")))
ids_path = os.path.join(tmp, f"ab-ids-{batch}.json")
json.dump({"input_ids": one["input_ids"][:1] * batch, "train_mask": one["train_mask"][:1] * batch},
          open(ids_path, "w"))
variants = []
for arg in sys.argv[4:]:
    label, rest = arg.split("=", 1)
    binary, *settings = rest.split(":")
    env = dict(os.environ, MIMALLOC_PURGE_DELAY="-1")
    for setting in settings:
        key, value = setting.split("=", 1)
        env[key] = value
    variants.append((label, binary, env))
steps = {label: [] for label, _, _ in variants}
for r in range(rounds):
    for label, binary, env in (variants if r % 2 == 0 else variants[::-1]):
        out = subprocess.run(
            [binary, "logits", "--model", model, "--ids", ids_path,
             "--out", os.path.join(tmp, f"ab-{label}.safetensors"), "--tint", "--execution", execution,
             "--tint-prefixes", "32", "--tint-heads", "20", "--inner-lr", "1e-4", "--timing", "--repeat", "5"],
            env=env, capture_output=True, text=True)
        times = [float(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("step_seconds")]
        if not times:
            sys.exit(f"{label}: no step_seconds from {binary}:\n{out.stderr[-2000:]}")
        steps[label].append(times)
    print(f"round {r}: " + "  ".join(
        f"{label} {statistics.median(steps[label][-1]):.4f}/{min(steps[label][-1]):.4f}" for label, _, _ in variants),
        flush=True)
for label, _, _ in variants:
    flat = [t for per_round in steps[label] for t in per_round]
    print(f"{label}: median {statistics.median(flat):.4f} min {min(flat):.4f} over {len(flat)} steps")
