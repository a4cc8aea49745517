//! Task losses: masked next-token cross-entropy and masked L2 regression loss.

use burn::tensor::activation::log_softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use crate::data::{HostBatch, HostTargets};

/// Targets of a batch as tensors.
#[derive(Clone, Debug)]
pub enum TargetTensor<B: Backend> {
    /// Next-token ids `[batch_size, seq_length]`.
    Tokens(Tensor<B, 2, Int>),
    /// Regression targets `[batch_size, seq_length, d_out]`.
    Vectors(Tensor<B, 3>),
}

impl<B: Backend> TargetTensor<B> {
    /// The targets of a host batch.
    pub fn from_batch(batch: &HostBatch, device: &B::Device) -> Self {
        let (b, t) = (batch.batch_size, batch.seq_length);
        match &batch.targets {
            HostTargets::Tokens(ids) => Self::Tokens(Tensor::from_data(
                TensorData::new(ids.clone(), [b, t]),
                device,
            )),
            HostTargets::Vectors { values, dim } => Self::Vectors(Tensor::from_data(
                TensorData::new(values.clone(), [b, t, *dim]),
                device,
            )),
        }
    }
}

/// Mean of `-log p(target)` over the positions where `mask` is 1.
///
/// # Shapes
/// - `logits`: `[batch_size, seq_length, vocab]`
/// - `targets`: `[batch_size, seq_length]`
/// - `mask`: `[batch_size, seq_length]` (0/1)
/// - output: `[1]`
pub fn cross_entropy<B: Backend>(
    logits: Tensor<B, 3>,
    targets: Tensor<B, 2, Int>,
    mask: Tensor<B, 2>,
) -> Tensor<B, 1> {
    let [batch_size, seq_length, _] = logits.dims();
    let log_probs = log_softmax(logits, 2);
    let picked = log_probs
        .gather(2, targets.unsqueeze_dim::<3>(2))
        .reshape([batch_size, seq_length]);
    let count = mask.clone().sum().clamp_min(1.0);
    (picked * mask).sum().neg() / count
}

/// Mean over masked positions of `||prediction - target||^2`.
///
/// # Shapes
/// - `predictions`, `targets`: `[batch_size, seq_length, d_out]`
/// - `mask`: `[batch_size, seq_length]`
/// - output: `[1]`
pub fn l2_loss<B: Backend>(
    predictions: Tensor<B, 3>,
    targets: Tensor<B, 3>,
    mask: Tensor<B, 2>,
) -> Tensor<B, 1> {
    let [batch_size, seq_length, _] = predictions.dims();
    let squared = (predictions - targets)
        .square()
        .sum_dim(2)
        .reshape([batch_size, seq_length]);
    let count = mask.clone().sum().clamp_min(1.0);
    (squared * mask).sum() / count
}

/// Cross-entropy or L2, whichever the targets call for.
///
/// # Shapes
/// - `outputs`: `[batch_size, seq_length, output_size]`
/// - `mask`: `[batch_size, seq_length]`
/// - output: `[1]`
pub fn task_loss<B: Backend>(
    outputs: Tensor<B, 3>,
    targets: &TargetTensor<B>,
    mask: Tensor<B, 2>,
) -> Tensor<B, 1> {
    match targets {
        TargetTensor::Tokens(ids) => cross_entropy(outputs, ids.clone(), mask),
        TargetTensor::Vectors(values) => l2_loss(outputs, values.clone(), mask),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::TestBackend;

    /// Hand-computed values with f32 logs/exps.
    const HAND_TOLERANCE: f32 = 1e-5;

    #[test]
    fn cross_entropy_on_hand_input() {
        // Two positions, vocab 2. Position 0: logits (0, 0), target 1 -> ln 2.
        // Position 1: logits (ln 3, 0), target 0 -> -ln(3/4); masked out in the second call.
        let device = Default::default();
        let logits = Tensor::<TestBackend, 3>::from_data(
            TensorData::new(vec![0.0f32, 0.0, 3f32.ln(), 0.0], [1, 2, 2]),
            &device,
        );
        let targets = Tensor::<TestBackend, 2, Int>::from_data(
            TensorData::new(vec![1i64, 0], [1, 2]),
            &device,
        );
        let both = Tensor::<TestBackend, 2>::ones([1, 2], &device);
        let value = cross_entropy(logits.clone(), targets.clone(), both).into_scalar();
        let expected = (2f32.ln() - (0.75f32).ln()) / 2.0;
        assert!((value - expected).abs() < HAND_TOLERANCE);
        let first = Tensor::<TestBackend, 2>::from_data(
            TensorData::new(vec![1.0f32, 0.0], [1, 2]),
            &device,
        );
        let value = cross_entropy(logits, targets, first).into_scalar();
        assert!((value - 2f32.ln()).abs() < HAND_TOLERANCE);
    }

    #[test]
    fn l2_on_hand_input() {
        // Errors (1, 2) and (3, 0) on two positions, only the first counts: 1 + 4 = 5.
        let device = Default::default();
        let predictions = Tensor::<TestBackend, 3>::from_data(
            TensorData::new(vec![1.0f32, 2.0, 3.0, 0.0], [1, 2, 2]),
            &device,
        );
        let targets = Tensor::<TestBackend, 3>::zeros([1, 2, 2], &device);
        let mask = Tensor::<TestBackend, 2>::from_data(
            TensorData::new(vec![1.0f32, 0.0], [1, 2]),
            &device,
        );
        assert!((l2_loss(predictions, targets, mask).into_scalar() - 5.0).abs() < HAND_TOLERANCE);
    }
}
