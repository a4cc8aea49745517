//! LayerNorm with explicit gain and bias, written out so it runs in any float dtype and under autodiff.

use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, Tensor};

/// LayerNorm over the last dimension: `y = (x - mean) / sqrt(var + epsilon) * gamma + beta`
/// (biased variance, epsilon inside the square root, as PyTorch `nn.LayerNorm`).
///
/// A LayerNorm without elementwise affine (OPT's `layer_norm_elementwise_affine = false`) is stored with
/// `gamma = 1`, `beta = 0`.
#[derive(Module, Debug)]
pub struct LayerNorm<B: Backend> {
    /// Gain, HF `weight`. Shape `[d_model]`.
    pub gamma: Param<Tensor<B, 1>>,
    /// Bias, HF `bias`. Shape `[d_model]`.
    pub beta: Param<Tensor<B, 1>>,
    /// Added to the variance before the square root.
    pub epsilon: f64,
}

impl<B: Backend> LayerNorm<B> {
    /// Builds a LayerNorm from its gain and bias.
    pub fn new(gamma: Tensor<B, 1>, beta: Tensor<B, 1>, epsilon: f64) -> Self {
        Self {
            gamma: Param::from_tensor(gamma),
            beta: Param::from_tensor(beta),
            epsilon,
        }
    }

    /// Normalises over the last dimension.
    ///
    /// # Shapes
    ///
    /// - input: `[..., d_model]`
    /// - output: `[..., d_model]`
    pub fn forward<const D: usize>(&self, input: Tensor<B, D>) -> Tensor<B, D> {
        let (var, mean) = input.clone().var_mean_bias(D - 1);
        let normed = (input - mean) / (var + self.epsilon).sqrt();
        normed * self.gamma.val().unsqueeze::<D>() + self.beta.val().unsqueeze::<D>()
    }
}
