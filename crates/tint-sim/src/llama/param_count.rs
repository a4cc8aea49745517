//! Parameter count of the LLaMA TinT simulator, counted the way the GPT-2 simulator counts it
//! (docs/construction.md §11): token embedding (and an untied head), every prefix block, one copy of the
//! forward modules per layer, one copy of the backward modules per simulated layer and step, the
//! final-norm gradient module and its prefix block, and the final forward pass's module copies.
//!
//! Closed form (`ops::*` = the §11 per-module counts of [`tint_ops::param_count`]; `ROT` = the
//! rotary tables `2 Tmax h_a` plus `rotate_half` as a split-wise op over `D / h_a` blocks,
//! `D h_a + D`; the GLU modules hold only their gates `G`; RMSNorm forward = `LNF`, RMSNorm
//! backward = `LNB - LB`):
//! ```text
//! FM = 2 LNF + (AF + ROT) + LF (W_O) + 2 LF (gate/up shared, down) + G (GLU)
//! BM = LDB (W_O) + AB + 2 (LNB - LB) + 2 LDB (down, gate/up shared) + G (GLU)
//! GM = LNF + (LNB - LB)
//! prefix blocks per layer = 6 + 3 ceil(d_ff / D)   (RMS₁, Q, K, V, O, RMS₂, gate/up/down per chunk)
//! total = V D (+ V D untied) + L (FM + blocks P Ds) + n_sim n_fb (BM + FM) + GM + P Ds
//! ```

use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::DType;
use tint_ops::dims::MAX_POSITION_EMBEDDINGS;
use tint_ops::{param_count as ops, AttentionVariant, TintDims, TintOptions};
use tint_ops::{NormBackward, NormForward, NormKind};

use super::attention_half::SimulatedAttentionHalf;
use super::mlp_half::SimulatedMlpHalf;
use super::params::LlamaParams;
use super::simulator::LlamaSimulatorConfig;
use crate::error::SimError;

/// The sizes of a LLaMA-family auxiliary model that the count depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlamaSizes {
    /// Width `D`.
    pub d_model: usize,
    /// Query heads `H`.
    pub n_heads: usize,
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// Head width `h_a` (`H h_a = D`).
    pub head_dim: usize,
    /// SwiGLU hidden width.
    pub d_ff: usize,
    /// Blocks.
    pub n_layers: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Whether the LM head is the token embedding.
    pub tied: bool,
    /// The model's positions.
    pub max_positions: usize,
}

impl LlamaSizes {
    /// The sizes of loaded weights.
    pub fn of<B: Backend>(params: &LlamaParams<B>) -> Self {
        Self {
            d_model: params.d_model(),
            n_heads: params.n_heads,
            n_kv_heads: params.n_kv_heads,
            head_dim: params.head_dim,
            d_ff: params.layers.first().map_or(0, |l| l.w_gate.dims()[1]),
            n_layers: params.layers.len(),
            vocab_size: params.vocab_size(),
            tied: params.lm_head.is_none(),
            max_positions: params.max_positions,
        }
    }

    /// SmolLM2-135M (HF config): D = 576, 9 query / 3 KV heads of 64, d_ff = 1536, 30 layers,
    /// 49152 tokens, tied head, 8192 positions.
    pub fn smollm2_135m() -> Self {
        Self {
            d_model: 576,
            n_heads: 9,
            n_kv_heads: 3,
            head_dim: 64,
            d_ff: 1536,
            n_layers: 30,
            vocab_size: 49152,
            tied: true,
            max_positions: 8192,
        }
    }

    /// Parameters of the auxiliary model itself (embedding, head, blocks, final norm).
    pub fn auxiliary_params(&self) -> usize {
        let (d, kv) = (self.d_model, self.n_kv_heads * self.head_dim);
        let head = if self.tied { 0 } else { self.vocab_size * d };
        let block = 2 * d * d + 2 * d * kv + 3 * d * self.d_ff + 2 * d;
        self.vocab_size * d + head + self.n_layers * block + d
    }

    /// `D`-wide SwiGLU chunks (`d_ff` zero-padded to whole chunks).
    pub fn n_chunks(&self) -> usize {
        self.d_ff.div_ceil(self.d_model)
    }
}

/// The count and its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlamaParamCount {
    /// One copy of the forward modules of a layer (`FM`).
    pub forward_modules: usize,
    /// One copy of the backward modules of a layer (`BM`).
    pub backward_modules: usize,
    /// Final RMSNorm forward + backward (`GM`, without its prefix block).
    pub gradient_module: usize,
    /// Prefix blocks of one layer (`blocks · P · Ds`).
    pub prefix_per_layer: usize,
    /// Token embedding and untied head.
    pub embeddings: usize,
    /// Everything.
    pub total: usize,
}

/// The validated TinT sizes of `config` for `sizes` (`T = Tmax`).
///
/// # Errors
/// [`SimError::Ops`] for violated TinT constraints.
pub fn llama_tint_dims(
    sizes: &LlamaSizes,
    config: &LlamaSimulatorConfig,
) -> Result<TintDims, SimError> {
    let max_seq_length = config.max_seq_length.unwrap_or_else(|| {
        sizes
            .max_positions
            .min(MAX_POSITION_EMBEDDINGS.saturating_sub(config.num_prefixes))
    });
    Ok(TintDims::new(
        sizes.d_model,
        sizes.n_heads,
        config.hidden_size,
        config.num_prefixes,
        config.num_heads,
        max_seq_length,
        max_seq_length,
    )?)
}

/// Sums the parts the way [`super::LlamaSimulator::num_params`] does.
fn assemble(
    sizes: &LlamaSizes,
    config: &LlamaSimulatorConfig,
    dims: &TintDims,
    modules: (usize, usize, usize),
) -> LlamaParamCount {
    let (forward_modules, backward_modules, gradient_module) = modules;
    let (p, ds) = (dims.n_prefixes(), dims.d_sim());
    let prefix_per_layer = (6 + 3 * sizes.n_chunks()) * p * ds;
    let embeddings = sizes.vocab_size * sizes.d_model * if sizes.tied { 1 } else { 2 };
    let n_sim = config.step.simulated_layers(sizes.n_layers);
    let copies = n_sim * config.step.step.n_forward_backward;
    let total = embeddings
        + sizes.n_layers * (forward_modules + prefix_per_layer)
        + copies * (backward_modules + forward_modules)
        + gradient_module
        + p * ds;
    LlamaParamCount {
        forward_modules,
        backward_modules,
        gradient_module,
        prefix_per_layer,
        embeddings,
        total,
    }
}

/// The closed form (module docs) without building anything.
///
/// # Errors
/// [`SimError::Ops`] for violated TinT constraints.
pub fn closed_form_param_count(
    sizes: &LlamaSizes,
    config: &LlamaSimulatorConfig,
) -> Result<LlamaParamCount, SimError> {
    let dims = llama_tint_dims(sizes, config)?;
    let (d, ha) = (sizes.d_model, sizes.head_dim);
    let g = ops::gates(&dims);
    let rms_forward = ops::layer_norm_forward(&dims);
    let rms_backward = ops::layer_norm_descent_backward(&dims) - ops::linear_backward(&dims);
    let rotary = 2 * dims.max_seq_length() * ha + d * ha + d;
    let lf = ops::linear_forward(&dims);
    let ldb = ops::linear_descent_backward(&dims);
    let forward = 2 * rms_forward + ops::attention_forward(&dims) + rotary + 3 * lf + g;
    let backward = 3 * ldb + ops::attention_backward_descent(&dims) + 2 * rms_backward + g;
    let gradient = rms_forward + rms_backward;
    Ok(assemble(
        sizes,
        config,
        &dims,
        (forward, backward, gradient),
    ))
}

/// The count from the constructed modules (built in f32 on `device`, no weights needed).
///
/// # Errors
/// [`SimError::Ops`] for violated TinT constraints or attention variant.
pub fn module_param_count<B: Backend>(
    sizes: &LlamaSizes,
    config: &LlamaSimulatorConfig,
    device: &B::Device,
) -> Result<LlamaParamCount, SimError> {
    let dims = llama_tint_dims(sizes, config)?;
    let options = TintOptions::default().with_float_dtype(DType::F32);
    let variant = AttentionVariant {
        n_kv_heads: sizes.n_kv_heads,
        rope_theta: Some(10_000.0),
    };
    let (attention_forward, attention_backward) =
        SimulatedAttentionHalf::<B>::new(&dims, &variant, &options, device)?.num_module_params();
    let (mlp_forward, mlp_backward) =
        SimulatedMlpHalf::<B>::new(&dims, &options, device)?.num_module_params();
    let gradient = NormForward::<B>::new(NormKind::Rms, &dims, &options, device)?.num_params()
        + NormBackward::<B>::new(NormKind::Rms, &dims, &options, device)?.num_params();
    Ok(assemble(
        sizes,
        config,
        &dims,
        (
            attention_forward + mlp_forward,
            attention_backward + mlp_backward,
            gradient,
        ),
    ))
}
