//! Linear-regression sequences (paper §4.1): per sequence a random `W` (`d_out x d_in`), `b_in`, `b_out`;
//! pairs `x_i = z_i + b_in`, `y_i = W x_i + b_out + noise * e_i` with every component standard normal.
//! The sequence interleaves `[x_1; 0], [0; y_1], [x_2; 0], ...` (width `d_in + d_out`); the model is
//! trained with an L2 loss to predict `y_i` at the position of `x_i`.

use serde::{Deserialize, Serialize};

use super::batch::{BatchSource, HostBatch, HostInput, HostTargets};
use super::{standard_normal, step_rng};
use crate::error::{CgtError, Result};

/// Parameters of the linear-regression generator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinearRegressionConfig {
    /// Input dimension `d_in`.
    pub d_in: usize,
    /// Output dimension `d_out`.
    pub d_out: usize,
    /// Number of `(x, y)` pairs per sequence.
    pub n_pairs: usize,
    /// Noise scale.
    pub noise: f64,
    /// Sequences per batch.
    pub batch_size: usize,
    /// Stream seed.
    pub seed: u64,
}

/// One sampled regression problem (kept for checks and ridge baselines).
#[derive(Clone, Debug, PartialEq)]
pub struct RegressionProblem {
    /// `W`, row-major `[d_out, d_in]`.
    pub weight: Vec<f64>,
    /// `b_out`, `[d_out]`.
    pub bias: Vec<f64>,
    /// Inputs `x_i`, `[n_pairs][d_in]`.
    pub inputs: Vec<Vec<f64>>,
    /// Outputs `y_i`, `[n_pairs][d_out]`.
    pub outputs: Vec<Vec<f64>>,
}

impl LinearRegressionConfig {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        if self.d_in == 0 || self.d_out == 0 || self.n_pairs == 0 || self.batch_size == 0 {
            return Err(CgtError::InvalidDataConfig(
                "d_in, d_out, n_pairs and batch_size must be positive".into(),
            ));
        }
        if self.noise < 0.0 {
            return Err(CgtError::InvalidDataConfig("noise must be >= 0".into()));
        }
        Ok(())
    }

    /// Width of every sequence element.
    pub fn width(&self) -> usize {
        self.d_in + self.d_out
    }

    /// Sequence length `2 n_pairs`.
    pub fn sequence_length(&self) -> usize {
        2 * self.n_pairs
    }

    /// Samples one problem.
    pub fn sample(&self, rng: &mut impl rand::Rng) -> RegressionProblem {
        let mut normal = |n: usize| (0..n).map(|_| standard_normal(rng)).collect::<Vec<f64>>();
        let weight = normal(self.d_out * self.d_in);
        let bias_in = normal(self.d_in);
        let bias = normal(self.d_out);
        let mut inputs = Vec::with_capacity(self.n_pairs);
        let mut outputs = Vec::with_capacity(self.n_pairs);
        for _ in 0..self.n_pairs {
            let x: Vec<f64> = normal(self.d_in)
                .iter()
                .zip(&bias_in)
                .map(|(z, b)| z + b)
                .collect();
            let noise = normal(self.d_out);
            let y: Vec<f64> = (0..self.d_out)
                .map(|o| {
                    let wx: f64 = (0..self.d_in)
                        .map(|i| weight[o * self.d_in + i] * x[i])
                        .sum();
                    wx + bias[o] + self.noise * noise[o]
                })
                .collect();
            inputs.push(x);
            outputs.push(y);
        }
        RegressionProblem {
            weight,
            bias,
            inputs,
            outputs,
        }
    }

    /// The batch for step `step` and its problems.
    pub fn annotated_batch(&self, step: u64) -> (HostBatch, Vec<RegressionProblem>) {
        let mut rng = step_rng(self.seed, step);
        let problems: Vec<RegressionProblem> = (0..self.batch_size)
            .map(|_| self.sample(&mut rng))
            .collect();
        let (length, width) = (self.sequence_length(), self.width());
        let mut values = vec![0.0f32; self.batch_size * length * width];
        let mut targets = vec![0.0f32; self.batch_size * length * self.d_out];
        let mut mask = vec![0.0f32; self.batch_size * length];
        for (b, problem) in problems.iter().enumerate() {
            for (pair, (x, y)) in problem.inputs.iter().zip(&problem.outputs).enumerate() {
                let x_row = b * length + 2 * pair;
                let y_row = x_row + 1;
                for i in 0..self.d_in {
                    values[x_row * width + i] = x[i] as f32;
                }
                for o in 0..self.d_out {
                    values[y_row * width + self.d_in + o] = y[o] as f32;
                    targets[x_row * self.d_out + o] = y[o] as f32;
                }
                mask[x_row] = 1.0;
            }
        }
        let batch = HostBatch {
            batch_size: self.batch_size,
            seq_length: length,
            input: HostInput::Vectors { values, dim: width },
            targets: HostTargets::Vectors {
                values: targets,
                dim: self.d_out,
            },
            loss_mask: mask,
        };
        (batch, problems)
    }
}

impl BatchSource for LinearRegressionConfig {
    fn batch(&self, step: u64) -> HostBatch {
        self.annotated_batch(step).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_targets_follow_the_problem() {
        let config = LinearRegressionConfig {
            d_in: 3,
            d_out: 1,
            n_pairs: 4,
            noise: 0.0,
            batch_size: 2,
            seed: 1,
        };
        let (batch, problems) = config.annotated_batch(0);
        batch.validate().unwrap();
        let HostInput::Vectors { values, dim } = &batch.input else {
            panic!("vector input expected")
        };
        let HostTargets::Vectors {
            values: targets, ..
        } = &batch.targets
        else {
            panic!("vector targets expected")
        };
        assert_eq!(*dim, 4);
        let problem = &problems[1];
        for pair in 0..4 {
            let x_row = 8 + 2 * pair;
            // x position: [x; 0]; y position: [0; y]; target at the x position is y = W x + b (no noise).
            assert_eq!(values[x_row * 4 + 3], 0.0);
            assert_eq!(
                &values[(x_row + 1) * 4..(x_row + 1) * 4 + 3],
                &[0.0, 0.0, 0.0]
            );
            let x = &problem.inputs[pair];
            let y: f64 = (0..3).map(|i| problem.weight[i] * x[i]).sum::<f64>() + problem.bias[0];
            assert!((targets[x_row] as f64 - y).abs() < 1e-5);
            assert_eq!(values[(x_row + 1) * 4 + 3], targets[x_row]);
            assert_eq!(batch.loss_mask[x_row], 1.0);
            assert_eq!(batch.loss_mask[x_row + 1], 0.0);
        }
    }

    #[test]
    fn bad_parameters_are_errors() {
        let config = LinearRegressionConfig {
            d_in: 0,
            d_out: 1,
            n_pairs: 4,
            noise: 0.1,
            batch_size: 2,
            seed: 1,
        };
        assert!(config.validate().is_err());
    }
}
