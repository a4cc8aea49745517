//! VAE variant (paper appendix A.1): KL divergence of the mean-field posterior `N(mu_s, sigma_s^2)` over
//! `y^l` to a Gaussian-process prior with kernel `K = nu I + (1 - nu) K^RBF`,
//! `K^RBF_{s,t} = exp(-|s - t|^2 / (2 lambda^2))`.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use crate::error::{CgtError, Result};

/// The prior kernel matrix `K` (row-major `[n, n]`, f64).
pub fn prior_kernel(seq_length: usize, length_scale: f64, identity_mix: f64) -> Vec<f64> {
    let mut kernel = vec![0.0; seq_length * seq_length];
    for s in 0..seq_length {
        for t in 0..seq_length {
            let distance = s as f64 - t as f64;
            let rbf = (-distance * distance / (2.0 * length_scale * length_scale)).exp();
            let identity = if s == t { 1.0 } else { 0.0 };
            kernel[s * seq_length + t] = identity_mix * identity + (1.0 - identity_mix) * rbf;
        }
    }
    kernel
}

/// Inverse of a symmetric positive-definite matrix by Cholesky factorisation (f64).
pub fn spd_inverse(matrix: &[f64], n: usize) -> Result<Vec<f64>> {
    if matrix.len() != n * n {
        return Err(CgtError::Shape(format!(
            "matrix has {} entries, expected {n}x{n}",
            matrix.len()
        )));
    }
    // matrix = L L^T.
    let mut lower = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut sum = matrix[i * n + j];
            for k in 0..j {
                sum -= lower[i * n + k] * lower[j * n + k];
            }
            if i == j {
                if sum <= 0.0 {
                    return Err(CgtError::Numerical(
                        "matrix is not positive definite".into(),
                    ));
                }
                lower[i * n + i] = sum.sqrt();
            } else {
                lower[i * n + j] = sum / lower[j * n + j];
            }
        }
    }
    // Solve L L^T X = I column by column.
    let mut inverse = vec![0.0; n * n];
    for column in 0..n {
        let mut z = vec![0.0; n];
        for i in 0..n {
            let mut sum = if i == column { 1.0 } else { 0.0 };
            for k in 0..i {
                sum -= lower[i * n + k] * z[k];
            }
            z[i] = sum / lower[i * n + i];
        }
        for i in (0..n).rev() {
            let mut sum = z[i];
            for k in i + 1..n {
                sum -= lower[k * n + i] * inverse[k * n + column];
            }
            inverse[i * n + column] = sum / lower[i * n + i];
        }
    }
    Ok(inverse)
}

/// The inverse prior kernel as an f32 tensor `[n, n]`.
pub fn prior_precision<B: Backend>(
    seq_length: usize,
    length_scale: f64,
    identity_mix: f64,
    device: &B::Device,
) -> Result<Tensor<B, 2>> {
    if length_scale <= 0.0 || !(0.0..=1.0).contains(&identity_mix) {
        return Err(CgtError::InvalidTrainingConfig(format!(
            "GP prior needs length_scale > 0 and identity_mix in [0, 1], got {length_scale}, {identity_mix}"
        )));
    }
    let kernel = prior_kernel(seq_length, length_scale, identity_mix);
    let inverse = spd_inverse(&kernel, seq_length)?;
    let values: Vec<f32> = inverse.iter().map(|&v| v as f32).collect();
    Ok(Tensor::from_data(
        TensorData::new(values, [seq_length, seq_length]),
        device,
    ))
}

/// `KL(q || p_0)` up to constants, per paper eq. (7) without the reconstruction term:
/// `1/2 [ -sum log sigma^2 + sum_i mu_i^T K^{-1} mu_i + sum diag(K^{-1}) sigma^2 ]`,
/// averaged over the batch and the positions (multiply by `beta` outside).
///
/// # Shapes
/// - `mean`, `log_var`: `[batch_size, seq_length, d_y]`
/// - `precision`: `[seq_length, seq_length]` (from [`prior_precision`])
/// - output: `[1]`
pub fn gp_kl<B: Backend>(
    mean: Tensor<B, 3>,
    log_var: Tensor<B, 3>,
    precision: Tensor<B, 2>,
) -> Tensor<B, 1> {
    let [batch_size, seq_length, d_y] = mean.dims();
    let device = mean.device();
    // sum_{s,t} mu_{s,i} P_{s,t} mu_{t,i} = sum (P mu) * mu.
    let projected = precision
        .clone()
        .unsqueeze::<3>()
        .expand([batch_size, seq_length, seq_length])
        .matmul(mean.clone());
    let quadratic = (projected * mean).sum();
    let diagonal = (precision * Tensor::<B, 2>::eye(seq_length, &device))
        .sum_dim(1)
        .reshape([1, seq_length, 1])
        .expand([batch_size, seq_length, d_y]);
    let trace = (diagonal * log_var.clone().exp()).sum();
    let entropy = log_var.sum();
    (quadratic + trace - entropy).div_scalar(2.0 * (batch_size * seq_length) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::TestBackend;

    /// f64 Cholesky on a well-conditioned 6x6 matrix: error ~1e-12.
    const INVERSE_TOLERANCE: f64 = 1e-9;
    /// Hand-computed KL on exact inputs in f32.
    const KL_TOLERANCE: f32 = 1e-5;

    #[test]
    fn inverse_times_kernel_is_identity() {
        let n = 6;
        let kernel = prior_kernel(n, 2.0, 0.1);
        let inverse = spd_inverse(&kernel, n).unwrap();
        for i in 0..n {
            for j in 0..n {
                let product: f64 = (0..n).map(|k| kernel[i * n + k] * inverse[k * n + j]).sum();
                let expected = if i == j { 1.0 } else { 0.0 };
                assert!((product - expected).abs() < INVERSE_TOLERANCE);
            }
        }
        assert!(spd_inverse(&[1.0, 2.0, 2.0, 1.0], 2).is_err());
    }

    #[test]
    fn kl_with_identity_prior_matches_hand_value() {
        // identity_mix = 1: K = I. One sample, two positions, d_y = 1, mu = (1, 2), log sigma^2 = (0, ln 2):
        // 1/2 [-(0 + ln 2) + (1 + 4) + (1 + 2)] / 2 = (8 - ln 2) / 4.
        let device = Default::default();
        let mean = Tensor::<TestBackend, 3>::from_data(
            TensorData::new(vec![1.0f32, 2.0], [1, 2, 1]),
            &device,
        );
        let log_var = Tensor::<TestBackend, 3>::from_data(
            TensorData::new(vec![0.0f32, 2f32.ln()], [1, 2, 1]),
            &device,
        );
        let precision = prior_precision::<TestBackend>(2, 1.0, 1.0, &device).unwrap();
        let value = gp_kl(mean, log_var, precision).into_scalar();
        let expected = (8.0 - 2f32.ln()) / 4.0;
        assert!(
            (value - expected).abs() < KL_TOLERANCE,
            "{value} vs {expected}"
        );
    }

    #[test]
    fn bad_prior_parameters_are_errors() {
        let device = Default::default();
        assert!(prior_precision::<TestBackend>(3, 0.0, 0.1, &device).is_err());
        assert!(prior_precision::<TestBackend>(3, 1.0, 1.5, &device).is_err());
    }
}
