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

/// The causal mask of `n_new` queries at positions `n_past..n_past + n_new` over the keys at
/// positions `0..n_past + n_new`: `true` where the key lies in the query's future,
/// `[1, 1, n_new, n_past + n_new]`.
fn causal_mask<B: Backend>(n_past: usize, n_new: usize, device: &B::Device) -> Tensor<B, 4, Bool> {
    let n_keys = n_past + n_new;
    let future: Vec<bool> = (0..n_new)
        .flat_map(|row| (0..n_keys).map(move |col| col > n_past + row))
        .collect();
    Tensor::<B, 2, Bool>::from_data(TensorData::new(future, [n_new, n_keys]), device)
        .unsqueeze::<4>()
}

/// Keys (after RoPE) and values of the positions a forward has seen, per key/value head:
/// what later tokens attend to.
#[derive(Debug, Clone)]
pub struct KeyValues<B: Backend> {
    /// `[batch_size, n_kv_heads, n_positions, head_dim]`, after RoPE.
    pub key: Tensor<B, 4>,
    /// `[batch_size, n_kv_heads, n_positions, head_dim]`.
    pub value: Tensor<B, 4>,
}

impl<B: Backend> KeyValues<B> {
    /// The first `n_positions` positions.
    pub fn truncated(&self, n_positions: usize) -> Self {
        Self {
            key: self.key.clone().narrow(2, 0, n_positions),
            value: self.value.clone().narrow(2, 0, n_positions),
        }
    }
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
        self.attend(x, cos, sin, None)
    }

    /// Attention of the new positions `x` over the `past` positions (if any) and themselves.
    ///
    /// # Shapes
    /// - x: `[batch_size, n_new, d_model]`
    /// - cos, sin: `[n_new, head_dim]`, the tables' rows of the new positions `n_past..n_past + n_new`
    /// - past: `[batch_size, n_kv_heads, n_past, head_dim]` each
    /// - output: `key` and `value` of [`AttentionTrace`] hold every position (`n_past + n_new`),
    ///   `probs` is `[batch_size, n_heads, n_new, n_past + n_new]`, the rest as in
    ///   [`AttentionTrace`] with `seq_length = n_new`
    fn attend(
        &self,
        x: Tensor<B, 3>,
        cos: Tensor<B, 2>,
        sin: Tensor<B, 2>,
        past: Option<&KeyValues<B>>,
    ) -> AttentionTrace<B> {
        let [batch_size, n_new, _] = x.dims();
        let device = x.device();
        let heads = |t: Tensor<B, 3>, n: usize| {
            t.reshape([batch_size, n_new, n, self.head_dim])
                .swap_dims(1, 2) // [batch_size, n, n_new, head_dim]
        };
        let query = heads(self.query.forward(x.clone()), self.n_heads);
        let key = heads(self.key.forward(x.clone()), self.n_kv_heads);
        let value = heads(self.value.forward(x), self.n_kv_heads);
        let query = apply_rotary(query, cos.clone(), sin.clone());
        let key = apply_rotary(key, cos, sin);
        let (key, value, n_past) = match past {
            Some(past) => (
                Tensor::cat(vec![past.key.clone(), key], 2),
                Tensor::cat(vec![past.value.clone(), value], 2),
                past.key.dims()[2],
            ),
            None => (key, value, 0),
        };

        let n_rep = self.n_heads / self.n_kv_heads;
        let keys = repeat_kv(key.clone(), n_rep); // [batch_size, n_heads, n_past + n_new, head_dim]
        let values = repeat_kv(value.clone(), n_rep);
        let scale = (self.head_dim as f64).sqrt().recip();
        // [batch_size, n_heads, n_new, n_past + n_new]
        let scores = query.clone().matmul(keys.swap_dims(2, 3)) * scale;
        let scores = scores.mask_fill(causal_mask::<B>(n_past, n_new, &device), f32::NEG_INFINITY);
        let probs = softmax(scores, 3);
        let context = probs
            .clone()
            .matmul(values) // [batch_size, n_heads, n_new, head_dim]
            .swap_dims(1, 2)
            .reshape([batch_size, n_new, self.n_heads * self.head_dim]);
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

    /// Causal self-attention of new positions after `past` ones, returning the output and the
    /// keys and values of every position (for the next call).
    ///
    /// # Shapes
    /// - x: `[batch_size, n_new, d_model]`
    /// - cos, sin: `[n_new, head_dim]`, the rotary tables' rows `n_past..n_past + n_new`
    /// - past: `[batch_size, n_kv_heads, n_past, head_dim]` each
    /// - output: `[batch_size, n_new, d_model]`; key/values `[batch_size, n_kv_heads, n_past + n_new, head_dim]`
    pub fn forward_after(
        &self,
        x: Tensor<B, 3>,
        cos: Tensor<B, 2>,
        sin: Tensor<B, 2>,
        past: Option<&KeyValues<B>>,
    ) -> (Tensor<B, 3>, KeyValues<B>) {
        let trace = self.attend(x, cos, sin, past);
        (
            trace.output,
            KeyValues {
                key: trace.key,
                value: trace.value,
            },
        )
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
