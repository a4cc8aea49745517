//! Linear fit of task parameters from `y` (paper §4.2, Table 1 "linear fit error").

use crate::error::{CgtError, Result};
use crate::vae::spd_inverse;

/// Ridge strength of the fit, small enough not to bias well-determined fits.
pub const RIDGE: f64 = 1e-6;

/// Fits `target ~ W [feature; 1]` by ridge least squares on the first half of the samples and returns the
/// mean absolute error on the second half, averaged over target components.
///
/// `features` is `[n, d]`, `targets` is `[n, k]`, both row-major.
pub fn linear_fit_error(features: &[f64], d: usize, targets: &[f64], k: usize) -> Result<f64> {
    let n = features.len() / d.max(1);
    if d == 0 || k == 0 || features.len() != n * d || targets.len() != n * k || n < 4 {
        return Err(CgtError::Shape(format!(
            "linear fit needs >= 4 samples with matching features ({}) and targets ({})",
            features.len(),
            targets.len()
        )));
    }
    let width = d + 1;
    let augmented = |i: usize, j: usize| if j < d { features[i * d + j] } else { 1.0 };
    let train = n / 2;
    let mut gram = vec![0.0; width * width];
    let mut moment = vec![0.0; width * k];
    for i in 0..train {
        for a in 0..width {
            for b in 0..width {
                gram[a * width + b] += augmented(i, a) * augmented(i, b);
            }
            for c in 0..k {
                moment[a * k + c] += augmented(i, a) * targets[i * k + c];
            }
        }
    }
    let trace: f64 = (0..width).map(|a| gram[a * width + a]).sum::<f64>() / width as f64;
    for a in 0..width {
        gram[a * width + a] += RIDGE * trace.max(1.0);
    }
    let inverse = spd_inverse(&gram, width)?;
    let mut error = 0.0;
    for i in train..n {
        for c in 0..k {
            let prediction: f64 = (0..width)
                .map(|a| {
                    let coefficient: f64 = (0..width)
                        .map(|b| inverse[a * width + b] * moment[b * k + c])
                        .sum();
                    coefficient * augmented(i, a)
                })
                .sum();
            error += (prediction - targets[i * k + c]).abs();
        }
    }
    Ok(error / ((n - train) * k) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exactly linear target is recovered up to the tiny ridge bias.
    const FIT_TOLERANCE: f64 = 1e-4;

    #[test]
    fn exact_linear_relation_has_no_error() {
        // target = 2 f0 - f1 + 0.5 on 10 points.
        let features: Vec<f64> = (0..20)
            .map(|i| ((i * 7) % 5) as f64 - 2.0 + i as f64 * 0.1)
            .collect();
        let targets: Vec<f64> = (0..10)
            .map(|i| 2.0 * features[2 * i] - features[2 * i + 1] + 0.5)
            .collect();
        assert!(linear_fit_error(&features, 2, &targets, 1).unwrap() < FIT_TOLERANCE);
        // Noise-free but unrelated targets cannot be fit exactly.
        let unrelated: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert!(linear_fit_error(&features, 2, &unrelated, 1).unwrap() > 0.1);
        assert!(linear_fit_error(&features, 2, &targets[..3], 1).is_err());
    }
}
