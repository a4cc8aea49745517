//! Regularisers on the context summary: the element-wise continuity `R_C` and orthogonality `R_D` of
//! paper §3.4 (with a position weighting `zeta(s)` and a choice of [`Normalisation`]), and the
//! distribution-matching regulariser of appendix A.2 ([`distribution_matching`]).
//! docs/cgt.md ("Regularisers") derives how the normalisation relates to the paper's weights.

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

/// How the sums of `R_C` and `R_D` are normalised. The paper writes both with `~` ("proportional to"),
/// so the constant is not fixed by the text; docs/cgt.md derives the weight rescaling between the two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Normalisation {
    /// Averages: `R_C` over samples and position pairs `(s-1, s)`, `R_D` over positions and sample
    /// pairs `(a, b)`. Weights do not depend on batch size or sequence length.
    #[default]
    Mean,
    /// The sums as printed: `R_C = 1/B sum_b sum_{s>=2}` (the sum per sequence, averaged over the batch
    /// like the task loss) and `R_D = sum_s sum_{a,b}` (the printed sum over the batch pairs).
    /// `Sum = (n - 1) Mean` for `R_C` and `Sum = n B^2 Mean` for `R_D`.
    Sum,
}

impl Normalisation {
    /// The factor `Sum / Mean` of `R_C` for `seq_length` positions.
    pub fn continuity_factor(self, seq_length: usize) -> f64 {
        match self {
            Self::Mean => 1.0,
            Self::Sum => seq_length.saturating_sub(1) as f64,
        }
    }

    /// The factor `Sum / Mean` of `R_D` for `seq_length` positions and `batch_size` samples.
    pub fn orthogonality_factor(self, seq_length: usize, batch_size: usize) -> f64 {
        match self {
            Self::Mean => 1.0,
            Self::Sum => (seq_length * batch_size * batch_size) as f64,
        }
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

/// Distribution-matching regulariser of paper appendix A.2, with the batch mean `mu_s = <y_s>` and
/// `Delta y = y - mu`:
/// - `cross_positions = true` (the Gaussian-process form):
///   `R_P = 1/N sum_s ||mu_s||^2 + 1/N^2 sum_{s,t,i,j} (<Delta y_{s,i} Delta y_{t,j}> - K_{s,t} delta_ij)^2`;
/// - `cross_positions = false` (the simplified `R'_D`, per-position statistics only), normalised by `1/N`
///   like the first form: `1/N sum_s [ ||mu_s||^2 + sum_{i,j} (<Delta y_{s,i} Delta y_{s,j}> - delta_ij)^2 ]`.
///
/// `<.>` averages over the batch (population statistics, `1/B`). `kernel` is the prior `K` (row-major
/// `[N, N]`, e.g. [`crate::vae::prior_kernel`]; only its diagonal is used without cross positions). The
/// cross-position form builds an `(N d_y)^2` covariance: meant for the reduced presets.
///
/// # Shapes
/// - `context`: `[batch_size, seq_length, d_y]`
/// - `kernel`: `[seq_length, seq_length]`
/// - output: `[1]`
pub fn distribution_matching<B: Backend>(
    context: Tensor<B, 3>,
    kernel: Tensor<B, 2>,
    cross_positions: bool,
) -> Tensor<B, 1> {
    let [batch_size, seq_length, d_y] = context.dims();
    let device = context.device();
    // [1, seq_length, d_y]
    let mean = context.clone().mean_dim(0);
    let mean_term = mean.clone().square().sum().div_scalar(seq_length as f64);
    let centred = context - mean;
    if cross_positions {
        let flat = centred.reshape([batch_size, seq_length * d_y]);
        // [N d, N d]: <Delta y_{s,i} Delta y_{t,j}>
        let covariance = flat
            .clone()
            .swap_dims(0, 1)
            .matmul(flat)
            .div_scalar(batch_size as f64);
        // K_{s,t} delta_ij laid out like the covariance: [N, 1, N, 1] * [1, d, 1, d].
        let identity = Tensor::<B, 2>::eye(d_y, &device).reshape([1, d_y, 1, d_y]);
        let target = (kernel.reshape([seq_length, 1, seq_length, 1]) * identity)
            .reshape([seq_length * d_y, seq_length * d_y]);
        let covariance_term = (covariance - target)
            .square()
            .sum()
            .div_scalar((seq_length * seq_length) as f64);
        mean_term + covariance_term
    } else {
        // [N, B, d]
        let per_position = centred.swap_dims(0, 1);
        // [N, d, d]
        let covariance = per_position
            .clone()
            .swap_dims(1, 2)
            .matmul(per_position)
            .div_scalar(batch_size as f64);
        let diagonal = (kernel * Tensor::<B, 2>::eye(seq_length, &device))
            .sum_dim(1)
            .reshape([seq_length, 1, 1]);
        let target = Tensor::<B, 2>::eye(d_y, &device).unsqueeze::<3>() * diagonal;
        let covariance_term = (covariance - target)
            .square()
            .sum()
            .div_scalar(seq_length as f64);
        mean_term + covariance_term
    }
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
    fn distribution_matching_on_hand_input() {
        // Batch of 2, N = 2 positions, d_y = 1. Sample 0: y = (1, 3); sample 1: y = (-1, 1).
        // mu = (0, 2); Delta y: sample 0 (1, 1), sample 1 (-1, -1).
        // Covariance <Delta y_s Delta y_t> = 1 for every (s, t).
        // Kernel [[1, 0.5], [0.5, 1]].
        // Cross positions: 1/2 (0 + 4) + 1/4 ((1-1)^2 + 2 (1-0.5)^2 + (1-1)^2) = 2 + 0.125.
        // Per position: 1/2 [(0 + (1-1)^2) + (4 + (1-1)^2)] = 2.
        let device = Default::default();
        let y = tensor(vec![1.0, 3.0, -1.0, 1.0], [2, 2, 1]);
        let kernel = Tensor::<TestBackend, 2>::from_data(
            TensorData::new(vec![1.0f32, 0.5, 0.5, 1.0], [2, 2]),
            &device,
        );
        let cross = distribution_matching(y.clone(), kernel.clone(), true).into_scalar();
        assert!((cross - 2.125).abs() < HAND_TOLERANCE, "{cross}");
        let local = distribution_matching(y, kernel, false).into_scalar();
        assert!((local - 2.0).abs() < HAND_TOLERANCE, "{local}");
    }

    #[test]
    fn distribution_matching_with_d_y_two_counts_off_diagonal_covariance() {
        // Batch of 2, N = 1, d_y = 2: y^(0) = (1, 1), y^(1) = (-1, -1): mu = 0, covariance [[1, 1], [1, 1]],
        // target I: off-diagonal errors 1 + 1 = 2, both forms (N = 1) give 2.
        let device = Default::default();
        let y = tensor(vec![1.0, 1.0, -1.0, -1.0], [2, 1, 2]);
        let kernel = Tensor::<TestBackend, 2>::ones([1, 1], &device);
        for cross in [true, false] {
            let value = distribution_matching(y.clone(), kernel.clone(), cross).into_scalar();
            assert!((value - 2.0).abs() < HAND_TOLERANCE, "{cross}: {value}");
        }
    }

    #[test]
    fn sum_normalisation_factors() {
        assert_eq!(Normalisation::Mean.continuity_factor(10), 1.0);
        assert_eq!(Normalisation::Sum.continuity_factor(10), 9.0);
        assert_eq!(Normalisation::Sum.orthogonality_factor(10, 4), 160.0);
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
