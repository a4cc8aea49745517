//! Evaluation metrics: answer accuracy (dynamic and specialised `y`), representation variation (paper
//! eq. 4), linear-fit error of the task parameters from `y`, the `y . y` dot-product map, and the
//! regression error of frozen-`y` models, and the cross-entropy by position of text continuations.

pub mod icl;
pub mod linear_fit;
pub mod regression;
pub mod text;
pub mod variation;

pub use icl::{evaluate_icl, IclEvaluation};
pub use linear_fit::linear_fit_error;
pub use regression::{
    evaluate_regression, evaluate_regression_references, fit_predict, ReferenceErrors,
    RegressionEvaluation, RegressionReferences,
};
pub use text::{evaluate_position_loss, PositionLoss};
pub use variation::representation_variation;

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// Freezes `y` at position `at[b] ` of each sample.
///
/// # Shapes
/// - `context`: `[batch_size, seq_length, d_y]`
/// - output: `[batch_size, 1, d_y]`
pub fn frozen_context<B: Backend>(context: Tensor<B, 3>, at: &[usize]) -> Tensor<B, 3> {
    let [batch_size, _, d_y] = context.dims();
    let index: Vec<i64> = at
        .iter()
        .flat_map(|&p| std::iter::repeat_n(p as i64, d_y))
        .collect();
    let index = Tensor::<B, 3, Int>::from_data(
        TensorData::new(index, [batch_size, 1, d_y]),
        &context.device(),
    );
    context.gather(1, index)
}

/// Host copy of a float tensor.
pub fn host<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> Vec<f32> {
    tensor
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .unwrap_or_default()
}
