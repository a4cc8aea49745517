//! Rotary position embeddings (Su et al. 2021) in HF's `rotate_half` convention.
//!
//! For a head vector `x = [x₁, x₂]` (two halves of `head_dim / 2`) at position `p`,
//! `RoPE(x) = x·cos(pθ) + [−x₂, x₁]·sin(pθ)`, with `θ_i = base^(−2i / head_dim)` repeated for both halves.
//! llama.cpp pairs adjacent elements instead; its GGUF converter permutes the rows of `W_q`/`W_k` so that
//! the two conventions agree, and the GGUF loader undoes that permutation
//! ([`unpermute_rotary_rows`](super::loader::unpermute_rotary_rows)).

use burn::tensor::{backend::Backend, DType, Tensor, TensorData};

/// `cos` and `sin` of `p · θ_(j mod head_dim/2)` for `p < seq_length`, `j < head_dim`, row-major, in f64.
fn rotary_angles(seq_length: usize, head_dim: usize, theta: f64) -> (TensorData, TensorData) {
    let half = head_dim / 2;
    let mut cos = Vec::with_capacity(seq_length * head_dim);
    let mut sin = Vec::with_capacity(seq_length * head_dim);
    for p in 0..seq_length {
        for j in 0..head_dim {
            let i = j % half;
            let inv_freq = theta.powf(-((2 * i) as f64) / head_dim as f64);
            let angle = p as f64 * inv_freq;
            cos.push(angle.cos());
            sin.push(angle.sin());
        }
    }
    (
        TensorData::new(cos, [seq_length, head_dim]),
        TensorData::new(sin, [seq_length, head_dim]),
    )
}

/// `cos` and `sin` tables of shape `[seq_length, head_dim]` for positions `0..seq_length`, in the device's
/// default float type (see [`rotary_tables_dtype`] for another). Angles are computed in f64 and rounded once.
pub fn rotary_tables<B: Backend>(
    seq_length: usize,
    head_dim: usize,
    theta: f64,
    device: &B::Device,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let (cos, sin) = rotary_angles(seq_length, head_dim, theta);
    (
        Tensor::from_data(cos, device),
        Tensor::from_data(sin, device),
    )
}

/// [`rotary_tables`] in float type `dtype` (the model's, e.g. `DType::F64` for a float64 model).
pub fn rotary_tables_dtype<B: Backend>(
    seq_length: usize,
    head_dim: usize,
    theta: f64,
    device: &B::Device,
    dtype: DType,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let (cos, sin) = rotary_angles(seq_length, head_dim, theta);
    (
        Tensor::from_data(cos, (device, dtype)),
        Tensor::from_data(sin, (device, dtype)),
    )
}

/// `[−x₂, x₁]` over the last dimension.
fn rotate_half<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [b, h, s, d] = x.dims();
    let x1 = x.clone().slice([0..b, 0..h, 0..s, 0..d / 2]);
    let x2 = x.slice([0..b, 0..h, 0..s, d / 2..d]);
    Tensor::cat(vec![x2.neg(), x1], 3)
}

/// Applies RoPE to queries or keys.
///
/// # Shapes
/// - x: `[batch_size, n_heads, seq_length, head_dim]`
/// - cos, sin: `[seq_length, head_dim]`
/// - output: `[batch_size, n_heads, seq_length, head_dim]`
pub fn apply_rotary<B: Backend>(
    x: Tensor<B, 4>,
    cos: Tensor<B, 2>,
    sin: Tensor<B, 2>,
) -> Tensor<B, 4> {
    // Each (batch, head) slice is one `T · head_dim` row and the tables one row shared by all:
    // the same products and sums as broadcasting `[1, 1, T, head_dim]` tables, but in the
    // shared-row layout the flex backend runs vectorised (it walks a table broadcast over the
    // heads element by element).
    let dims = x.dims();
    let [batch_size, n_heads, seq_length, head_dim] = dims;
    let rows = [batch_size * n_heads, seq_length * head_dim];
    let table = |t: Tensor<B, 2>| t.reshape([1, seq_length * head_dim]);
    let rotated = rotate_half(x.clone()).reshape(rows);
    (x.reshape(rows) * table(cos) + rotated * table(sin)).reshape(dims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Distribution, Tolerance};

    type TestBackend = burn::backend::Flex;

    #[test]
    fn rotates_each_pair_by_its_angle_and_preserves_norms() {
        let device = Default::default();
        let (s, d, theta) = (5, 8, 100.0);
        let x =
            Tensor::<TestBackend, 4>::random([1, 2, s, d], Distribution::Normal(0.0, 1.0), &device);
        let (cos, sin) = rotary_tables::<TestBackend>(s, d, theta, &device);
        let y = apply_rotary(x.clone(), cos, sin);
        let xs = x.to_data().to_vec::<f32>().unwrap();
        let mut expected = vec![0f32; xs.len()];
        for head in 0..2 {
            for p in 0..s {
                let base = (head * s + p) * d;
                for i in 0..d / 2 {
                    // The pair (x_i, x_{i+d/2}) is rotated by p·θ^(−2i/d).
                    let angle = p as f64 * theta.powf(-(2.0 * i as f64) / d as f64);
                    let (a, b) = (xs[base + i] as f64, xs[base + i + d / 2] as f64);
                    expected[base + i] = (a * angle.cos() - b * angle.sin()) as f32;
                    expected[base + i + d / 2] = (b * angle.cos() + a * angle.sin()) as f32;
                }
            }
        }
        // One f32 multiply-add per element on values of order 1.
        const ROPE_TOL: f32 = 1e-5;
        y.to_data().assert_approx_eq::<f32>(
            &TensorData::new(expected, [1, 2, s, d]),
            Tolerance::absolute(ROPE_TOL),
        );
    }

    #[test]
    fn tables_follow_the_requested_dtype() {
        let device = Default::default();
        let (cos, sin) = rotary_tables_dtype::<TestBackend>(3, 4, 10.0, &device, DType::F64);
        assert_eq!((cos.dtype(), sin.dtype()), (DType::F64, DType::F64));
        // Position 2, pair 1 of 2: angle 2·10^(−1/2); f64 keeps it to ~1e-16.
        let angle = 2.0 * 10f64.powf(-0.5);
        let value = cos.slice([2..3, 1..2]).into_data().to_vec::<f64>().unwrap()[0];
        assert!((value - angle.cos()).abs() < 1e-12, "{value}");
    }
}
