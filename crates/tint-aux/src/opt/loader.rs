//! Loading OPT from an HF `model.safetensors`.
//!
//! Key mapping (HF key prefixed `model.decoder.` or `decoder.`; `D = hidden_size`,
//! `E = word_embed_proj_dim`, `F = ffn_dim`, `V = vocab_size`, `P = max_position_embeddings`).
//! PyTorch `nn.Linear` stores `[out, in]`; every linear weight is transposed to our `[in, out]`.
//!
//! | HF key                                         | HF shape  | ours                          | transform |
//! |------------------------------------------------|-----------|-------------------------------|-----------|
//! | `embed_tokens.weight`                          | `[V, E]`  | `wte`                         | —         |
//! | `embed_positions.weight`                       | `[P+2, D]`| `wpe`                         | —         |
//! | `project_in.weight` (if `E != D`)              | `[D, E]`  | `project_in.weight` `[E, D]`  | transpose |
//! | `project_out.weight` (if `E != D`)             | `[E, D]`  | `project_out.weight` `[D, E]` | transpose |
//! | `layers.{i}.self_attn_layer_norm.weight`/`.bias` | `[D]`   | `blocks[i].ln1.gamma`/`.beta` | —         |
//! | `layers.{i}.self_attn.q_proj.*`                | `[D, D]`  | `blocks[i].attn.query`        | transpose |
//! | `layers.{i}.self_attn.k_proj.*`                | `[D, D]`  | `blocks[i].attn.key`          | transpose |
//! | `layers.{i}.self_attn.v_proj.*`                | `[D, D]`  | `blocks[i].attn.value`        | transpose |
//! | `layers.{i}.self_attn.out_proj.*`              | `[D, D]`  | `blocks[i].attn.output`       | transpose |
//! | `layers.{i}.final_layer_norm.weight`/`.bias`   | `[D]`     | `blocks[i].ln2.gamma`/`.beta` | —         |
//! | `layers.{i}.fc1.*`                             | `[F, D]`  | `blocks[i].fc` `[D, F]`       | transpose |
//! | `layers.{i}.fc2.*`                             | `[D, F]`  | `blocks[i].proj` `[F, D]`     | transpose |
//! | `final_layer_norm.weight`/`.bias` (pre-LN only)| `[D]`     | `ln_f.gamma`/`.beta`          | —         |
//! | `lm_head.weight`                               | `[V, E]`  | not read (tied to `wte`)      | —         |
//!
//! Biases are read only when `enable_bias`; LayerNorm weights only when `layer_norm_elementwise_affine`
//! (otherwise gamma 1, beta 0).

use std::path::Path;

use burn::module::Param;
use burn::tensor::backend::Backend;

use crate::attention::CausalSelfAttention;
use crate::block::DecoderBlock;
use crate::checkpoint::{read_checkpoint_bytes, Checkpoint};
use crate::config::{OptConfig, OPT_LAYER_NORM_EPS, OPT_POSITION_OFFSET};
use crate::opt::Opt;
use crate::weight_file::{TensorNaming, WeightFile};
use crate::AuxError;

/// Builds an [`Opt`] from a parsed checkpoint (callers check the parameter budget first:
/// `loader::with_checks`).
pub(crate) fn load_opt_from<B: Backend>(
    config: &OptConfig,
    checkpoint: &Checkpoint<'_>,
    device: &B::Device,
) -> Result<Opt<B>, AuxError> {
    // `OPTForCausalLM` checkpoints use `model.decoder.`; some older uploads use `decoder.`.
    let prefix = if checkpoint.contains("decoder.embed_tokens.weight") {
        "decoder."
    } else {
        "model.decoder."
    };
    let d_model = config.hidden_size;
    let d_embed = config.d_embed();
    let d_ff = config.ffn_dim;
    let bias = config.enable_bias;
    let affine = config.layer_norm_elementwise_affine;
    let eps = OPT_LAYER_NORM_EPS;
    let wte = checkpoint.tensor(
        &format!("{prefix}embed_tokens.weight"),
        [config.vocab_size, d_embed],
        device,
    )?;
    let wpe = checkpoint.tensor(
        &format!("{prefix}embed_positions.weight"),
        [
            config.max_position_embeddings + OPT_POSITION_OFFSET,
            d_model,
        ],
        device,
    )?;
    let (project_in, project_out) = if config.has_projections() {
        (
            Some(checkpoint.linear_out_in(
                &format!("{prefix}project_in"),
                d_embed,
                d_model,
                false,
                device,
            )?),
            Some(checkpoint.linear_out_in(
                &format!("{prefix}project_out"),
                d_model,
                d_embed,
                false,
                device,
            )?),
        )
    } else {
        (None, None)
    };
    let mut blocks = Vec::with_capacity(config.num_hidden_layers);
    for i in 0..config.num_hidden_layers {
        let p = format!("{prefix}layers.{i}");
        let attn_linear = |name: &str| {
            checkpoint.linear_out_in(
                &format!("{p}.self_attn.{name}"),
                d_model,
                d_model,
                bias,
                device,
            )
        };
        blocks.push(DecoderBlock {
            ln1: checkpoint.layer_norm(
                &format!("{p}.self_attn_layer_norm"),
                d_model,
                eps,
                affine,
                device,
            )?,
            attn: CausalSelfAttention::multi_head(
                attn_linear("q_proj")?,
                attn_linear("k_proj")?,
                attn_linear("v_proj")?,
                attn_linear("out_proj")?,
                config.num_attention_heads,
            ),
            ln2: checkpoint.layer_norm(
                &format!("{p}.final_layer_norm"),
                d_model,
                eps,
                affine,
                device,
            )?,
            fc: checkpoint.linear_out_in(&format!("{p}.fc1"), d_model, d_ff, bias, device)?,
            proj: checkpoint.linear_out_in(&format!("{p}.fc2"), d_ff, d_model, bias, device)?,
        });
    }
    let ln_f = if config.has_final_layer_norm() {
        Some(checkpoint.layer_norm(
            &format!("{prefix}final_layer_norm"),
            d_model,
            eps,
            affine,
            device,
        )?)
    } else {
        None
    };
    Ok(Opt {
        wte: Param::from_tensor(wte),
        wpe: Param::from_tensor(wpe),
        project_in,
        project_out,
        blocks,
        ln_f,
        config: config.clone(),
        weight_file: WeightFile::new(
            checkpoint.path(),
            TensorNaming::Opt {
                prefix: prefix.to_string(),
            },
        ),
    })
}

/// Loads an OPT checkpoint (`model.safetensors`) with the given config.
pub fn load_opt<B: Backend>(
    config: &OptConfig,
    weights_path: &Path,
    device: &B::Device,
) -> Result<Opt<B>, AuxError> {
    let bytes = read_checkpoint_bytes(weights_path)?;
    let checkpoint = Checkpoint::parse(weights_path, &bytes)?;
    let checked = crate::AuxConfig::Opt(config.clone());
    checked.validate(weights_path)?;
    crate::loader::with_checks(&checked, &checkpoint, || {
        load_opt_from(config, &checkpoint, device)
    })
}
