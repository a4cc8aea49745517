//! The benchmark's model and inputs: a seeded random GPT-2 checkpoint (the same bytes every run)
//! and deterministic token ids, written where a child process and `cargo xtask logits --tint
//! --timing` can load them.

use std::path::{Path, PathBuf};

use tint_assets::write_atomic;

use super::config::BenchConfig;
use super::error::BenchError;
use tint_lab::rng;

/// Where the bench writes its checkpoint and ids file.
pub fn checkpoint_dir(config: &BenchConfig) -> PathBuf {
    let name = if config.seq_length == config.base().seq_length {
        format!("tint-bench-gpt2-{}", config.name)
    } else {
        format!("tint-bench-gpt2-{}-t{}", config.name, config.seq_length)
    };
    std::env::temp_dir().join(name)
}

/// `batch_size` deterministic sequences of `seq_length` token ids below `vocab_size`, row-major.
pub fn token_ids(vocab_size: usize, batch_size: usize, seq_length: usize) -> Vec<i64> {
    let n = (batch_size * seq_length) as i64;
    (0..n)
        .map(|i| (i * 7919 + 13) % vocab_size as i64)
        .collect()
}

/// Writes a seeded random GPT-2 checkpoint (`config.json` + `model.safetensors`) for `config`,
/// and `ids.json` with one sequence of the bench's token ids (`input_ids`, and `train_mask` = 1 on
/// the first `train_length` tokens).
///
/// # Errors
/// The directory cannot be created or a file cannot be written.
pub fn write_checkpoint(config: &BenchConfig, dir: &Path) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir).map_err(|source| BenchError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let (d, v, t) = (config.d_model, config.vocab_size, config.seq_length);
    // The experiments' generator (tint_lab::rng): the checkpoint's bytes are those of the earlier runs
    // in docs/performance.md.
    let mut rng = rng::seeded(0x5EED_0001);
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    let mut normal = |name: String, shape: Vec<usize>, mean: f32, std: f32| {
        let n: usize = shape.iter().product();
        let values = (0..n)
            .map(|_| mean + std * rng::standard_normal(&mut rng) as f32)
            .collect();
        tensors.push((name, shape, values));
    };
    normal("transformer.wte.weight".into(), vec![v, d], 0.0, 0.02);
    normal("transformer.wpe.weight".into(), vec![t, d], 0.0, 0.01);
    normal("transformer.ln_f.weight".into(), vec![d], 1.0, 0.1);
    normal("transformer.ln_f.bias".into(), vec![d], 0.0, 0.02);
    let proj_std = 0.02 / (2.0 * config.n_layers as f32).sqrt();
    for i in 0..config.n_layers {
        let p = format!("transformer.h.{i}");
        for ln in ["ln_1", "ln_2"] {
            normal(format!("{p}.{ln}.weight"), vec![d], 1.0, 0.1);
            normal(format!("{p}.{ln}.bias"), vec![d], 0.0, 0.02);
        }
        normal(format!("{p}.attn.c_attn.weight"), vec![d, 3 * d], 0.0, 0.02);
        normal(format!("{p}.attn.c_attn.bias"), vec![3 * d], 0.0, 0.02);
        normal(format!("{p}.attn.c_proj.weight"), vec![d, d], 0.0, proj_std);
        normal(format!("{p}.attn.c_proj.bias"), vec![d], 0.0, 0.02);
        normal(format!("{p}.mlp.c_fc.weight"), vec![d, 4 * d], 0.0, 0.02);
        normal(format!("{p}.mlp.c_fc.bias"), vec![4 * d], 0.0, 0.02);
        normal(
            format!("{p}.mlp.c_proj.weight"),
            vec![4 * d, d],
            0.0,
            proj_std,
        );
        normal(format!("{p}.mlp.c_proj.bias"), vec![d], 0.0, 0.02);
    }
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, shape, values)| {
            let raw = values.iter().flat_map(|x| x.to_le_bytes()).collect();
            (name, shape, raw)
        })
        .collect();
    let serialise = |e: safetensors::SafeTensorError| BenchError::Data {
        what: "serialising the checkpoint",
        reason: e.to_string(),
    };
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
        .iter()
        .map(|(name, shape, raw)| {
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), raw)
                .map(|view| (name.clone(), view))
        })
        .collect::<Result<_, _>>()
        .map_err(serialise)?;
    write_atomic(
        dir.join("model.safetensors"),
        &safetensors::serialize(views, None).map_err(serialise)?,
    )?;
    let hf_config = serde_json::json!({
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "activation_function": "gelu_new",
        "n_embd": d,
        "n_head": config.n_heads,
        "n_layer": config.n_layers,
        "n_positions": t,
        "n_ctx": t,
        "n_inner": null,
        "vocab_size": v,
        "layer_norm_epsilon": 1e-5,
        "scale_attn_weights": true,
        "tie_word_embeddings": true,
        "bos_token_id": 0,
        "eos_token_id": 0,
    });
    write_atomic(
        dir.join("config.json"),
        serde_json::to_string_pretty(&hf_config)?.as_bytes(),
    )?;
    // The bench's token ids, one sequence, for `cargo xtask logits --tint --timing`.
    let ids = token_ids(config.vocab_size, 1, config.seq_length);
    let train_mask: Vec<i64> = (0..config.seq_length)
        .map(|t| i64::from(t < config.train_length))
        .collect();
    write_atomic(
        dir.join("ids.json"),
        serde_json::json!({ "input_ids": [ids], "train_mask": [train_mask] })
            .to_string()
            .as_bytes(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use tint_aux::{load_model, AuxModel};

    #[test]
    fn checkpoint_is_seeded_and_loads() {
        let dir = std::env::temp_dir().join(format!("tint-bench-test-{}", std::process::id()));
        write_checkpoint(&BenchConfig::MICRO, &dir).unwrap();
        let first = std::fs::read(dir.join("model.safetensors")).unwrap();
        write_checkpoint(&BenchConfig::MICRO, &dir).unwrap();
        assert_eq!(first, std::fs::read(dir.join("model.safetensors")).unwrap());
        let model: AuxModel<Flex> = load_model(&dir, &Default::default()).unwrap();
        assert_eq!(model.vocab_size(), BenchConfig::MICRO.vocab_size);
        assert_eq!(model.n_layers(), BenchConfig::MICRO.n_layers);
        let ids: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("ids.json")).unwrap()).unwrap();
        let row = ids["input_ids"][0].as_array().unwrap();
        assert_eq!(row.len(), BenchConfig::MICRO.seq_length);
        // (1 · 7919 + 13) mod 512 = 7932 mod 512 = 252.
        assert_eq!(row[1].as_i64(), Some(252));
        let mask = ids["train_mask"][0].as_array().unwrap();
        let trained = mask.iter().filter(|m| m.as_i64() == Some(1)).count();
        assert_eq!(trained, BenchConfig::MICRO.train_length);
        std::fs::remove_dir_all(&dir).ok();
    }
}
