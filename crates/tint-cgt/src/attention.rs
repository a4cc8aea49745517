//! Causal multi-head self-attention with an additive mask, used by both streams.

use burn::module::Module;
use burn::nn::{Initializer, Linear, LinearConfig};
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

/// Value added to the attention score of a blocked (query, key) pair: minus infinity, so that its
/// softmax weight is exactly zero.
///
/// No row is all blocked (a query always sees itself, [`attention_bias`]), so the row maximum that
/// softmax subtracts is finite and no `-inf - (-inf)` NaN can arise; in the backward pass the
/// blocked entries get a zero gradient through `exp`'s zero output. Until 2026-11-28 this was
/// `-1e9`, which gave the same zero weights (`exp` of it underflows to exactly 0 in f32) and the
/// same gradients, but sent every blocked entry through `expf`'s slow underflow branch (glibc's
/// `xflowf` and its `errno` write: about 6 % of a CGT + aux training step on flex;
/// docs/performance.md, "CGT attention: blocked scores at minus infinity").
pub const BLOCKED_SCORE: f32 = f32::NEG_INFINITY;

/// Causal self-attention whose queries, keys and values come from a `d_input`-wide input and whose
/// output is `d_model` wide. Should be created with [`CausalSelfAttention::new`].
///
/// For the `x` heads `d_input = d_model = d_x`; for the `y` heads `d_input = d_x + d_y`, `d_model = d_y`.
#[derive(Module, Debug)]
pub struct CausalSelfAttention<B: Backend> {
    /// Fused query/key/value projection `[d_input, 3 d_model]`.
    pub qkv: Linear<B>,
    /// Output projection `[d_model, d_model]`.
    pub output: Linear<B>,
    /// Number of heads.
    pub n_heads: usize,
}

impl<B: Backend> CausalSelfAttention<B> {
    /// Creates the layer with normal(0, `init_std`) weights and biases.
    pub fn new(
        d_input: usize,
        d_model: usize,
        n_heads: usize,
        init_std: f64,
        device: &B::Device,
    ) -> Self {
        let init = Initializer::Normal {
            mean: 0.0,
            std: init_std,
        };
        Self {
            qkv: LinearConfig::new(d_input, 3 * d_model)
                .with_initializer(init.clone())
                .init(device),
            output: LinearConfig::new(d_model, d_model)
                .with_initializer(init)
                .init(device),
            n_heads,
        }
    }

    /// Attends over the sequence.
    ///
    /// # Shapes
    /// - `input`: `[batch_size, seq_length, d_input]`
    /// - `bias`: `[batch_size or 1, 1, seq_length, seq_length]`, added to the scores (see [`attention_bias`])
    /// - output: `[batch_size, seq_length, d_model]`
    pub fn forward(&self, input: Tensor<B, 3>, bias: Tensor<B, 4>) -> Tensor<B, 3> {
        let [batch_size, seq_length, _] = input.dims();
        let qkv = self.qkv.forward(input);
        let d_model = qkv.dims()[2] / 3;
        let d_head = d_model / self.n_heads;
        let split = |index: usize| {
            qkv.clone()
                .narrow(2, index * d_model, d_model)
                .reshape([batch_size, seq_length, self.n_heads, d_head])
                .swap_dims(1, 2)
        };
        // [batch_size, n_heads, seq_length, d_head]
        let (query, key, value) = (split(0), split(1), split(2));
        let scores = query
            .matmul(key.swap_dims(2, 3))
            .div_scalar((d_head as f64).sqrt());
        let weights = softmax(add_bias(scores, bias), 3);
        // [batch_size, seq_length, d_model]
        let context = weights
            .matmul(value)
            .swap_dims(1, 2)
            .reshape([batch_size, seq_length, d_model]);
        self.output.forward(context)
    }
}

/// Adds the `[rows, 1, T, T]` bias (`rows` = batch size or 1) to `[B, H, T, T]` scores.
///
/// The same sums as `scores + bias.expand(..)`, laid out for the flex backend's fast paths: it
/// walks an operand broadcast over an inner dimension (the heads) element by element (7 % of a
/// `linreg-cpu` CGT + aux run, docs/performance.md "Changes of 2026-11-27, morning"). Repeating
/// the bias over the heads makes each sequence's `H T T` scores one row: the bias is then either
/// a same-shaped operand (`rows = B`) or one row shared by every sequence (`rows = 1`).
///
/// # Shapes
/// - `scores`: `[batch_size, n_heads, seq_length, seq_length]`
/// - `bias`: `[batch_size or 1, 1, seq_length, seq_length]`
/// - output: `[batch_size, n_heads, seq_length, seq_length]`
fn add_bias<B: Backend>(scores: Tensor<B, 4>, bias: Tensor<B, 4>) -> Tensor<B, 4> {
    let dims = scores.dims();
    let [batch_size, n_heads, _, _] = dims;
    let rows = bias.dims()[0];
    let per_sequence = dims[1..].iter().product::<usize>();
    let bias = bias.repeat_dim(1, n_heads).reshape([rows, per_sequence]);
    (scores.reshape([batch_size, per_sequence]) + bias).reshape(dims)
}

/// Builds the additive attention bias: causal, and optionally hiding, per sample `b`, every key
/// before `key_start[b]` (a query always sees itself, so no row is empty).
///
/// With `key_start`, the model effectively runs on the suffix `t_s..t_n` alone while keeping the
/// original positions; this is how the auxiliary loss and the specialised model drop the prompt.
///
/// # Shapes
/// - output: `[batch_size or 1, 1, seq_length, seq_length]`
pub fn attention_bias<B: Backend>(
    seq_length: usize,
    key_start: Option<&[usize]>,
    device: &B::Device,
) -> Tensor<B, 4> {
    let starts: Vec<usize> = key_start.map(<[usize]>::to_vec).unwrap_or_else(|| vec![0]);
    let rows = starts.len();
    let mut values = vec![0.0f32; rows * seq_length * seq_length];
    for (row, &start) in starts.iter().enumerate() {
        for query in 0..seq_length {
            for key in 0..seq_length {
                let visible = key <= query && (key >= start || key == query);
                if !visible {
                    values[(row * seq_length + query) * seq_length + key] = BLOCKED_SCORE;
                }
            }
        }
    }
    Tensor::from_data(
        TensorData::new(values, [rows, 1, seq_length, seq_length]),
        device,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::TestBackend;

    /// f32 attention over a handful of positions: rounding stays far below this.
    const CAUSAL_TOLERANCE: f32 = 1e-5;

    #[test]
    fn output_is_causal() {
        let device = Default::default();
        let attention = CausalSelfAttention::<TestBackend>::new(6, 4, 2, 0.3, &device);
        let input = Tensor::<TestBackend, 3>::random(
            [2, 5, 6],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            &device,
        );
        let bias = attention_bias::<TestBackend>(5, None, &device);
        let full = attention.forward(input.clone(), bias.clone());
        assert_eq!(full.dims(), [2, 5, 4]);
        // Changing the last position must leave every earlier output unchanged.
        let changed = Tensor::cat(
            vec![
                input.clone().narrow(1, 0, 4),
                input.narrow(1, 4, 1).mul_scalar(-3.0),
            ],
            1,
        );
        let again = attention.forward(changed, bias);
        let diff = (full.narrow(1, 0, 4) - again.narrow(1, 0, 4))
            .abs()
            .max()
            .into_scalar();
        assert!(diff < CAUSAL_TOLERANCE, "diff {diff}");
    }

    /// `add_bias` must make exactly the sums of the broadcast `scores + bias` (the same f32
    /// additions, so no tolerance), for a bias per sequence and for one shared bias.
    #[test]
    fn bias_over_heads_is_the_broadcast_sum() {
        let device = Default::default();
        let scores = Tensor::<TestBackend, 4>::random(
            [3, 2, 4, 4],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            &device,
        );
        for key_start in [None, Some(&[0, 2, 3][..])] {
            let bias = attention_bias::<TestBackend>(4, key_start, &device);
            let bias =
                bias.clone() + Tensor::random_like(&bias, burn::tensor::Distribution::Default);
            let broadcast = scores.clone() + bias.clone().expand([3, 2, 4, 4]);
            let ours = add_bias(scores.clone(), bias);
            assert_eq!(
                ours.into_data().to_vec::<f32>().unwrap(),
                broadcast.into_data().to_vec::<f32>().unwrap(),
                "key_start {key_start:?}"
            );
        }
    }

    /// Blocked scores at minus infinity give the same outputs and gradients, bit for bit, as the
    /// finite `-1e9` used before (whose `exp` underflows to exactly zero), with prompts hidden so
    /// that some rows keep only their own position; and everything stays finite.
    #[test]
    fn blocked_scores_at_minus_infinity_match_a_large_finite_bias() {
        type Grad = burn::backend::Autodiff<TestBackend>;
        fn values<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> Vec<f32> {
            tensor.into_data().to_vec::<f32>().unwrap()
        }
        let device = Default::default();
        let attention = CausalSelfAttention::<Grad>::new(6, 4, 2, 0.3, &device);
        let input = Tensor::<Grad, 3>::random(
            [3, 5, 6],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            &device,
        );
        let bias = attention_bias::<Grad>(5, Some(&[0, 2, 4]), &device);
        let finite = bias.clone().clamp_min(-1.0e9);
        let run = |bias: Tensor<Grad, 4>| {
            let input = input.clone().require_grad();
            let output = attention.forward(input.clone(), bias);
            let grads = (output.clone() * output.clone()).sum().backward();
            let input_grad = values(input.grad(&grads).unwrap());
            let weight_grad = values(attention.qkv.weight.grad(&grads).unwrap());
            (values(output), input_grad, weight_grad)
        };
        let ours = run(bias);
        let before = run(finite);
        for figures in [&ours.0, &ours.1, &ours.2] {
            assert!(figures.iter().all(|v| v.is_finite()));
        }
        assert_eq!(ours, before);
    }

    #[test]
    fn key_start_hides_the_prefix() {
        let device = Default::default();
        let bias = attention_bias::<TestBackend>(4, Some(&[0, 2]), &device);
        let values = bias.into_data().to_vec::<f32>().unwrap();
        // Sample 1, query 3 sees keys 2 and 3 only.
        let row = &values[16 + 12..16 + 16];
        assert_eq!(row, &[BLOCKED_SCORE, BLOCKED_SCORE, 0.0, 0.0]);
        // Sample 1, query 0 still sees itself.
        assert_eq!(values[16], 0.0);
        // Sample 0 is purely causal.
        assert_eq!(&values[12..16], &[0.0, 0.0, 0.0, 0.0]);
    }
}
