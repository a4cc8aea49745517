#!/usr/bin/env python3
"""Make the tint-aux parity fixtures (CPU, float32, fixed seed).

Writes, under fixtures/aux/<name>/, a tiny random HF checkpoint (config.json + model.safetensors) and
golden.safetensors with HF transformers outputs on fixed token ids:
  input_ids      int64 [2, T]
  logits         f32   [2, T, V]
  block_inputs   f32   [L, 2, T, D]       (HF output_hidden_states[:L]: the input of each block)
  attentions     f32   [L, 2, H, T, T]    (eager attention probabilities)

Models: gpt2-tiny, opt-pre-ln (as opt-125m), opt-post-ln (as opt-350m without projections) and
opt-post-ln-proj (as opt-350m: post-LN, word_embed_proj_dim != hidden_size).
All LayerNorm gains and all biases are perturbed so they are not trivial.

Also copies the official micro GPT-2 (../shared/fixtures/official-tint/micro-gpt2-random) into
fixtures/official-tint/ with `input_ids` and the first VOCAB_SLICE vocabulary columns of
`ref_original_logits_f32` from micro_s4/golden.safetensors, so tests run on a clean clone.

Run from the repository root: python3 scripts/make_aux_fixtures.py
"""
import json
import pathlib
import shutil

import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel, OPTConfig, OPTForCausalLM

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "aux"
SHARED = ROOT.parent / "shared" / "fixtures" / "official-tint"
OFFICIAL_OUT = ROOT / "fixtures" / "official-tint"
SEED = 1234
SEQ_LEN = 16
VOCAB = 512
VOCAB_SLICE = 512


def perturb(model, generator):
    """Make LayerNorm gains and all biases non-trivial (HF initialises them to 1 and 0)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "ln" in name or "layer_norm" in name:
                p.add_(0.1 * torch.randn(p.shape, generator=generator))


def write(name, model, n_positions):
    model.eval()
    directory = OUT / name
    if directory.exists():
        shutil.rmtree(directory)
    model.save_pretrained(directory, safe_serialization=True)
    for extra in directory.iterdir():
        if extra.name not in ("config.json", "model.safetensors"):
            extra.unlink()
    generator = torch.Generator().manual_seed(SEED + 1)
    input_ids = torch.randint(0, model.config.vocab_size, (2, SEQ_LEN), generator=generator)
    assert SEQ_LEN <= n_positions
    with torch.no_grad():
        out = model(input_ids, output_hidden_states=True, output_attentions=True)
    save_file(
        {
            "input_ids": input_ids.to(torch.int64).contiguous(),
            "logits": out.logits.float().contiguous(),
            "block_inputs": torch.stack(out.hidden_states[:-1]).float().contiguous(),
            "attentions": torch.stack(out.attentions).float().contiguous(),
        },
        str(directory / "golden.safetensors"),
    )
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters")


def gpt2_tiny():
    torch.manual_seed(SEED)
    config = GPT2Config(
        vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4,
        activation_function="gelu_new", layer_norm_epsilon=1e-5, bos_token_id=0, eos_token_id=0,
        attn_implementation="eager",
    )
    model = GPT2LMHeadModel(config)
    perturb(model, torch.Generator().manual_seed(SEED + 2))
    write("gpt2-tiny", model, config.n_positions)


def opt(name, pre_ln, proj_dim):
    torch.manual_seed(SEED)
    config = OPTConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=64,
        num_attention_heads=4, max_position_embeddings=32, do_layer_norm_before=pre_ln,
        word_embed_proj_dim=proj_dim, activation_function="relu", enable_bias=True,
        layer_norm_elementwise_affine=True, pad_token_id=1, bos_token_id=2, eos_token_id=2,
        attn_implementation="eager",
    )
    model = OPTForCausalLM(config)
    perturb(model, torch.Generator().manual_seed(SEED + 3))
    write(name, model, config.max_position_embeddings)


def official_micro():
    source = SHARED / "micro-gpt2-random"
    target = OFFICIAL_OUT / "micro-gpt2-random"
    target.mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "model.safetensors", "tokenizer.json", "vocab.json", "merges.txt"):
        shutil.copy(source / f, target / f)
    golden = load_file(str(SHARED / "micro_s4" / "golden.safetensors"))
    (OFFICIAL_OUT / "micro_s4").mkdir(parents=True, exist_ok=True)
    save_file(
        {
            "input_ids": golden["input_ids"].contiguous(),
            "ref_original_logits_f32_vocab_slice": golden["ref_original_logits_f32"][
                :, :, :VOCAB_SLICE
            ].contiguous(),
        },
        str(OFFICIAL_OUT / "micro_s4" / "golden_subset.safetensors"),
    )
    (OFFICIAL_OUT / "micro_s4" / "README.md").write_text(
        "Subset of ../shared/fixtures/official-tint/micro_s4/golden.safetensors made by "
        "scripts/make_aux_fixtures.py:\n`input_ids` and the first "
        f"{VOCAB_SLICE} vocabulary columns of `ref_original_logits_f32` "
        "(`ref_original_logits_f32_vocab_slice`).\n"
    )


if __name__ == "__main__":
    gpt2_tiny()
    opt("opt-pre-ln", True, 32)
    opt("opt-post-ln", False, 32)
    opt("opt-post-ln-proj", False, 16)
    if SHARED.exists():
        official_micro()
    else:
        print(f"{SHARED} not found: fixtures/official-tint left as is")
