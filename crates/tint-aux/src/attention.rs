//! Causal self-attention of every auxiliary family: multi-head (GPT-2, OPT: learned positions,
//! biases) and grouped-query with rotary embeddings (LLaMA, as HF `LlamaAttention`), one module.
//!
//! Query head `h` reads key/value head `h / n_rep` (HF `repeat_kv`), `n_rep = n_heads / n_kv_heads`;
//! multi-head attention is the case `n_kv_heads = n_heads`. Rotary embeddings (when the family
//! has them) rotate the queries and keys before they are scored and stored
//! ([`tint_ops::rotary::apply_rotary`], the same rotary as the simulator's).

use core::ops::Range;

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::{activation::softmax, backend::Backend, Bool, Tensor};
use tint_branches::runs_in_parallel;
use tint_ops::rotary::apply_rotary;

/// Score given to masked (future) positions before the softmax: `exp` of it is exactly 0 in f32 and
/// f64, as HF's `finfo.min` gives after underflow. −∞ rather than a large finite value because libm's
/// `expf` sends finite arguments below about −104 through its slow underflow branch (4 % of the CPU
/// forward's samples with −1e30, docs/performance.md) and returns 0 for −∞ at once; no row is fully
/// masked (each position sees itself), so no `−∞ − (−∞)` NaN can arise.
const MASKED_SCORE: f64 = f64::NEG_INFINITY;

/// Causal self-attention: `softmax(q k^T / sqrt(head_dim) + causal mask) v`, heads concatenated,
/// then the output projection. All weights are `[d_input, d_output]` (`y = x W + b`; LLaMA has no
/// biases).
#[derive(Module, Debug)]
pub struct CausalSelfAttention<B: Backend> {
    /// Query projection `W_Q`, `[d_model, n_heads · head_dim]` (GPT-2: `c_attn` columns `0..D`).
    pub query: Linear<B>,
    /// Key projection `W_K`, `[d_model, n_kv_heads · head_dim]` (GPT-2: `c_attn` columns `D..2D`).
    pub key: Linear<B>,
    /// Value projection `W_V`, `[d_model, n_kv_heads · head_dim]` (GPT-2: `c_attn` columns
    /// `2D..3D`).
    pub value: Linear<B>,
    /// Output projection `W_O`, `[n_heads · head_dim, d_model]` (GPT-2 `attn.c_proj`, OPT
    /// `out_proj`, LLaMA `o_proj`).
    pub output: Linear<B>,
    /// Number of query heads.
    pub n_heads: usize,
    /// Number of key/value heads (`n_heads` for multi-head attention).
    pub n_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
}

/// The rotary tables' rows of the positions an attention call sees, `[n_new, head_dim]` each
/// ([`tint_ops::rotary::rotary_tables_dtype`]); `None` for families with learned positions.
pub type Rotary<B> = Option<(Tensor<B, 2>, Tensor<B, 2>)>;

/// Everything one attention call computes.
#[derive(Debug, Clone)]
pub struct AttentionTrace<B: Backend> {
    /// Queries (after RoPE when the family has it), `[batch_size, n_heads, n_new, head_dim]`.
    pub query: Tensor<B, 4>,
    /// Keys of every position (after RoPE, before repetition),
    /// `[batch_size, n_kv_heads, n_past + n_new, head_dim]`.
    pub key: Tensor<B, 4>,
    /// Values of every position (before repetition), `[batch_size, n_kv_heads, n_past + n_new, head_dim]`.
    pub value: Tensor<B, 4>,
    /// Attention probabilities per head, `[batch_size, n_heads, n_new, n_past + n_new]`
    /// (query position, key position); zero in each query's future.
    pub probs: Tensor<B, 4>,
    /// Heads concatenated before the output projection, `[batch_size, n_new, n_heads · head_dim]`.
    pub context: Tensor<B, 3>,
    /// After the output projection, `[batch_size, n_new, d_model]`.
    pub output: Tensor<B, 3>,
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
/// positions `0..n_past + n_new`: `true` where the key lies in the query's future (column `>` row
/// `+ n_past`), built on the device (a host-built mask cost 7 % of a cached ICL scoring's samples).
///
/// # Shapes
/// - output: `[n_new, n_past + n_new]`
fn causal_mask<B: Backend>(n_past: usize, n_new: usize, device: &B::Device) -> Tensor<B, 2, Bool> {
    Tensor::<B, 2, Bool>::tril_mask([n_new, n_past + n_new], n_past as i64, device)
}

impl<B: Backend> CausalSelfAttention<B> {
    /// Multi-head attention (`n_kv_heads = n_heads`, `head_dim = d_model / n_heads`) from its four
    /// projections, as GPT-2 and OPT have it; `n_heads` is positive and divides `d_model` (the
    /// config checks both before any loader builds one).
    pub fn multi_head(
        query: Linear<B>,
        key: Linear<B>,
        value: Linear<B>,
        output: Linear<B>,
        n_heads: usize,
    ) -> Self {
        let d_model = query.weight.dims()[1];
        Self {
            query,
            key,
            value,
            output,
            n_heads,
            n_kv_heads: n_heads,
            head_dim: d_model / n_heads,
        }
    }

    /// Causal self-attention with its intermediates.
    ///
    /// # Shapes
    ///
    /// - input: `[batch_size, seq_length, d_model]`
    /// - rotary: `[seq_length, head_dim]` each, or `None`
    /// - output: see [`AttentionTrace`] (`n_past = 0`, `n_new = seq_length`)
    pub fn forward_traced(&self, input: Tensor<B, 3>, rotary: Rotary<B>) -> AttentionTrace<B> {
        self.attend(input, rotary, None)
    }

    /// Causal self-attention.
    ///
    /// # Shapes
    ///
    /// - input: `[batch_size, seq_length, d_model]`
    /// - rotary: `[seq_length, head_dim]` each, or `None`
    /// - output: `[batch_size, seq_length, d_model]`
    pub fn forward(&self, input: Tensor<B, 3>, rotary: Rotary<B>) -> Tensor<B, 3> {
        self.attend(input, rotary, None).output
    }

    /// Causal self-attention of new positions after `past` ones, returning the output and the
    /// keys and values of every position (for the next call).
    ///
    /// # Shapes
    /// - input: `[batch_size, n_new, d_model]`
    /// - rotary: `[n_new, head_dim]` each, the tables' rows `n_past..n_past + n_new`, or `None`
    /// - past: `[batch_size, n_kv_heads, n_past, head_dim]` each
    /// - output: `[batch_size, n_new, d_model]`; key/values `[batch_size, n_kv_heads, n_past + n_new, head_dim]`
    pub fn forward_after(
        &self,
        input: Tensor<B, 3>,
        rotary: Rotary<B>,
        past: Option<&KeyValues<B>>,
    ) -> (Tensor<B, 3>, KeyValues<B>) {
        let trace = self.attend(input, rotary, past);
        (
            trace.output,
            KeyValues {
                key: trace.key,
                value: trace.value,
            },
        )
    }

    /// Attention of the new positions `input` over the `past` positions (if any) and themselves.
    ///
    /// # Shapes
    /// - input: `[batch_size, n_new, d_model]`
    /// - rotary: `[n_new, head_dim]` each, or `None`
    /// - past: `[batch_size, n_kv_heads, n_past, head_dim]` each
    /// - output: see [`AttentionTrace`]
    fn attend(
        &self,
        input: Tensor<B, 3>,
        rotary: Rotary<B>,
        past: Option<&KeyValues<B>>,
    ) -> AttentionTrace<B> {
        let [batch_size, n_new, _] = input.dims();
        let device = input.device();
        let head_dim = self.head_dim;
        let heads = |x: Tensor<B, 3>, n: usize| {
            x.reshape([batch_size, n_new, n, head_dim]).swap_dims(1, 2) // [batch_size, n, n_new, head_dim]
        };
        let query = heads(self.query.forward(input.clone()), self.n_heads);
        let key = heads(self.key.forward(input.clone()), self.n_kv_heads);
        let value = heads(self.value.forward(input), self.n_kv_heads);
        let (query, key) = match rotary {
            Some((cos, sin)) => (
                apply_rotary(query, cos.clone(), sin.clone()),
                apply_rotary(key, cos, sin),
            ),
            None => (query, key),
        };
        let (key, value, n_past) = match past {
            Some(past) => (
                Tensor::cat(vec![past.key.clone(), key], 2),
                Tensor::cat(vec![past.value.clone(), value], 2),
                past.key.dims()[2],
            ),
            None => (key, value, 0),
        };
        let n_keys = n_past + n_new;
        let n_rep = self.n_heads / self.n_kv_heads;
        let keys = repeat_kv(key.clone(), n_rep); // [batch_size, n_heads, n_keys, head_dim]
        let values = repeat_kv(value.clone(), n_rep);
        // The score scale `1 / sqrt(head_dim)` is applied to q (`n_new · n_heads · head_dim`
        // values) rather than to the scores (`n_heads · n_new · n_keys` values); for a head width
        // that is a power of 4 (SmolLM2's 64, the LLaMA fixtures' 16) the scale is a power of 2 and
        // both orders give the same bits.
        let scaled_query = query.clone() / (head_dim as f64).sqrt();
        let future = causal_mask::<B>(n_past, n_new, &device);

        // Probabilities `[batch_size, heads, n_new, n_keys]` and weighted values
        // `[batch_size, heads, n_new, head_dim]` of a range of heads: each head independently, so
        // on CPU backends two halves of the heads run as parallel tasks (`tint_branches`) and give
        // the same values as all heads at once.
        let attend = |heads: Range<usize>| {
            let n = heads.len();
            let q = scaled_query.clone().narrow(1, heads.start, n);
            let k = keys.clone().narrow(1, heads.start, n);
            let v = values.clone().narrow(1, heads.start, n);
            let scores = q.matmul(k.swap_dims(2, 3));
            let future = future
                .clone()
                .unsqueeze::<4>()
                .expand([batch_size, n, n_new, n_keys]);
            let probs = softmax(scores.mask_fill(future, MASKED_SCORE), 3);
            let context = probs.clone().matmul(v);
            (probs, context)
        };
        let half = self.n_heads / 2;
        let (probs, context) = if half > 0 && runs_in_parallel::<B>(&device) {
            let ((probs_a, context_a), (probs_b, context_b)) =
                rayon::join(|| attend(0..half), || attend(half..self.n_heads));
            (
                Tensor::cat(vec![probs_a, probs_b], 1),
                Tensor::cat(vec![context_a, context_b], 1),
            )
        } else {
            attend(0..self.n_heads)
        };

        // [batch_size, n_new, n_heads · head_dim]
        let context = context
            .swap_dims(1, 2)
            .reshape([batch_size, n_new, self.n_heads * head_dim]);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_causal_mask_hides_exactly_each_query_s_future() {
        let device = Default::default();
        for (n_past, n_new) in [(0, 1), (0, 5), (3, 1), (3, 4), (7, 2)] {
            let mask = causal_mask::<burn::backend::Flex>(n_past, n_new, &device);
            assert_eq!(mask.dims(), [n_new, n_past + n_new]);
            let got = mask.into_data().to_vec::<bool>().unwrap();
            let expected: Vec<bool> = (0..n_new)
                .flat_map(|row| (0..n_past + n_new).map(move |col| col > n_past + row))
                .collect();
            assert_eq!(got, expected, "n_past {n_past}, n_new {n_new}");
        }
    }
}
