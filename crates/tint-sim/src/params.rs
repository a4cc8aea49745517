//! [`AuxParams`]: the weights of a GPT-2 / OPT auxiliary language model (pre-LN, or post-LN OPT with
//! `project_in`/`project_out`, docs/construction.md §16) in the layout the simulator and the functional
//! reference work with.
//!
//! Matrices are `[in, out]` (HF GPT-2 `Conv1D` layout). Every tensor of a layer carries a leading
//! "copy" dimension of size 1 (weights shared by the batch) or `batch_size` (each sequence carries its
//! own updated copy, as TinT's prefix blocks do), so the same code runs before and after an update.

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Distribution, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::SimError;

pub use tint_aux::block::NormPlacement;

/// Element-wise non-linearity of the auxiliary MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// GPT-2's `gelu_new`: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    GeluNew,
    /// OPT's ReLU.
    Relu,
}

impl Activation {
    /// The same activation under its tint-ops name (the constructed modules and the shared
    /// activation functions use it).
    pub fn kind(self) -> tint_ops::ActivationKind {
        match self {
            Activation::GeluNew => tint_ops::ActivationKind::GeluNew,
            Activation::Relu => tint_ops::ActivationKind::Relu,
        }
    }
}

/// Sizes of an auxiliary model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuxDims {
    /// Width `D`.
    pub d_model: usize,
    /// Attention heads `H` (head size `D / H`).
    pub n_heads: usize,
    /// Number of layers.
    pub n_layers: usize,
    /// MLP inner size (`4 D` for GPT-2).
    pub d_inner: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Rows of the position-embedding table (`max_position_embeddings`, plus the offset for OPT).
    pub n_positions: usize,
}

/// A LayerNorm `gamma * (x - mean) / sqrt(var + eps) + beta`.
///
/// # Shapes
/// `gamma`, `beta`: `[copies, 1, d_model]`.
#[derive(Debug, Clone)]
pub struct LayerNormParams<B: Backend> {
    /// Gain (frozen by TinT).
    pub gamma: Tensor<B, 3>,
    /// Bias (updated by TinT).
    pub beta: Tensor<B, 3>,
}

/// One transformer block: pre-LN `h + attn(LN_1(h))`, `h + mlp(LN_2(h))`, or post-LN
/// `LN_1(h + attn(h))`, `LN_2(h + mlp(h))` ([`AuxParams::norm_placement`]).
///
/// # Shapes
/// Matrices `[copies, d_in, d_out]`, biases `[copies, 1, d_out]`; `copies` is 1 or `batch_size`.
#[derive(Debug, Clone)]
pub struct LayerParams<B: Backend> {
    /// LayerNorm before attention (pre-LN) or after the attention residual add (post-LN).
    pub ln_1: LayerNormParams<B>,
    /// Query projection `[copies, D, D]` (frozen by TinT).
    pub w_q: Tensor<B, 3>,
    /// Query bias.
    pub b_q: Tensor<B, 3>,
    /// Key projection (frozen by TinT).
    pub w_k: Tensor<B, 3>,
    /// Key bias.
    pub b_k: Tensor<B, 3>,
    /// Value projection.
    pub w_v: Tensor<B, 3>,
    /// Value bias.
    pub b_v: Tensor<B, 3>,
    /// Attention output projection `[copies, D, D]`.
    pub w_o: Tensor<B, 3>,
    /// Attention output bias.
    pub b_o: Tensor<B, 3>,
    /// LayerNorm before the MLP (pre-LN) or after the MLP residual add (post-LN).
    pub ln_2: LayerNormParams<B>,
    /// MLP input projection `[copies, D, d_inner]`.
    pub w_fc: Tensor<B, 3>,
    /// MLP input bias `[copies, 1, d_inner]`.
    pub b_fc: Tensor<B, 3>,
    /// MLP output projection `[copies, d_inner, D]`.
    pub w_proj: Tensor<B, 3>,
    /// MLP output bias.
    pub b_proj: Tensor<B, 3>,
}

/// The weights of an auxiliary model as the simulator sees them.
#[derive(Debug, Clone)]
pub struct AuxParams<B: Backend> {
    /// Input token embeddings `[vocab_size, D]`, tied with the LM head unless [`Self::lm_head`] is
    /// set. For OPT with `project_in` (`word_embed_proj_dim E != D`) this is `wte · P_in`, the
    /// frozen projection folded into the frozen table (docs/construction.md §16).
    pub token_embedding: Tensor<B, 2>,
    /// LM head `[vocab_size, D]` when it is not [`Self::token_embedding`]: for OPT with
    /// `project_out` `wte · P_outᵀ` (logits `h P_out wteᵀ`), frozen (docs/construction.md §16).
    pub lm_head: Option<Tensor<B, 2>>,
    /// Position embeddings `[n_positions, D]`.
    pub position_embedding: Tensor<B, 2>,
    /// Position `t` reads row `t + position_offset` (0 for GPT-2, 2 for OPT).
    pub position_offset: usize,
    /// Transformer blocks, bottom to top.
    pub layers: Vec<LayerParams<B>>,
    /// Final LayerNorm (none for post-LN OPT, as in HF).
    pub ln_f: Option<LayerNormParams<B>>,
    /// Where the block LayerNorms sit.
    pub norm_placement: NormPlacement,
    /// Attention heads `H`.
    pub n_heads: usize,
    /// MLP activation.
    pub activation: Activation,
}

fn map_ln<B: Backend>(
    ln: &LayerNormParams<B>,
    f: &impl Fn(Tensor<B, 3>) -> Tensor<B, 3>,
) -> LayerNormParams<B> {
    LayerNormParams {
        gamma: f(ln.gamma.clone()),
        beta: f(ln.beta.clone()),
    }
}

impl<B: Backend> LayerParams<B> {
    /// Applies `f` to every tensor.
    pub fn map(&self, f: impl Fn(Tensor<B, 3>) -> Tensor<B, 3>) -> Self {
        Self {
            ln_1: map_ln(&self.ln_1, &f),
            w_q: f(self.w_q.clone()),
            b_q: f(self.b_q.clone()),
            w_k: f(self.w_k.clone()),
            b_k: f(self.b_k.clone()),
            w_v: f(self.w_v.clone()),
            b_v: f(self.b_v.clone()),
            w_o: f(self.w_o.clone()),
            b_o: f(self.b_o.clone()),
            ln_2: map_ln(&self.ln_2, &f),
            w_fc: f(self.w_fc.clone()),
            b_fc: f(self.b_fc.clone()),
            w_proj: f(self.w_proj.clone()),
            b_proj: f(self.b_proj.clone()),
        }
    }

    /// Named tensors, in a fixed order (used by save/load and comparisons).
    pub fn named(&self) -> Vec<(&'static str, &Tensor<B, 3>)> {
        vec![
            ("ln_1.gamma", &self.ln_1.gamma),
            ("ln_1.beta", &self.ln_1.beta),
            ("w_q", &self.w_q),
            ("b_q", &self.b_q),
            ("w_k", &self.w_k),
            ("b_k", &self.b_k),
            ("w_v", &self.w_v),
            ("b_v", &self.b_v),
            ("w_o", &self.w_o),
            ("b_o", &self.b_o),
            ("ln_2.gamma", &self.ln_2.gamma),
            ("ln_2.beta", &self.ln_2.beta),
            ("w_fc", &self.w_fc),
            ("b_fc", &self.b_fc),
            ("w_proj", &self.w_proj),
            ("b_proj", &self.b_proj),
        ]
    }
}

impl<B: Backend> AuxParams<B> {
    /// The model's sizes.
    pub fn dims(&self) -> AuxDims {
        let [vocab_size, d_model] = self.token_embedding.dims();
        let d_inner = self
            .layers
            .first()
            .map_or(4 * d_model, |l| l.w_fc.dims()[2]);
        AuxDims {
            d_model,
            n_heads: self.n_heads,
            n_layers: self.layers.len(),
            d_inner,
            vocab_size,
            n_positions: self.position_embedding.dims()[0],
        }
    }

    /// The LM head `[vocab_size, D]`: [`Self::lm_head`] or the tied token embedding.
    pub fn head_matrix(&self) -> &Tensor<B, 2> {
        self.lm_head.as_ref().unwrap_or(&self.token_embedding)
    }

    /// Float dtype of the weights.
    pub fn dtype(&self) -> DType {
        self.token_embedding.dtype()
    }

    /// Device of the weights.
    pub fn device(&self) -> B::Device {
        self.token_embedding.device()
    }

    /// Number of positions a sequence may have.
    pub fn max_seq_length(&self) -> usize {
        self.dims().n_positions.saturating_sub(self.position_offset)
    }

    /// The same weights converted to `dtype` (e.g. [`DType::F64`] for exactness tests).
    pub fn cast(&self, dtype: DType) -> Self {
        Self {
            token_embedding: self.token_embedding.clone().cast(dtype),
            lm_head: self.lm_head.as_ref().map(|t| t.clone().cast(dtype)),
            position_embedding: self.position_embedding.clone().cast(dtype),
            position_offset: self.position_offset,
            layers: self
                .layers
                .iter()
                .map(|l| l.map(|t| t.cast(dtype)))
                .collect(),
            ln_f: self
                .ln_f
                .as_ref()
                .map(|ln| map_ln(ln, &|t: Tensor<B, 3>| t.cast(dtype))),
            norm_placement: self.norm_placement,
            n_heads: self.n_heads,
            activation: self.activation,
        }
    }

    /// Checks that every tensor has the shape its role requires.
    pub fn check_shapes(&self) -> Result<(), SimError> {
        let dims = self.dims();
        let (d, i) = (dims.d_model, dims.d_inner);
        if dims.n_heads == 0 || d % dims.n_heads != 0 {
            return Err(SimError::UnsupportedModel(format!(
                "D = {d} is not a multiple of the number of heads {}",
                dims.n_heads
            )));
        }
        let check = |name: String, t: &Tensor<B, 3>, shape: [usize; 2]| {
            let got = t.dims();
            if got[1..] != shape {
                Err(SimError::UnsupportedModel(format!(
                    "{name} has shape {got:?}, expected [_, {}, {}]",
                    shape[0], shape[1]
                )))
            } else {
                Ok(())
            }
        };
        if let Some(ln_f) = &self.ln_f {
            check("ln_f.gamma".into(), &ln_f.gamma, [1, d])?;
            check("ln_f.beta".into(), &ln_f.beta, [1, d])?;
        }
        if let Some(head) = &self.lm_head {
            if head.dims() != [dims.vocab_size, d] {
                return Err(SimError::UnsupportedModel(format!(
                    "lm_head has shape {:?}, expected [{}, {d}]",
                    head.dims(),
                    dims.vocab_size
                )));
            }
        }
        for (l, layer) in self.layers.iter().enumerate() {
            for (name, t) in layer.named() {
                let shape = match name {
                    "w_q" | "w_k" | "w_v" | "w_o" => [d, d],
                    "w_fc" => [d, i],
                    "b_fc" => [1, i],
                    "w_proj" => [i, d],
                    _ => [1, d],
                };
                check(format!("layer {l} {name}"), t, shape)?;
            }
        }
        Ok(())
    }

    /// A randomly initialised GPT-2-like model (weights `N(0, 0.02^2)` scaled like GPT-2, LayerNorm gains
    /// `1 + N(0, 0.1^2)` and biases `N(0, 0.02^2)` so that no parameter is trivial). For tests and benches.
    pub fn random(dims: AuxDims, activation: Activation, device: &B::Device) -> Self {
        let normal = |shape: [usize; 3], std: f64| {
            Tensor::<B, 3>::random(shape, Distribution::Normal(0.0, std), device)
        };
        let (d, i) = (dims.d_model, dims.d_inner);
        let ln = || LayerNormParams {
            gamma: normal([1, 1, d], 0.1).add_scalar(1.0),
            beta: normal([1, 1, d], 0.02),
        };
        let layers = (0..dims.n_layers)
            .map(|_| LayerParams {
                ln_1: ln(),
                w_q: normal([1, d, d], 0.2),
                b_q: normal([1, 1, d], 0.02),
                w_k: normal([1, d, d], 0.2),
                b_k: normal([1, 1, d], 0.02),
                w_v: normal([1, d, d], 0.2),
                b_v: normal([1, 1, d], 0.02),
                w_o: normal([1, d, d], 0.1),
                b_o: normal([1, 1, d], 0.02),
                ln_2: ln(),
                w_fc: normal([1, d, i], 0.2),
                b_fc: normal([1, 1, i], 0.02),
                w_proj: normal([1, i, d], 0.1),
                b_proj: normal([1, 1, d], 0.02),
            })
            .collect();
        Self {
            token_embedding: Tensor::random(
                [dims.vocab_size, d],
                Distribution::Normal(0.0, 0.5),
                device,
            ),
            position_embedding: Tensor::random(
                [dims.n_positions, d],
                Distribution::Normal(0.0, 0.1),
                device,
            ),
            lm_head: None,
            position_offset: 0,
            layers,
            ln_f: Some(ln()),
            norm_placement: NormPlacement::PreLn,
            n_heads: dims.n_heads,
            activation,
        }
    }
}
