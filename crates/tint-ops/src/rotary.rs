//! Rotary position embeddings (RoPE, Su et al. 2021) as a TinT token-wise module (paper appendix
//! J.2): the queries and keys computed by the attention forward module are rotated before they
//! are scored and stored, in HF's `rotate_half` convention.
//!
//! For an auxiliary head vector `x = [x₁, x₂]` (halves of `h_a / 2`) at token position `t`,
//! `RoPE(x) = x ⊙ cos(t θ) + [−x₂, x₁] ⊙ sin(t θ)`, `θ_i = base^(−2i / h_a)` repeated for both halves.
//! Every `h_a`-wide block of a `D`-wide q or k is one head. The constructed weights are the `cos` /
//! `sin` tables (one row per one-hot token position, like the position terms of docs/construction.md §3.1)
//! and `rotate_half` as a split-wise op over blocks of `h_a` (a signed permutation).

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
        let (cos, sin) = rotary_angles(max_seq_length, head_dim, theta);
        let shape = [max_seq_length, head_dim];
        Ok(Self {
            cos: Param::from_tensor(tensor_from_f64(cos, shape, dtype, device)),
            sin: Param::from_tensor(tensor_from_f64(sin, shape, dtype, device)),
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
}
