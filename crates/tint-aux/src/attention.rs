//! Causal multi-head self-attention with separate query, key, value and output projections.

use core::ops::Range;

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::{activation::softmax, backend::Backend, Bool, Tensor};
use tint_branches::runs_in_parallel;

/// Score given to masked (future) positions before the softmax: `exp` of it is exactly 0 in f32 and
/// f64, as HF's `finfo.min` gives after underflow. −∞ rather than a large finite value because libm's
/// `expf` sends finite arguments below about −104 through its slow underflow branch (4 % of the CPU
/// forward's samples with −1e30, docs/performance.md) and returns 0 for −∞ at once; no row is fully
/// masked (each position sees itself), so no `−∞ − (−∞)` NaN can arise. The LLaMA attention does
/// the same.
const MASKED_SCORE: f64 = f64::NEG_INFINITY;

/// Causal self-attention: `softmax(q k^T / sqrt(d_k) + causal mask) v`, heads concatenated, then the
/// output projection. All weights are `[d_input, d_output]` (`y = x W + b`).
#[derive(Module, Debug)]
pub struct CausalSelfAttention<B: Backend> {
    /// Query projection `W_Q`, `[d_model, d_model]` (GPT-2: `c_attn` columns `0..D`).
    pub query: Linear<B>,
    /// Key projection `W_K`, `[d_model, d_model]` (GPT-2: `c_attn` columns `D..2D`).
    pub key: Linear<B>,
    /// Value projection `W_V`, `[d_model, d_model]` (GPT-2: `c_attn` columns `2D..3D`).
    pub value: Linear<B>,
    /// Output projection `W_O`, `[d_model, d_model]` (GPT-2 `attn.c_proj`, OPT `out_proj`).
    pub output: Linear<B>,
    /// Number of heads `n_heads`; `d_k = d_model / n_heads`.
    pub n_heads: usize,
}

/// Everything one attention call computes.
#[derive(Debug, Clone)]
pub struct AttentionTrace<B: Backend> {
    /// Attention probabilities per head, `[batch_size, n_heads, seq_length, seq_length]`
    /// (query position, key position); zero above the diagonal.
    pub probs: Tensor<B, 4>,
    /// Heads concatenated before the output projection, `[batch_size, seq_length, d_model]`.
    pub context: Tensor<B, 3>,
    /// After the output projection, `[batch_size, seq_length, d_model]`.
    pub output: Tensor<B, 3>,
}

impl<B: Backend> CausalSelfAttention<B> {
    /// Runs attention and keeps the probabilities and the pre-projection context.
    ///
    /// # Shapes
    ///
    /// - input: `[batch_size, seq_length, d_model]`
    /// - output: see [`AttentionTrace`]
    pub fn forward_traced(&self, input: Tensor<B, 3>) -> AttentionTrace<B> {
        let [batch_size, seq_length, d_model] = input.dims();
        let n_heads = self.n_heads;
        let d_k = d_model / n_heads;
        let split_heads = |x: Tensor<B, 3>| {
            // [batch_size, n_heads, seq_length, d_k]
            x.reshape([batch_size, seq_length, n_heads, d_k])
                .swap_dims(1, 2)
        };
        // The score scale `1 / sqrt(d_k)` is applied to q (`T d_model` values) rather than to the
        // scores (`n_heads T²` values).
        let input_device = input.device();
        let q = split_heads(self.query.forward(input.clone()) / (d_k as f64).sqrt());
        let k = split_heads(self.key.forward(input.clone()));
        let v = split_heads(self.value.forward(input));

        // Probabilities `[batch_size, heads, seq_length, seq_length]` and weighted values
        // `[batch_size, heads, seq_length, d_k]` of a range of heads: each head independently, so
        // on CPU backends two halves of the heads run as parallel tasks (`tint_branches`) and give
        // the same values as all heads at once.
        let future = Tensor::<B, 2, Bool>::tril_mask([seq_length, seq_length], 0, &input_device);
        let attend = |heads: Range<usize>| {
            let n = heads.len();
            let q = q.clone().narrow(1, heads.start, n);
            let k = k.clone().narrow(1, heads.start, n);
            let v = v.clone().narrow(1, heads.start, n);
            let scores = q.matmul(k.swap_dims(2, 3));
            let future = future
                .clone()
                .unsqueeze::<4>()
                .expand([batch_size, n, seq_length, seq_length]);
            let probs = softmax(scores.mask_fill(future, MASKED_SCORE), 3);
            let context = probs.clone().matmul(v);
            (probs, context)
        };
        let half = n_heads / 2;
        let (probs, context) = if half > 0 && runs_in_parallel::<B>(&input_device) {
            let ((probs_a, context_a), (probs_b, context_b)) =
                rayon::join(|| attend(0..half), || attend(half..n_heads));
            (
                Tensor::cat(vec![probs_a, probs_b], 1),
                Tensor::cat(vec![context_a, context_b], 1),
            )
        } else {
            attend(0..n_heads)
        };

        // [batch_size, seq_length, d_model]
        let context = context
            .swap_dims(1, 2)
            .reshape([batch_size, seq_length, d_model]);
        let output = self.output.forward(context.clone());
        AttentionTrace {
            probs,
            context,
            output,
        }
    }

    /// Runs attention.
    ///
    /// # Shapes
    ///
    /// - input: `[batch_size, seq_length, d_model]`
    /// - output: `[batch_size, seq_length, d_model]`
    pub fn forward(&self, input: Tensor<B, 3>) -> Tensor<B, 3> {
        self.forward_traced(input).output
    }
}
