//! One LLaMA decoder block: `h_mid = h + Attn(RMSNorm₁(h))`, `h_out = h_mid + MLP(RMSNorm₂(h_mid))`.

use burn::module::Module;
use burn::tensor::{backend::Backend, Tensor};

use super::mlp::{SwiGluMlp, SwiGluTrace};
use super::rms_norm::RmsNorm;
use crate::attention::{AttentionTrace, CausalSelfAttention, KeyValues};

/// A pre-norm decoder block (HF `LlamaDecoderLayer`).
#[derive(Module, Debug)]
pub struct LlamaBlock<B: Backend> {
    /// Norm before attention (HF `input_layernorm`, GGUF `attn_norm`).
    pub attn_norm: RmsNorm<B>,
    /// Self-attention.
    pub attention: CausalSelfAttention<B>,
    /// Norm before the MLP (HF `post_attention_layernorm`, GGUF `ffn_norm`).
    pub mlp_norm: RmsNorm<B>,
    /// SwiGLU MLP.
    pub mlp: SwiGluMlp<B>,
}

/// The activations of one block.
#[derive(Debug, Clone)]
pub struct LlamaLayerTrace<B: Backend> {
    /// Block input `h`, `[batch_size, seq_length, d_model]`.
    pub block_input: Tensor<B, 3>,
    /// `RMSNorm₁(h)`, `[batch_size, seq_length, d_model]`.
    pub attn_norm_output: Tensor<B, 3>,
    /// Attention intermediates.
    pub attention: AttentionTrace<B>,
    /// `h_mid = h + Attn(RMSNorm₁(h))`, `[batch_size, seq_length, d_model]`.
    pub h_mid: Tensor<B, 3>,
    /// `RMSNorm₂(h_mid)`, `[batch_size, seq_length, d_model]`.
    pub mlp_norm_output: Tensor<B, 3>,
    /// MLP intermediates.
    pub mlp: SwiGluTrace<B>,
    /// Block output, `[batch_size, seq_length, d_model]`.
    pub block_output: Tensor<B, 3>,
}

impl<B: Backend> LlamaBlock<B> {
    /// The block with its intermediates.
    ///
    /// # Shapes
    /// - h: `[batch_size, seq_length, d_model]`
    /// - cos, sin: `[seq_length, head_dim]`
    /// - output fields: see [`LlamaLayerTrace`]
    pub fn forward_trace(
        &self,
        h: Tensor<B, 3>,
        cos: Tensor<B, 2>,
        sin: Tensor<B, 2>,
    ) -> LlamaLayerTrace<B> {
        let attn_norm_output = self.attn_norm.forward(h.clone());
        let attention = self
            .attention
            .forward_traced(attn_norm_output.clone(), Some((cos, sin)));
        let h_mid = h.clone() + attention.output.clone();
        let mlp_norm_output = self.mlp_norm.forward(h_mid.clone());
        let mlp = self.mlp.forward_trace(mlp_norm_output.clone());
        let block_output = h_mid.clone() + mlp.output.clone();
        LlamaLayerTrace {
            block_input: h,
            attn_norm_output,
            attention,
            h_mid,
            mlp_norm_output,
            mlp,
            block_output,
        }
    }

    /// The block.
    ///
    /// # Shapes
    /// - h: `[batch_size, seq_length, d_model]`
    /// - cos, sin: `[seq_length, head_dim]`
    /// - output: `[batch_size, seq_length, d_model]`
    pub fn forward(&self, h: Tensor<B, 3>, cos: Tensor<B, 2>, sin: Tensor<B, 2>) -> Tensor<B, 3> {
        let h = h.clone()
            + self
                .attention
                .forward(self.attn_norm.forward(h), Some((cos, sin)));
        h.clone() + self.mlp.forward(self.mlp_norm.forward(h))
    }

    /// The block on new positions after `past` ones (see
    /// [`CausalSelfAttention::forward_after`]), with the keys and values of every position.
    ///
    /// # Shapes
    /// - h: `[batch_size, n_new, d_model]`
    /// - cos, sin: `[n_new, head_dim]`, the rotary tables' rows of the new positions
    /// - output: `[batch_size, n_new, d_model]`
    pub fn forward_after(
        &self,
        h: Tensor<B, 3>,
        cos: Tensor<B, 2>,
        sin: Tensor<B, 2>,
        past: Option<&KeyValues<B>>,
    ) -> (Tensor<B, 3>, KeyValues<B>) {
        let (attended, key_values) =
            self.attention
                .forward_after(self.attn_norm.forward(h.clone()), Some((cos, sin)), past);
        let h = h + attended;
        (
            h.clone() + self.mlp.forward(self.mlp_norm.forward(h)),
            key_values,
        )
    }
}
