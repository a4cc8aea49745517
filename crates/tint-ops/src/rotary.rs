//! Rotary position embeddings (RoPE, Su et al. 2021), the one rotary of the workspace, in HF's
//! `rotate_half` convention: the plain form the auxiliary LLaMA forward and the functional reference
//! use ([`rotary_tables_dtype`], [`apply_rotary`]), and the TinT token-wise module of the constructed
//! network (paper appendix J.2, [`RotaryEmbedding`]): the queries and keys computed by the
//! attention forward module are rotated before they are scored and stored.
//!
//! For an auxiliary head vector `x = [x₁, x₂]` (halves of `h_a / 2`) at token position `t`,
//! `RoPE(x) = x ⊙ cos(t θ) + [−x₂, x₁] ⊙ sin(t θ)`, `θ_i = base^(−2i / h_a)` repeated for both halves.
//! Every `h_a`-wide block of a `D`-wide q or k is one head. The constructed weights are the `cos` /
//! `sin` tables (one row per one-hot token position, like the position terms of docs/construction.md §3.1)
//! and `rotate_half` as a split-wise op over blocks of `h_a` (a signed permutation).
//!
//! llama.cpp pairs adjacent elements instead; its GGUF converter permutes the rows of `W_q`/`W_k`
//! so that the two conventions agree, and tint-aux's GGUF loader undoes that permutation.

use burn::{
    module::{Module, Param},
    tensor::{backend::Backend, DType, Int, Tensor},
};

use crate::{
    error::TintOpsError,
    host::tensor_from_f64,
    hsplit::{SplitWise, SplitWiseBuilder},
};

/// `cos` and `sin` of `t · θ_(j mod head_dim/2)` for `t < n_positions`, `j < head_dim`, row-major,
/// computed in f64 (rounded once to the module dtype, as the auxiliary forward does).
pub fn rotary_angles(n_positions: usize, head_dim: usize, theta: f64) -> (Vec<f64>, Vec<f64>) {
    let half = head_dim / 2;
    let mut cos = Vec::with_capacity(n_positions * head_dim);
    let mut sin = Vec::with_capacity(n_positions * head_dim);
    for t in 0..n_positions {
        for j in 0..head_dim {
            let i = j % half;
            let inv_freq = theta.powf(-((2 * i) as f64) / head_dim as f64);
            let angle = t as f64 * inv_freq;
            cos.push(angle.cos());
            sin.push(angle.sin());
        }
    }
    (cos, sin)
}

/// `cos` and `sin` tables of shape `[seq_length, head_dim]` for positions `0..seq_length`, in
/// float type `dtype` (the model's, e.g. `DType::F64` for a float64 model). Angles are computed in
/// f64 and rounded once.
pub fn rotary_tables_dtype<B: Backend>(
    seq_length: usize,
    head_dim: usize,
    theta: f64,
    device: &B::Device,
    dtype: DType,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let (cos, sin) = rotary_angles(seq_length, head_dim, theta);
    let shape = [seq_length, head_dim];
    (
        tensor_from_f64(cos, shape, dtype, device),
        tensor_from_f64(sin, shape, dtype, device),
    )
}

/// `[−x₂, x₁]` over the last dimension.
fn rotate_half<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [b, h, s, d] = x.dims();
    let x1 = x.clone().slice([0..b, 0..h, 0..s, 0..d / 2]);
    let x2 = x.slice([0..b, 0..h, 0..s, d / 2..d]);
    Tensor::cat(vec![x2.neg(), x1], 3)
}

/// Applies RoPE to queries or keys split into heads (the plain form of [`RotaryEmbedding`]).
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

/// RoPE on `D`-wide token vectors made of `D / h_a` heads.
#[derive(Module, Debug)]
pub struct RotaryEmbedding<B: Backend> {
    /// `[Tmax, h_a]`: row `t` = `cos(t θ)`.
    pub cos: Param<Tensor<B, 2>>,
    /// `[Tmax, h_a]`: row `t` = `sin(t θ)`.
    pub sin: Param<Tensor<B, 2>>,
    /// `rotate_half` on each of the `D / h_a` head blocks.
    pub rotate_half: SplitWise<B>,
    /// `D / h_a`.
    pub n_heads: usize,
}

impl<B: Backend> RotaryEmbedding<B> {
    /// Builds the tables for `max_seq_length` positions of heads of `head_dim` coordinates in a
    /// `d_model`-wide vector.
    ///
    /// # Errors
    /// [`TintOpsError::BadOption`] for an odd or zero `head_dim`, a `head_dim` that does not divide
    /// `d_model`, or a non-finite / non-positive `theta`.
    pub fn new(
        d_model: usize,
        head_dim: usize,
        max_seq_length: usize,
        theta: f64,
        dtype: DType,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        if head_dim == 0 || !head_dim.is_multiple_of(2) || !d_model.is_multiple_of(head_dim) {
            return Err(TintOpsError::BadOption {
                name: "rotary head_dim",
                value: head_dim as f64,
                reason: "must be even, positive and divide D",
            });
        }
        if !(theta.is_finite() && theta > 0.0) {
            return Err(TintOpsError::BadOption {
                name: "rope_theta",
                value: theta,
                reason: "must be finite and > 0",
            });
        }
        let n_heads = d_model / head_dim;
        let half = head_dim / 2;
        let mut rotate = SplitWiseBuilder::zeros(n_heads, head_dim);
        for block in 0..n_heads {
            for j in 0..half {
                rotate.set(block, j, j + half, -1.0);
                rotate.set(block, j + half, j, 1.0);
            }
        }
        let (cos, sin) = rotary_tables_dtype(max_seq_length, head_dim, theta, device, dtype);
        Ok(Self {
            cos: Param::from_tensor(cos),
            sin: Param::from_tensor(sin),
            rotate_half: rotate.build(dtype, device),
            n_heads,
        })
    }

    /// Rotates every head of every token by its position.
    ///
    /// # Shapes
    /// * `x`: `[batch_size, T, D]`, `positions`: `[T]` (token positions `< Tmax`) → `[batch_size, T, D]`
    pub fn forward(&self, x: Tensor<B, 3>, positions: Tensor<B, 1, Int>) -> Tensor<B, 3> {
        let [batch_size, seq_length, d_model] = x.dims();
        // One-hot positions times the tables are row gathers; tile over the heads and the batch
        // (same-shape products keep flex on its contiguous fast path).
        let rows = |table: &Param<Tensor<B, 2>>| {
            table
                .val()
                .select(0, positions.clone())
                .repeat_dim(1, self.n_heads)
                .reshape([1, seq_length, d_model])
                .repeat_dim(0, batch_size)
        };
        let rotated = self.rotate_half.forward(x.clone());
        x * rows(&self.cos) + rotated * rows(&self.sin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{max_abs_diff, random, TestBackend};
    use burn::tensor::TensorData;

    /// f64: one product and one sum per coordinate on O(1) values; round-off ~1e-16, and the
    /// angles are computed by the same f64 formula.
    const F64_TOL: f64 = 1e-12;

    #[test]
    fn rotates_each_pair_by_its_angle_like_rotate_half() {
        let device = Default::default();
        let (d, ha, tmax, t, theta) = (12, 4, 9, 7, 500.0);
        let module =
            RotaryEmbedding::<TestBackend>::new(d, ha, tmax, theta, DType::F64, &device).unwrap();
        let x = random([2, t, d], 1.0);
        // Positions 2..2+t (any token positions < Tmax).
        let positions: Vec<i64> = (2..2 + t as i64).collect();
        let out = module.forward(
            x.clone(),
            Tensor::from_data(TensorData::new(positions.clone(), [t]), &device),
        );
        let xs: Vec<f64> = x.into_data().convert::<f64>().to_vec().unwrap();
        let mut expected = vec![0.0; xs.len()];
        for b in 0..2 {
            for (row, &pos) in positions.iter().enumerate() {
                for head in 0..d / ha {
                    let base = (b * t + row) * d + head * ha;
                    for i in 0..ha / 2 {
                        let angle = pos as f64 * theta.powf(-((2 * i) as f64) / ha as f64);
                        let (x1, x2) = (xs[base + i], xs[base + i + ha / 2]);
                        expected[base + i] = x1 * angle.cos() - x2 * angle.sin();
                        expected[base + i + ha / 2] = x2 * angle.cos() + x1 * angle.sin();
                    }
                }
            }
        }
        let expected = Tensor::<TestBackend, 3>::from_data(
            TensorData::new(expected, [2, t, d]),
            (&device, DType::F64),
        );
        let err = max_abs_diff(out, expected);
        assert!(err < F64_TOL, "rotary differs by {err}");
    }

    #[test]
    fn bad_head_dim_or_theta_is_an_error() {
        let device = Default::default();
        for (d, ha, theta) in [(12, 3, 10.0), (12, 8, 10.0), (12, 0, 10.0), (12, 4, 0.0)] {
            assert!(matches!(
                RotaryEmbedding::<TestBackend>::new(d, ha, 8, theta, DType::F64, &device),
                Err(TintOpsError::BadOption { .. })
            ));
        }
        assert!(matches!(
            RotaryEmbedding::<TestBackend>::new(12, 4, 8, f64::NAN, DType::F64, &device),
            Err(TintOpsError::BadOption {
                name: "rope_theta",
                ..
            })
        ));
    }

    #[test]
    fn the_plain_form_rotates_each_pair_by_its_angle_and_preserves_norms() {
        let device = Default::default();
        let (s, d, theta) = (5, 8, 100.0);
        let x = random([1, 2, s, d], 1.0).cast(DType::F32);
        let (cos, sin) = rotary_tables_dtype::<TestBackend>(s, d, theta, &device, DType::F32);
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
            burn::tensor::Tolerance::absolute(ROPE_TOL),
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
