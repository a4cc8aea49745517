//! Causal grouped-query self-attention with rotary embeddings, as in HF `LlamaAttention`.
//!
//! Query head `h` reads key/value head `h / n_rep` (HF `repeat_kv`), `n_rep = n_heads / n_kv_heads`.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::activation::softmax;
use burn::tensor::{backend::Backend, Bool, Tensor, TensorData};

use super::rotary::apply_rotary;

/// Grouped-query attention; weights are `[d_input, d_output]`, no biases.
#[derive(Module, Debug)]
pub struct GroupedQueryAttention<B: Backend> {
    /// Query projection `[d_model, n_heads · head_dim]`.
    pub query: Linear<B>,
    /// Key projection `[d_model, n_kv_heads · head_dim]`.
    pub key: Linear<B>,
    /// Value projection `[d_model, n_kv_heads · head_dim]`.
    pub value: Linear<B>,
    /// Output projection `[n_heads · head_dim, d_model]`.
    pub output: Linear<B>,
    /// Number of query heads.
    pub n_heads: usize,
    /// Number of key/value heads.
    pub n_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
}

/// The intermediates of one attention forward.
#[derive(Debug, Clone)]
pub struct AttentionTrace<B: Backend> {
    /// Queries after RoPE, `[batch_size, n_heads, seq_length, head_dim]`.
    pub query: Tensor<B, 4>,
    /// Keys after RoPE (before repetition), `[batch_size, n_kv_heads, seq_length, head_dim]`.
    pub key: Tensor<B, 4>,
    /// Values (before repetition), `[batch_size, n_kv_heads, seq_length, head_dim]`.
    pub value: Tensor<B, 4>,
    /// Attention probabilities, `[batch_size, n_heads, seq_length, seq_length]`.
    pub probs: Tensor<B, 4>,
    /// Heads concatenated before the output projection, `[batch_size, seq_length, n_heads · head_dim]`.
    pub context: Tensor<B, 3>,
    /// Output, `[batch_size, seq_length, d_model]`.
    pub output: Tensor<B, 3>,
}

/// `[b, n_kv, s, d]` → `[b, n_kv · n_rep, s, d]`, each kv head repeated `n_rep` times in a row.
fn repeat_kv<B: Backend>(x: Tensor<B, 4>, n_rep: usize) -> Tensor<B, 4> {
    if n_rep == 1 {
        return x;
    }
    let [b, n_kv, s, d] = x.dims();
    x.unsqueeze_dim::<5>(2) // [b, n_kv, 1, s, d]
        .repeat_dim(2, n_rep) // [b, n_kv, n_rep, s, d]
        .reshape([b, n_kv * n_rep, s, d])
}

/// The causal mask: `true` above the diagonal (future positions), `[1, 1, seq_length, seq_length]`.
fn causal_mask<B: Backend>(seq_length: usize, device: &B::Device) -> Tensor<B, 4, Bool> {
    let future: Vec<bool> = (0..seq_length)
        .flat_map(|row| (0..seq_length).map(move |col| col > row))
        .collect();
    Tensor::<B, 2, Bool>::from_data(TensorData::new(future, [seq_length, seq_length]), device)
        .unsqueeze::<4>()
}

impl<B: Backend> GroupedQueryAttention<B> {
    /// Causal self-attention with its intermediates.
    ///
    /// # Shapes
    /// - x: `[batch_size, seq_length, d_model]`
    /// - cos, sin: `[seq_length, head_dim]` (from [`rotary_tables`](super::rotary::rotary_tables))
    /// - output fields: see [`AttentionTrace`]
    pub fn forward_trace(
        &self,
        x: Tensor<B, 3>,
        cos: Tensor<B, 2>,
        sin: Tensor<B, 2>,
    ) -> AttentionTrace<B> {
        let [batch_size, seq_length, _] = x.dims();
        let device = x.device();
        let heads = |t: Tensor<B, 3>, n: usize| {
            t.reshape([batch_size, seq_length, n, self.head_dim])
                .swap_dims(1, 2) // [batch_size, n, seq_length, head_dim]
        };
        let query = heads(self.query.forward(x.clone()), self.n_heads);
        let key = heads(self.key.forward(x.clone()), self.n_kv_heads);
        let value = heads(self.value.forward(x), self.n_kv_heads);
        let query = apply_rotary(query, cos.clone(), sin.clone());
        let key = apply_rotary(key, cos, sin);

        let n_rep = self.n_heads / self.n_kv_heads;
        let keys = repeat_kv(key.clone(), n_rep); // [batch_size, n_heads, seq_length, head_dim]
        let values = repeat_kv(value.clone(), n_rep);
        let scale = (self.head_dim as f64).sqrt().recip();
        let scores = query.clone().matmul(keys.swap_dims(2, 3)) * scale; // [b, n_heads, s, s]
        let scores = scores.mask_fill(causal_mask::<B>(seq_length, &device), f32::NEG_INFINITY);
        let probs = softmax(scores, 3);
        let context = probs
            .clone()
            .matmul(values) // [batch_size, n_heads, seq_length, head_dim]
            .swap_dims(1, 2)
            .reshape([batch_size, seq_length, self.n_heads * self.head_dim]);
        let output = self.output.forward(context.clone());
        AttentionTrace {
            query,
            key,
            value,
            probs,
            context,
            output,
        }
    }

    /// Causal self-attention.
    ///
    /// # Shapes
    /// - x: `[batch_size, seq_length, d_model]`
    /// - cos, sin: `[seq_length, head_dim]`
    /// - output: `[batch_size, seq_length, d_model]`
    pub fn forward(&self, x: Tensor<B, 3>, cos: Tensor<B, 2>, sin: Tensor<B, 2>) -> Tensor<B, 3> {
        self.forward_trace(x, cos, sin).output
    }
}
