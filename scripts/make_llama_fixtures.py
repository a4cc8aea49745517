#!/usr/bin/env python3
"""Golden fixtures for the LLaMA / GGUF code of tint-aux (CPU, float32).

(a) Tiny random LLaMA models in HF format (grouped-query attention, rope_theta 500, one untied and one
    tied LM head) with golden logits:
      fixtures/llama/tiny/{config.json, model.safetensors, golden.safetensors}
      fixtures/llama/tiny_tied/{...}
    golden.safetensors: input_ids int64 [2, 7], logits float32 [2, 7, vocab].
(b) SmolLM2-135M-Instruct (Q4_1 GGUF, from `cargo xtask fetch smollm2`): HF transformers dequantises the
    GGUF (`from_pretrained(dir, gguf_file=...)`, which undoes llama.cpp's q/k rotary permutation) and we
    record the logits of a few positions of a short fixed text:
      fixtures/llama/smollm2_golden.safetensors: input_ids int64 [n], hf_gguf_ids int64 [m],
      positions int64 [k], logits float32 [k, vocab].
    `input_ids` is the text tokenised as the GGUF declares (`tokenizer.ggml.pre = smollm`: every digit split
    on its own before GPT-2's byte-level regex, as in llama.cpp and SmolLM2's own tokenizer.json).
    transformers' GGUF tokenizer ignores `pre` and uses GPT-2's regex alone; its ids are kept as
    `hf_gguf_ids`, and the script checks that the two agree on the digit-free prefix of the text.

Usage: python3 scripts/make_llama_fixtures.py [--gguf PATH]
(default PATH: $TINT_CACHE or .cache/assets, then smollm2/SmolLM2-135M-Instruct.Q4_1.gguf; skipped if absent)
"""

import argparse
import json
import os
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "llama"
SMOLLM2_TEXT = (
    "The President shall from time to time give to the Congress information of the State of the Union. "
    "In 1790, George Washington spoke for 1,089 words."
)
SMOLLM2_POSITIONS = [0, 7, -1]


def make_tiny(name: str, tie: bool, seed: int) -> None:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=97,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        rms_norm_eps=1e-5,
        rope_theta=500.0,
        tie_word_embeddings=tie,
        attention_bias=False,
        mlp_bias=False,
    )
    model = LlamaForCausalLM(config).eval()
    # Default init has tiny std (0.02) and unit norms: make every parameter matter.
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            else:
                p.copy_(0.15 * torch.randn_like(p))
    out = OUT / name
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    for extra in ("generation_config.json",):
        (out / extra).unlink(missing_ok=True)
    input_ids = torch.randint(0, config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        logits = model(input_ids).logits.float()
    save_file({"input_ids": input_ids.contiguous(), "logits": logits.contiguous()}, str(out / "golden.safetensors"))
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, logits {tuple(logits.shape)}")


def default_gguf() -> Path:
    cache = Path(os.environ.get("TINT_CACHE", ROOT / ".cache" / "assets"))
    return cache / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def make_smollm2(gguf: Path) -> None:
    from tokenizers import pre_tokenizers

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    hf_gguf_ids = tokenizer(SMOLLM2_TEXT, add_special_tokens=False)["input_ids"]
    backend = tokenizer.backend_tokenizer
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    input_ids = backend.encode(SMOLLM2_TEXT, add_special_tokens=False).ids
    prefix = SMOLLM2_TEXT[: SMOLLM2_TEXT.index(" In 1790")]
    assert tokenizer(prefix, add_special_tokens=False)["input_ids"] == backend.encode(prefix, add_special_tokens=False).ids
    assert tokenizer.decode(input_ids) == SMOLLM2_TEXT

    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([input_ids])).logits[0].float()
    positions = [p % len(input_ids) for p in SMOLLM2_POSITIONS]
    save_file(
        {
            "input_ids": torch.tensor(input_ids, dtype=torch.int64),
            "hf_gguf_ids": torch.tensor(hf_gguf_ids, dtype=torch.int64),
            "positions": torch.tensor(positions, dtype=torch.int64),
            "logits": logits[positions].contiguous(),
        },
        str(OUT / "smollm2_golden.safetensors"),
    )
    (OUT / "smollm2_text.txt").write_text(SMOLLM2_TEXT)
    print(f"smollm2: {len(input_ids)} tokens (transformers' GGUF tokenizer: {len(hf_gguf_ids)}), positions {positions}")
    print("argmax at positions:", [tokenizer.decode([int(i)]) for i in logits[positions].argmax(-1)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", type=Path, default=default_gguf())
    args = parser.parse_args()
    torch.set_num_threads(2)
    make_tiny("tiny", tie=False, seed=0)
    make_tiny("tiny_tied", tie=True, seed=10)
    if args.gguf.is_file():
        make_smollm2(args.gguf)
    else:
        print(f"skipping SmolLM2: {args.gguf} not found (run `cargo xtask fetch smollm2`)")


if __name__ == "__main__":
    main()
