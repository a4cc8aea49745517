//! Element-wise regularisers on the context summary (paper §3.4): continuity `R_C` and orthogonality `R_D`,
//! with a position weighting `zeta(s)`.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

/// Added to `||y||` before normalising, so a zero vector does not divide by zero.
pub const NORM_EPSILON: f64 = 1e-6;

/// Position weighting `zeta(s)` of the regularisers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum PositionWeighting {
    /// `zeta(s) = 1`.
    Constant,
    /// `zeta(s) = (s + 1) / n`, growing along the sequence (in-context learning prior).
    Linear,
    /// `zeta(s) = ((s + 1) / n)^2`.
    Quadratic,
}

impl PositionWeighting {
    /// The weights for positions `0..seq_length`.
    pub fn weights(self, seq_length: usize) -> Vec<f32> {
        (0..seq_length)
            .map(|s| {
                let t = (s + 1) as f32 / seq_length as f32;
                match self {
                    Self::Constant => 1.0,
                    Self::Linear => t,
                    Self::Quadratic => t * t,
                }
            })
            .collect()
    }

    /// The weights as a tensor `[seq_length]`.
    pub fn tensor<B: Backend>(self, seq_length: usize, device: &B::Device) -> Tensor<B, 1> {
        Tensor::from_data(
            TensorData::new(self.weights(seq_length), [seq_length]),
            device,
        )
    }
}

/// `n_s = y_s / ||y_s||`.
///
/// # Shapes
/// - `context`: `[batch_size, seq_length, d_y]`; output the same
pub fn normalise<B: Backend>(context: Tensor<B, 3>) -> Tensor<B, 3> {
    let norm = context
        .clone()
        .square()
        .sum_dim(2)
        .sqrt()
        .add_scalar(NORM_EPSILON);
    context / norm
}

/// Continuity regulariser
/// `R_C = 1 / (B (n - 1)) sum_b sum_{s >= 1} zeta(s) ||n_s - n_{s-1}||^2` (the paper's sum, averaged
/// over samples and position pairs so its weight does not depend on batch size or length).
///
/// # Shapes
/// - `context`: `[batch_size, seq_length, d_y]`, `seq_length >= 2`
/// - `zeta`: `[seq_length]`
/// - output: `[1]`
pub fn continuity<B: Backend>(context: Tensor<B, 3>, zeta: Tensor<B, 1>) -> Tensor<B, 1> {
    let [batch_size, seq_length, _] = context.dims();
    let unit = normalise(context);
    let steps = unit.clone().narrow(1, 1, seq_length - 1) - unit.narrow(1, 0, seq_length - 1);
    // [batch_size, seq_length - 1]
    let squared = steps
        .square()
        .sum_dim(2)
        .reshape([batch_size, seq_length - 1]);
    let weights = zeta.narrow(0, 1, seq_length - 1).unsqueeze::<2>();
    (squared * weights)
        .sum()
        .div_scalar((batch_size * (seq_length - 1)) as f64)
}

/// Orthogonality regulariser
/// `R_D = 1 / (n B^2) sum_s zeta(s) sum_{a, b} (n_s^(a) . n_s^(b) - delta_ab)^2`
/// (the paper's sum over position and sample pairs, averaged).
///
/// # Shapes
/// - `context`: `[batch_size, seq_length, d_y]`
/// - `zeta`: `[seq_length]`
/// - output: `[1]`
pub fn orthogonality<B: Backend>(context: Tensor<B, 3>, zeta: Tensor<B, 1>) -> Tensor<B, 1> {
    let [batch_size, seq_length, _] = context.dims();
    // [seq_length, batch_size, d_y]
    let unit = normalise(context).swap_dims(0, 1);
    // [seq_length, batch_size, batch_size]
    let gram = unit.clone().matmul(unit.swap_dims(1, 2));
    let identity = Tensor::<B, 2>::eye(batch_size, &gram.device()).unsqueeze::<3>();
    let per_position = (gram - identity)
        .square()
        .sum_dim(2)
        .sum_dim(1)
        .reshape([seq_length]);
    (per_position * zeta)
        .sum()
        .div_scalar((seq_length * batch_size * batch_size) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::TestBackend;

    /// Hand-computed values on exact small inputs: only f32 rounding differs.
    const HAND_TOLERANCE: f32 = 1e-5;

    fn tensor(values: Vec<f32>, shape: [usize; 3]) -> Tensor<TestBackend, 3> {
        Tensor::from_data(TensorData::new(values, shape), &Default::default())
    }

    #[test]
    fn continuity_on_hand_input() {
        // One sample, positions y0 = (2, 0), y1 = (0, 3), y2 = (0, 1):
        // n = (1,0), (0,1), (0,1); steps: ||(-1, 1)||^2 = 2 and 0.
        // zeta = (1, 1, 1): R_C = (2 + 0) / 2 = 1; zeta linear (1/3, 2/3, 1): (2 * 2/3 + 0) / 2 = 2/3.
        let y = tensor(vec![2.0, 0.0, 0.0, 3.0, 0.0, 1.0], [1, 3, 2]);
        let device = Default::default();
        let constant = continuity(y.clone(), PositionWeighting::Constant.tensor(3, &device));
        assert!((constant.into_scalar() - 1.0).abs() < HAND_TOLERANCE);
        let linear = continuity(y, PositionWeighting::Linear.tensor(3, &device));
        assert!((linear.into_scalar() - 2.0 / 3.0).abs() < HAND_TOLERANCE);
    }

    #[test]
    fn orthogonality_on_hand_input() {
        // Two samples, one position: n^(0) = (1, 0), n^(1) = (0.6, 0.8).
        // Gram - I = [[0, 0.6], [0.6, 0]]: sum of squares 0.72; divided by n B^2 = 4: 0.18.
        let y = tensor(vec![3.0, 0.0, 0.3, 0.4], [2, 1, 2]);
        let zeta = PositionWeighting::Constant.tensor(1, &Default::default());
        let value = orthogonality(y, zeta).into_scalar();
        assert!((value - 0.18).abs() < HAND_TOLERANCE, "{value}");
    }

    #[test]
    fn orthogonal_and_constant_contexts_cost_nothing() {
        // Orthogonal samples that never change: both regularisers vanish.
        let y = tensor(vec![1.0, 0.0, 1.0, 0.0, 0.0, 2.0, 0.0, 2.0], [2, 2, 2]);
        let zeta = PositionWeighting::Quadratic.tensor(2, &Default::default());
        assert!(continuity(y.clone(), zeta.clone()).into_scalar().abs() < HAND_TOLERANCE);
        assert!(orthogonality(y, zeta).into_scalar().abs() < HAND_TOLERANCE);
    }
}
