"""Writes the random tiny GPT-2 of issue #9 (D = 128, 4 layers, 4 heads, vocabulary 4096,
n_positions = 256) as an HF checkpoint (config.json + model.safetensors) for the performance runs.

Usage: python3 scripts/make_bench_gpt2_tiny.py OUT_DIR   (seeded: the same weights every time)
"""
import json
import os
import sys

import numpy as np
from safetensors.numpy import save_file

D, LAYERS, HEADS, VOCAB, POSITIONS = 128, 4, 4, 4096, 256


def main(out_dir: str) -> None:
    rng = np.random.default_rng(0)
    normal = lambda *shape, std=0.02: (rng.standard_normal(shape) * std).astype(np.float32)
    tensors = {
        "transformer.wte.weight": normal(VOCAB, D),
        "transformer.wpe.weight": normal(POSITIONS, D, std=0.01),
        "transformer.ln_f.weight": (1.0 + normal(D, std=0.1)).astype(np.float32),
        "transformer.ln_f.bias": normal(D),
    }
    proj_std = 0.02 / np.sqrt(2 * LAYERS)
    for i in range(LAYERS):
        p = f"transformer.h.{i}"
        for ln in ("ln_1", "ln_2"):
            tensors[f"{p}.{ln}.weight"] = (1.0 + normal(D, std=0.1)).astype(np.float32)
            tensors[f"{p}.{ln}.bias"] = normal(D)
        tensors[f"{p}.attn.c_attn.weight"] = normal(D, 3 * D)
        tensors[f"{p}.attn.c_attn.bias"] = normal(3 * D)
        tensors[f"{p}.attn.c_proj.weight"] = normal(D, D, std=proj_std)
        tensors[f"{p}.attn.c_proj.bias"] = normal(D)
        tensors[f"{p}.mlp.c_fc.weight"] = normal(D, 4 * D)
        tensors[f"{p}.mlp.c_fc.bias"] = normal(4 * D)
        tensors[f"{p}.mlp.c_proj.weight"] = normal(4 * D, D, std=proj_std)
        tensors[f"{p}.mlp.c_proj.bias"] = normal(D)
    config = {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "activation_function": "gelu_new",
        "n_embd": D,
        "n_head": HEADS,
        "n_layer": LAYERS,
        "n_positions": POSITIONS,
        "n_ctx": POSITIONS,
        "n_inner": None,
        "vocab_size": VOCAB,
        "layer_norm_epsilon": 1e-5,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True,
        "bos_token_id": 0,
        "eos_token_id": 0,
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpt2-tiny-bench")
