//! MLP activations of the supported auxiliary models.

use burn::tensor::{activation::sigmoid, backend::Backend, Tensor};

/// `sqrt(2 / pi)`, the constant of the tanh approximation of GELU.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// The MLP nonlinearity of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// GPT-2's `gelu_new`: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    GeluNew,
    /// OPT's `relu`.
    Relu,
}

impl Activation {
    /// Applies the activation elementwise.
    ///
    /// # Shapes
    ///
    /// - input: any
    /// - output: same as input
    pub fn forward<B: Backend, const D: usize>(self, input: Tensor<B, D>) -> Tensor<B, D> {
        match self {
            Activation::GeluNew => gelu_new(input),
            Activation::Relu => burn::tensor::activation::relu(input),
        }
    }
}

/// GPT-2's `gelu_new` (tanh approximation of GELU).
///
/// # Shapes
///
/// - input: any
/// - output: same as input
pub fn gelu_new<B: Backend, const D: usize>(input: Tensor<B, D>) -> Tensor<B, D> {
    // `0.5 (1 + tanh z) = sigmoid(2 z)`: one sigmoid instead of tanh and two more passes (flex's
    // scalar `tanhf` costs about 4 sigmoids); `x³` as `x·x·x` (`powi_scalar` goes through `powf`).
    let cube = input.clone() * input.clone() * input.clone();
    let inner = (input.clone() + cube * 0.044715) * (2.0 * SQRT_2_OVER_PI);
    input * sigmoid(inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    type TestBackend = burn::backend::Flex;

    /// f32 evaluation of tanh and a cubic; a few ulps of values of order 1.
    const ACTIVATION_TOL: f32 = 1e-6;

    #[test]
    fn gelu_new_matches_scalar_formula() {
        let xs = [-4.0f32, -1.5, -0.3, 0.0, 0.2, 1.0, 3.7];
        let device = Default::default();
        let input = Tensor::<TestBackend, 1>::from_data(TensorData::from(xs), &device);
        let got = gelu_new(input).into_data().to_vec::<f32>().unwrap();
        for (x, y) in xs.iter().zip(got) {
            let x = *x as f64;
            let want = 0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044715 * x.powi(3))).tanh());
            assert!(
                (y as f64 - want).abs() < ACTIVATION_TOL as f64,
                "x {x}: {y} vs {want}"
            );
        }
        let relu = Activation::Relu
            .forward(Tensor::<TestBackend, 1>::from_data(
                TensorData::from(xs),
                &device,
            ))
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let want: Vec<f32> = xs.iter().map(|x| x.max(0.0)).collect();
        assert_eq!(relu, want);
    }
}
