//! Root-mean-square LayerNorm (Zhang & Sennrich 2019), as in HF `LlamaRMSNorm`.

use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, Tensor};

/// `y = x / sqrt(mean(x²) + ε) · weight`, over the last dimension.
///
/// Computed in the input's float type (HF upcasts to float32; for float32 and float64 inputs this is the
/// same or more precise). Unlike burn's `RmsNorm` this does not force float32.
#[derive(Module, Debug)]
pub struct RmsNorm<B: Backend> {
    /// Gain, `[d_model]`.
    pub weight: Param<Tensor<B, 1>>,
    /// Epsilon inside the square root.
    pub eps: f64,
}

impl<B: Backend> RmsNorm<B> {
    /// Builds the norm from its gain.
    pub fn new(weight: Tensor<B, 1>, eps: f64) -> Self {
        Self {
            weight: Param::from_tensor(weight),
            eps,
        }
    }

    /// Normalises over the last dimension.
    ///
    /// # Shapes
    /// - x: `[batch_size, seq_length, d_model]`
    /// - output: `[batch_size, seq_length, d_model]`
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let mean_square = x.clone().square().mean_dim(2); // [batch_size, seq_length, 1]
        let inv_rms = (mean_square + self.eps).sqrt().recip();
        x * inv_rms * self.weight.val().unsqueeze::<3>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Distribution, TensorData, Tolerance};

    type TestBackend = burn::backend::Flex;

    #[test]
    fn matches_plain_math_on_random_input() {
        let device = Default::default();
        let x =
            Tensor::<TestBackend, 3>::random([2, 3, 8], Distribution::Normal(0.0, 2.0), &device);
        let w = Tensor::<TestBackend, 1>::random([8], Distribution::Uniform(0.5, 1.5), &device);
        let eps = 1e-5;
        let y = RmsNorm::new(w.clone(), eps).forward(x.clone());

        let xs = x.to_data().to_vec::<f32>().unwrap();
        let ws = w.to_data().to_vec::<f32>().unwrap();
        let mut expected = vec![0f32; xs.len()];
        for row in 0..6 {
            let r = &xs[row * 8..row * 8 + 8];
            let ms = r.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / 8.0;
            let scale = 1.0 / (ms + eps).sqrt();
            for j in 0..8 {
                expected[row * 8 + j] = (r[j] as f64 * scale * ws[j] as f64) as f32;
            }
        }
        // f32 rounding of a mean of 8 squares and a rsqrt: a few ulps.
        const RMS_NORM_TOL: f32 = 1e-5;
        y.to_data().assert_approx_eq::<f32>(
            &TensorData::new(expected, [2, 3, 8]),
            Tolerance::absolute(RMS_NORM_TOL),
        );
    }
}
