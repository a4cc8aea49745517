//! Loading GPT-2 from an HF `model.safetensors`.
//!
//! Key mapping (HF key, optionally prefixed `transformer.`; `D = n_embd`, `F = d_ff`, `V = vocab_size`,
//! `P = n_positions`). HF `Conv1D` weights are already `[in, out]`, our layout: nothing is transposed.
//!
//! | HF key                      | HF shape  | ours                                   | transform            |
//! |-----------------------------|-----------|----------------------------------------|----------------------|
//! | `wte.weight`                | `[V, D]`  | `wte`                                  | —                    |
//! | `wpe.weight`                | `[P, D]`  | `wpe`                                  | —                    |
//! | `h.{i}.ln_1.weight`/`.bias` | `[D]`     | `blocks[i].ln1.gamma`/`.beta`          | —                    |
//! | `h.{i}.attn.c_attn.weight`  | `[D, 3D]` | `blocks[i].attn.{query,key,value}.weight` | split columns in 3 (q, k, v) |
//! | `h.{i}.attn.c_attn.bias`    | `[3D]`    | `blocks[i].attn.{query,key,value}.bias`   | split in 3 (q, k, v)         |
//! | `h.{i}.attn.c_proj.*`       | `[D, D]`  | `blocks[i].attn.output`                | —                    |
//! | `h.{i}.ln_2.weight`/`.bias` | `[D]`     | `blocks[i].ln2.gamma`/`.beta`          | —                    |
//! | `h.{i}.mlp.c_fc.*`          | `[D, F]`  | `blocks[i].fc`                         | —                    |
//! | `h.{i}.mlp.c_proj.*`        | `[F, D]`  | `blocks[i].proj`                       | —                    |
//! | `ln_f.weight`/`.bias`       | `[D]`     | `ln_f.gamma`/`.beta`                   | —                    |
//! | `lm_head.weight`            | `[V, D]`  | not read (tied to `wte`)               | —                    |
//! | `h.{i}.attn.bias`, `.masked_bias` | —   | not read (causal-mask buffers)         | —                    |

use burn::tensor::{backend::Backend, Tensor};

use crate::attention::CausalSelfAttention;
use crate::block::DecoderBlock;
use crate::checkpoint::{linear, Checkpoint};
use crate::config::Gpt2Config;
use crate::gpt2::Gpt2;
use crate::weight_file::{TensorNaming, WeightFile};
use crate::AuxError;

/// Builds a [`Gpt2`] from a parsed checkpoint (callers check the parameter budget first:
/// `loader::with_checks`).
pub(crate) fn load_gpt2_from<B: Backend>(
    config: &Gpt2Config,
    checkpoint: &Checkpoint<'_>,
    device: &B::Device,
) -> Result<Gpt2<B>, AuxError> {
    // Checkpoints saved from `GPT2LMHeadModel` prefix keys with `transformer.`; the original `gpt2`
    // upload (saved from `GPT2Model`) does not.
    let prefix = if checkpoint.contains("transformer.wte.weight") {
        "transformer."
    } else {
        ""
    };
    let d_model = config.n_embd;
    let d_ff = config.d_ff();
    let eps = config.layer_norm_epsilon;
    let wte = checkpoint.tensor(
        &format!("{prefix}wte.weight"),
        [config.vocab_size, d_model],
        device,
    )?;
    let wpe = checkpoint.tensor(
        &format!("{prefix}wpe.weight"),
        [config.n_positions, d_model],
        device,
    )?;
    let mut blocks = Vec::with_capacity(config.n_layer);
    for i in 0..config.n_layer {
        let p = format!("{prefix}h.{i}");
        let c_attn_w: Tensor<B, 2> = checkpoint.tensor(
            &format!("{p}.attn.c_attn.weight"),
            [d_model, 3 * d_model],
            device,
        )?;
        let c_attn_b: Tensor<B, 1> =
            checkpoint.tensor(&format!("{p}.attn.c_attn.bias"), [3 * d_model], device)?;
        let part = |k: usize| {
            linear(
                c_attn_w.clone().narrow(1, k * d_model, d_model),
                Some(c_attn_b.clone().narrow(0, k * d_model, d_model)),
            )
        };
        blocks.push(DecoderBlock {
            ln1: checkpoint.layer_norm(&format!("{p}.ln_1"), d_model, eps, true, device)?,
            attn: CausalSelfAttention::multi_head(
                part(0),
                part(1),
                part(2),
                checkpoint.linear_in_out(
                    &format!("{p}.attn.c_proj"),
                    d_model,
                    d_model,
                    true,
                    device,
                )?,
                config.n_head,
            ),
            ln2: checkpoint.layer_norm(&format!("{p}.ln_2"), d_model, eps, true, device)?,
            fc: checkpoint.linear_in_out(&format!("{p}.mlp.c_fc"), d_model, d_ff, true, device)?,
            proj: checkpoint.linear_in_out(
                &format!("{p}.mlp.c_proj"),
                d_ff,
                d_model,
                true,
                device,
            )?,
        });
    }
    let ln_f = checkpoint.layer_norm(&format!("{prefix}ln_f"), d_model, eps, true, device)?;
    Ok(Gpt2 {
        wte: burn::module::Param::from_tensor(wte),
        wpe: burn::module::Param::from_tensor(wpe),
        blocks,
        ln_f,
        config: config.clone(),
        weight_file: WeightFile::new(
            checkpoint.path(),
            TensorNaming::Gpt2 {
                prefix: prefix.to_string(),
            },
        ),
    })
}

/// Loads a GPT-2 checkpoint (`model.safetensors`) with the given config.
pub fn load_gpt2<B: Backend>(
    config: &Gpt2Config,
    weights_path: &std::path::Path,
    device: &B::Device,
) -> Result<Gpt2<B>, AuxError> {
    let bytes = crate::checkpoint::read_checkpoint_bytes(weights_path)?;
    let checkpoint = Checkpoint::parse(weights_path, &bytes)?;
    let checked = crate::AuxConfig::Gpt2(config.clone());
    checked.validate(weights_path)?;
    crate::loader::with_checks(&checked, &checkpoint, || {
        load_gpt2_from(config, &checkpoint, device)
    })
}
