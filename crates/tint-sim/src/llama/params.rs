//! [`LlamaParams`]: the weights of a LLaMA-family auxiliary model as plain tensors (`[in, out]`
//! layout), read from an [`AuxModel::Llama`].

use burn::module::Param;
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor};
use tint_aux::AuxModel;

use crate::error::SimError;

/// The weights of one LLaMA block.
#[derive(Debug, Clone)]
pub struct LlamaLayerParams<B: Backend> {
    /// Gain of the norm before attention `[d_model]`.
    pub attn_norm: Tensor<B, 1>,
    /// Query projection `[d_model, n_heads · head_dim]`.
    pub w_q: Tensor<B, 2>,
    /// Key projection `[d_model, n_kv_heads · head_dim]`.
    pub w_k: Tensor<B, 2>,
    /// Value projection `[d_model, n_kv_heads · head_dim]`.
    pub w_v: Tensor<B, 2>,
    /// Output projection `[n_heads · head_dim, d_model]`.
    pub w_o: Tensor<B, 2>,
    /// Gain of the norm before the MLP `[d_model]`.
    pub mlp_norm: Tensor<B, 1>,
    /// SwiGLU gate projection `[d_model, d_ff]`.
    pub w_gate: Tensor<B, 2>,
    /// SwiGLU up projection `[d_model, d_ff]`.
    pub w_up: Tensor<B, 2>,
    /// SwiGLU down projection `[d_ff, d_model]`.
    pub w_down: Tensor<B, 2>,
}

/// The weights and hyper-parameters of a LLaMA-family auxiliary model.
#[derive(Debug, Clone)]
pub struct LlamaParams<B: Backend> {
    /// Token embedding `[vocab_size, d_model]`.
    pub embedding: Tensor<B, 2>,
    /// Blocks, bottom to top.
    pub layers: Vec<LlamaLayerParams<B>>,
    /// Gain of the final norm `[d_model]`.
    pub final_norm: Tensor<B, 1>,
    /// Untied LM head `[d_model, vocab_size]`; `None` when tied to `embedding`.
    pub lm_head: Option<Tensor<B, 2>>,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (each shared by `n_heads / n_kv_heads` query heads).
    pub n_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// RMSNorm epsilon (from the model; used by the forward and the backward passes).
    pub rms_eps: f64,
    /// RoPE base θ.
    pub rope_theta: f64,
    /// Longest accepted sequence.
    pub max_positions: usize,
}

impl<B: Backend> LlamaParams<B> {
    /// Reads the weights of an [`AuxModel::Llama`].
    ///
    /// # Errors
    /// [`SimError::UnsupportedModel`] for other architectures, a model without blocks, or linear
    /// layers with biases (LLaMA has none; the reference would ignore them).
    pub fn from_aux(model: &AuxModel<B>) -> Result<Self, SimError> {
        let AuxModel::Llama(llama) = model else {
            return Err(SimError::UnsupportedModel(format!(
                "the LLaMA reference needs a LLaMA model, got {}",
                model.model_type()
            )));
        };
        let first = llama.blocks.first().ok_or_else(|| {
            SimError::UnsupportedModel("the LLaMA model has no decoder block".into())
        })?;
        let linear = |l: &burn::nn::Linear<B>, name: &str| {
            if l.bias.is_some() {
                return Err(SimError::UnsupportedModel(format!(
                    "{name} has a bias; the LLaMA reference supports bias-free linear layers only"
                )));
            }
            Ok(l.weight.val())
        };
        let mut layers = Vec::with_capacity(llama.blocks.len());
        for block in &llama.blocks {
            let att = &block.attention;
            layers.push(LlamaLayerParams {
                attn_norm: block.attn_norm.weight.val(),
                w_q: linear(&att.query, "attention.query")?,
                w_k: linear(&att.key, "attention.key")?,
                w_v: linear(&att.value, "attention.value")?,
                w_o: linear(&att.output, "attention.output")?,
                mlp_norm: block.mlp_norm.weight.val(),
                w_gate: linear(&block.mlp.gate, "mlp.gate")?,
                w_up: linear(&block.mlp.up, "mlp.up")?,
                w_down: linear(&block.mlp.down, "mlp.down")?,
            });
        }
        let lm_head = match &llama.lm_head {
            Some(head) => Some(linear(head, "lm_head")?),
            None => None,
        };
        Ok(Self {
            embedding: llama.embedding.weight.val(),
            layers,
            final_norm: llama.final_norm.weight.val(),
            lm_head,
            n_heads: first.attention.n_heads,
            n_kv_heads: first.attention.n_kv_heads,
            head_dim: first.attention.head_dim,
            rms_eps: first.attn_norm.eps,
            rope_theta: llama.rope_theta,
            max_positions: llama.max_positions,
        })
    }

    /// These weights in a copy of `base`, the LLaMA model they were read from
    /// ([`Self::from_aux`]): an auxiliary model that runs them with the model's own forward (and
    /// its key/value cache), e.g. the weights a TinT step updated.
    ///
    /// # Errors
    /// [`SimError::UnsupportedModel`] when `base` is not a LLaMA model with as many blocks and the
    /// same kind of LM head (tied or untied).
    pub fn to_aux(&self, base: &AuxModel<B>) -> Result<AuxModel<B>, SimError> {
        let AuxModel::Llama(llama) = base else {
            return Err(SimError::UnsupportedModel(format!(
                "LLaMA weights go into a LLaMA model, got {}",
                base.model_type()
            )));
        };
        if llama.blocks.len() != self.layers.len()
            || llama.lm_head.is_some() != self.lm_head.is_some()
        {
            return Err(SimError::UnsupportedModel(format!(
                "weights of {} blocks ({} LM head) do not fit a model of {} blocks ({} LM head)",
                self.layers.len(),
                if self.lm_head.is_some() {
                    "untied"
                } else {
                    "tied"
                },
                llama.blocks.len(),
                if llama.lm_head.is_some() {
                    "untied"
                } else {
                    "tied"
                },
            )));
        }
        let mut llama = llama.clone();
        let param = |t: &Tensor<B, 2>| Param::from_tensor(t.clone());
        llama.embedding.weight = param(&self.embedding);
        for (block, layer) in llama.blocks.iter_mut().zip(&self.layers) {
            block.attn_norm.weight = Param::from_tensor(layer.attn_norm.clone());
            block.attention.query.weight = param(&layer.w_q);
            block.attention.key.weight = param(&layer.w_k);
            block.attention.value.weight = param(&layer.w_v);
            block.attention.output.weight = param(&layer.w_o);
            block.mlp_norm.weight = Param::from_tensor(layer.mlp_norm.clone());
            block.mlp.gate.weight = param(&layer.w_gate);
            block.mlp.up.weight = param(&layer.w_up);
            block.mlp.down.weight = param(&layer.w_down);
        }
        llama.final_norm.weight = Param::from_tensor(self.final_norm.clone());
        if let (Some(head), Some(w)) = (llama.lm_head.as_mut(), &self.lm_head) {
            head.weight = param(w);
        }
        Ok(AuxModel::Llama(llama))
    }

    /// Model width.
    pub fn d_model(&self) -> usize {
        self.embedding.dims()[1]
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.embedding.dims()[0]
    }

    /// Float type of the weights.
    pub fn dtype(&self) -> DType {
        self.embedding.dtype()
    }

    /// The LM head as `[vocab_size, d_model]` rows (the tied embedding or the untied head transposed):
    /// logits are `hf · rowsᵀ`.
    pub fn head_rows(&self) -> Tensor<B, 2> {
        match &self.lm_head {
            Some(head) => head.clone().transpose(),
            None => self.embedding.clone(),
        }
    }

    /// The same weights in another float type (e.g. `DType::F64` for exactness checks).
    pub fn cast(&self, dtype: DType) -> Self {
        self.map_weights(|t| t.cast(dtype), |t| t.cast(dtype))
    }

    /// The same model with every weight tensor replaced by `vector(gain)` (the norm gains) or
    /// `matrix(weight)` (embedding, projections, LM head); sizes and hyper-parameters kept.
    pub fn map_weights(
        &self,
        mut vector: impl FnMut(Tensor<B, 1>) -> Tensor<B, 1>,
        mut matrix: impl FnMut(Tensor<B, 2>) -> Tensor<B, 2>,
    ) -> Self {
        Self {
            embedding: matrix(self.embedding.clone()),
            layers: self
                .layers
                .iter()
                .map(|l| LlamaLayerParams {
                    attn_norm: vector(l.attn_norm.clone()),
                    w_q: matrix(l.w_q.clone()),
                    w_k: matrix(l.w_k.clone()),
                    w_v: matrix(l.w_v.clone()),
                    w_o: matrix(l.w_o.clone()),
                    mlp_norm: vector(l.mlp_norm.clone()),
                    w_gate: matrix(l.w_gate.clone()),
                    w_up: matrix(l.w_up.clone()),
                    w_down: matrix(l.w_down.clone()),
                })
                .collect(),
            final_norm: vector(self.final_norm.clone()),
            lm_head: self.lm_head.clone().map(matrix),
            ..self.clone()
        }
    }
}
