#!/usr/bin/env python
# From the workplace's tools (shared/tools/official/time_official.py), with only these two comment lines added;
# run by scripts/official_side_by_side.sh.
"""Time the forward pass of the *official* TinT implementation (PyTorch, CPU).

Usage:  python time_official.py B N --model DIR --ids FILE [--check] [--threads 2] [--inner_lr 1e-4]
  B : batch size (1 or 2; the first B rows of --ids "input_ids")
  N : number of timed steps (after 1 untimed warm-up step)

Model construction follows tests/create_model.py of
abhishekpanigrahi1996/transformer_in_transformer @ 1722081db59c1a9459941ec9e2c2f039fba9f331:
    parser = HfArgumentParser((ModelArguments, ConstructionArguments, DynamicArguments,))
    model_args, construction_args, data_args = parser.parse_args_into_dataclasses()
    constructed_model, _, _, _ = TinT_Creator(model_args, construction_args)
(with the CLI arguments given below; construct_save_model left at its default False, so the
model is used in-process instead of saved + re-loaded with load_construction(); the state is
identical).  The forward call and the mask/label construction are copied from
tests/perplexity_eval.py (attention_mask = all ones since chunks are unpadded, train_fraction 0.5).

stdout:  one line "step_seconds <float>" per timed step, then "peak_rss_mb <float>".
Everything else (construction chatter, losses, checks) goes to stderr.
"""
import argparse
import contextlib
import json
import math
import os
import resource
import sys
import time

OFFICIAL_DIR = os.environ.get("TINT_OFFICIAL_DIR", "official_run")
sys.path.insert(0, OFFICIAL_DIR)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import HfArgumentParser  # noqa: E402

from tint_main.tint_creator import *  # noqa: E402,F401,F403  (as in tests/create_model.py)
from tint_main.tint_creator import TinT_Creator  # noqa: E402
from tint_main.utils.all_arguments import ModelArguments, ConstructionArguments, DynamicArguments  # noqa: E402


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # ru_maxrss is KiB on Linux


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("batch_size", type=int, choices=[1, 2])
    ap.add_argument("repeats", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", required=True, help="HF GPT-2 directory; its path must contain 'gpt'")
    ap.add_argument("--ids", required=True, help='JSON {"input_ids": [[...], [...]]}, rows of equal length')
    ap.add_argument("--inner_lr", default="1e-4")
    ap.add_argument("--train_fraction", type=float, default=0.5)
    ap.add_argument("--check", action="store_true",
                    help="also compare TinT's simulated first pass with the HF GPT-2 logits (untimed)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    log(f"torch {torch.__version__}, num_threads {torch.get_num_threads()}, "
        f"interop {torch.get_num_interop_threads()}")

    # ---------------- construction: exactly tests/create_model.py -----------------
    # NB: TinT_Creator dispatches on the substring 'gpt' in model_name_or_path.
    assert "gpt" in args.model, "official TinT_Creator needs 'gpt' in the model path"
    cli = [
        "--model_name_or_path", args.model,
        "--n_simulation_layers", "-1",
        "--n_forward_backward", "1",
        "--inner_lr", args.inner_lr,
        "--num_attention_heads", "20",
        "--hidden_size", "640",
        "--num_prefixes", "32",
        "--reuse_forward_blocks", "True",
        "--reuse_backward_blocks", "True",
        "--restrict_prefixes", "True",
        "--device", "cpu",
    ]
    parser = HfArgumentParser((ModelArguments, ConstructionArguments, DynamicArguments,))
    model_args, construction_args, data_args, = parser.parse_args_into_dataclasses(args=cli)

    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # TinT_Creator prints the whole module tree
        constructed_model, aux_model, model_config, config = TinT_Creator(model_args, construction_args)
    log(f"construction_seconds {time.perf_counter() - t0:.2f}  (peak RSS so far {peak_rss_mb():.0f} MB)")
    log(f"config: hidden_size {config.hidden_size} num_prefixes {config.num_prefixes} "
        f"heads {config.num_attention_heads} seq_length {config.seq_length} position_dim {config.position_dim} "
        f"inner_lr {config.inner_lr} gate_scale {config.gate_scale} scale_embeddings {config.scale_embeddings} "
        f"epsilon {config.epsilon} n_sim {config.n_simulation_layers} n_fb {config.n_forward_backward} "
        f"reuse_fw {config.reuse_forward_blocks} reuse_bw {config.reuse_backward_blocks} "
        f"restrict_prefixes {config.restrict_prefixes} use_einsum {config.use_einsum}")

    # as in tests/perplexity_eval.py
    constructed_model.eval()
    device = "cpu"

    # ---------------- inputs: exactly tests/perplexity_eval.py -----------------
    with open(args.ids) as f:
        ids = json.load(f)
    batch_sentences = torch.tensor(ids["input_ids"][: args.batch_size])
    if len(batch_sentences.shape) == 1:
        batch_sentences = batch_sentences.view((1, -1))
    attention_mask = torch.ones_like(batch_sentences)  # block_size chunks carry no padding
    train_fraction = args.train_fraction

    mask = torch.zeros_like(attention_mask)
    target = batch_sentences.detach().clone()
    target[torch.where(attention_mask == 0.)] = -100
    batch_seq_lengths = torch.sum(attention_mask, dim=-1)
    for i in range(len(batch_seq_lengths)):
        mask[i, :int(batch_seq_lengths[i] * train_fraction)] = 1.
        target[i, :int(batch_seq_lengths[i] * train_fraction)] = -100
    bidirection_mask = mask.float()
    gradient_mask = None
    log(f"input_ids {tuple(batch_sentences.shape)}, train tokens per row "
        f"{[int(m) for m in mask.sum(-1)]}, scored terms {int(torch.ne(target, -100).sum())}")

    def step():
        with torch.no_grad():
            return constructed_model.forward(batch_sentences.to(device), bidirection_mask.to(device),
                                             gradient_mask=gradient_mask, test_backward_pass=True,
                                             continue_from_first_forward_pass=False,
                                             labels=target.to(device))

    def report(tag, res, secs):
        ol, fl = res.original_loss.item(), res.final_loss.item()
        finite = (bool(torch.isfinite(res.logits).all()) and bool(torch.isfinite(res.original_logits).all())
                  and math.isfinite(ol) and math.isfinite(fl))
        log(f"{tag}: {secs:.3f} s  original_loss {ol:.6f} final_loss {fl:.6f}  "
            f"ppl {math.exp(ol):.3f} -> {math.exp(fl):.3f}  logits {tuple(res.logits.shape)} "
            f"max|final-first| {(res.logits - res.original_logits).abs().max().item():.4e} finite {finite}")
        if not finite:
            raise SystemExit("non-finite TinT output")

    # warm-up (untimed on stdout)
    t = time.perf_counter()
    res = step()
    report("warmup", res, time.perf_counter() - t)

    if args.check:
        with torch.no_grad():
            aux_model.eval()
            hf = aux_model(batch_sentences).logits
        d = (res.original_logits - hf).abs().max().item()
        log(f"check: max|TinT first-pass logits - HF GPT-2 logits| = {d:.3e} (max|HF| {hf.abs().max().item():.2f})")

    for k in range(args.repeats):
        t = time.perf_counter()
        res = step()
        dt = time.perf_counter() - t
        print(f"step_seconds {dt:.6f}", flush=True)
        report(f"step {k + 1}", res, dt)

    print(f"peak_rss_mb {peak_rss_mb():.1f}", flush=True)


if __name__ == "__main__":
    main()
