//! Evaluation on linear regression (paper §4.3): error with dynamic `y` and with `y` frozen after `k` pairs,
//! and the reference predictors a reader needs to judge those errors: least squares fitted in context,
//! the Bayes-optimal ridge, the mean of the shown outputs and zero.

use burn::tensor::backend::Backend;
use serde::{Deserialize, Serialize};

use super::{frozen_context, host, linear_fit_error, representation_variation};
use crate::data::{HostTargets, LinearRegressionConfig, RegressionProblem};
use crate::error::{CgtError, Result};
use crate::model::CgtModel;
use crate::vae::spd_inverse;

/// Regression errors (mean squared error over output components).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RegressionEvaluation {
    /// Dynamic-`y` error at every pair index (pair `i` is predicted after `i` shown pairs).
    pub dynamic_by_pair: Vec<f64>,
    /// `(k, dynamic error on pairs >= k, frozen-after-k error on pairs >= k)`.
    pub specialised: Vec<(usize, f64, f64)>,
    /// Representation variation (paper eq. 4) with `E1` = the positions of the first half of the pairs and
    /// `E2` = the rest, averaged over sequences (CGT only).
    #[serde(default)]
    pub representation_variation: Option<f64>,
    /// Mean absolute error of a linear fit of the task parameters `(U, b)` (standard normal, so already
    /// normalised) from `y_s` at `s` in `E2`, fitted on the first half of the evaluation sequences and
    /// scored on the second (CGT only).
    #[serde(default)]
    pub linear_fit_error: Option<f64>,
}

/// Evaluates on `n_batches` batches of `data`; `freeze_after` lists the prompt sizes `k`.
pub fn evaluate_regression<B: Backend>(
    model: &CgtModel<B>,
    data: &LinearRegressionConfig,
    n_batches: usize,
    freeze_after: &[usize],
    device: &B::Device,
) -> Result<RegressionEvaluation> {
    check_settings(data, freeze_after)?;
    let n_pairs = data.n_pairs;
    let mut dynamic = vec![0.0; n_pairs];
    let mut frozen_sums = vec![0.0; freeze_after.len()];
    let mut count = 0usize;
    let (mut variation_sum, mut variation_count) = (0.0, 0usize);
    let (mut features, mut parameters) = (Vec::new(), Vec::new());
    let mut d_y = 0;
    let squared_error =
        |outputs: &[f32], targets: &[f32], b: usize, pair: usize, seq_length: usize| {
            let row = b * seq_length + 2 * pair;
            (0..data.d_out)
                .map(|o| (outputs[row * data.d_out + o] - targets[row * data.d_out + o]) as f64)
                .map(|e| e * e)
                .sum::<f64>()
                / data.d_out as f64
        };
    for step in 0..n_batches {
        let (batch, problems) = data.annotated_batch(step as u64);
        let HostTargets::Vectors {
            values: targets, ..
        } = &batch.targets
        else {
            return Err(CgtError::Shape(
                "regression batch without vector targets".into(),
            ));
        };
        let seq_length = batch.seq_length;
        let input = batch.input_tensor::<B>(device);
        let output = model.forward(&input)?;
        let outputs = host(output.logits);
        for b in 0..batch.batch_size {
            for pair in 0..n_pairs {
                dynamic[pair] += squared_error(&outputs, targets, b, pair, seq_length);
            }
        }
        count += batch.batch_size;
        let Some(context) = output.context else {
            continue;
        };
        d_y = context.mean.dims()[2];
        let y = host(context.mean.clone());
        let half = 2 * (n_pairs / 2);
        for (b, problem) in problems.iter().enumerate() {
            let rows = &y[b * seq_length * d_y..(b + 1) * seq_length * d_y];
            variation_sum += representation_variation(rows, d_y, 0..half, half..seq_length);
            variation_count += 1;
            for s in half..seq_length {
                features.extend(rows[s * d_y..(s + 1) * d_y].iter().map(|&v| v as f64));
                parameters.extend(problem.weight.iter().chain(&problem.bias));
            }
        }
        for (slot, &k) in freeze_after.iter().enumerate() {
            // After k pairs the last shown token is y_k at position 2k - 1.
            let at = vec![2 * k - 1; batch.batch_size];
            let starts = vec![2 * k; batch.batch_size];
            let frozen = frozen_context(context.mean.clone(), &at);
            let outputs = host(model.forward_x_path(&input, Some(frozen), Some(&starts))?);
            for b in 0..batch.batch_size {
                for pair in k..n_pairs {
                    frozen_sums[slot] += squared_error(&outputs, targets, b, pair, seq_length)
                        / (n_pairs - k) as f64;
                }
            }
        }
    }
    let dynamic_by_pair: Vec<f64> = dynamic.iter().map(|e| e / count.max(1) as f64).collect();
    let specialised = if model.is_guided() {
        freeze_after
            .iter()
            .zip(&frozen_sums)
            .map(|(&k, sum)| {
                let tail = dynamic_by_pair[k..].iter().sum::<f64>() / (n_pairs - k) as f64;
                (k, tail, sum / count.max(1) as f64)
            })
            .collect()
    } else {
        Vec::new()
    };
    let guided = model.is_guided() && variation_count > 0;
    let n_parameters = data.d_out * (data.d_in + 1);
    Ok(RegressionEvaluation {
        dynamic_by_pair,
        specialised,
        representation_variation: guided.then(|| variation_sum / variation_count as f64),
        linear_fit_error: if guided {
            linear_fit_error(&features, d_y, &parameters, n_parameters).ok()
        } else {
            None
        },
    })
}

/// Relative ridge added to the least-squares normal equations for numerical safety only (far below any
/// effect on a well-posed fit): the fit is the minimum-norm least-squares solution up to this.
const LEAST_SQUARES_JITTER: f64 = 1e-10;

/// Predicts the output at `query` from the shown pairs `(inputs[i], outputs[i])` of one sequence with the
/// affine map `y = W x + b` fitted by ridge regression of strength `lambda` on the augmented inputs
/// `[x; 1]`; `lambda = 0` is ordinary least squares (the minimum-norm solution while fewer pairs than
/// unknowns are shown). No shown pairs predict zeros.
///
/// With `W` and `b` standard normal (as [`LinearRegressionConfig`] draws them) and Gaussian noise of scale
/// `noise`, `lambda = noise^2` is the posterior mean, i.e. the Bayes-optimal predictor.
pub fn fit_predict(
    inputs: &[Vec<f64>],
    outputs: &[Vec<f64>],
    query: &[f64],
    d_out: usize,
    lambda: f64,
) -> Result<Vec<f64>> {
    let n = inputs.len();
    if outputs.len() != n || lambda < 0.0 {
        return Err(CgtError::Shape(format!(
            "{n} inputs but {} outputs (lambda {lambda})",
            outputs.len()
        )));
    }
    if n == 0 {
        return Ok(vec![0.0; d_out]);
    }
    let p = query.len() + 1;
    let augmented = |x: &[f64], j: usize| if j + 1 < p { x[j] } else { 1.0 };
    let dot = |a: &[f64], b: &[f64]| {
        (0..p)
            .map(|j| augmented(a, j) * augmented(b, j))
            .sum::<f64>()
    };
    if inputs.iter().any(|x| x.len() + 1 != p) || outputs.iter().any(|y| y.len() != d_out) {
        return Err(CgtError::Shape(
            "inputs, outputs and query disagree in width".into(),
        ));
    }
    let mut prediction = vec![0.0; d_out];
    if n < p {
        // Dual form: y_q = k_q^T (A A^T + lambda I)^{-1} Y, an n x n system.
        let mut gram = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                gram[i * n + j] = dot(&inputs[i], &inputs[j]);
            }
        }
        let trace = (0..n).map(|i| gram[i * n + i]).sum::<f64>() / n as f64;
        for i in 0..n {
            gram[i * n + i] += lambda.max(LEAST_SQUARES_JITTER * trace);
        }
        let inverse = spd_inverse(&gram, n)?;
        let kernel: Vec<f64> = inputs.iter().map(|x| dot(query, x)).collect();
        for i in 0..n {
            let weight: f64 = (0..n).map(|j| kernel[j] * inverse[j * n + i]).sum();
            for o in 0..d_out {
                prediction[o] += weight * outputs[i][o];
            }
        }
    } else {
        // Primal form: w = (A^T A + lambda I)^{-1} A^T Y, a p x p system.
        let mut gram = vec![0.0; p * p];
        let mut moment = vec![0.0; p * d_out];
        for (x, y) in inputs.iter().zip(outputs) {
            for a in 0..p {
                for b in 0..p {
                    gram[a * p + b] += augmented(x, a) * augmented(x, b);
                }
                for o in 0..d_out {
                    moment[a * d_out + o] += augmented(x, a) * y[o];
                }
            }
        }
        let trace = (0..p).map(|a| gram[a * p + a]).sum::<f64>() / p as f64;
        for a in 0..p {
            gram[a * p + a] += lambda.max(LEAST_SQUARES_JITTER * trace);
        }
        let inverse = spd_inverse(&gram, p)?;
        for o in 0..d_out {
            for a in 0..p {
                let coefficient: f64 = (0..p)
                    .map(|b| inverse[a * p + b] * moment[b * d_out + o])
                    .sum();
                prediction[o] += coefficient * augmented(query, a);
            }
        }
    }
    Ok(prediction)
}

/// Mean squared errors (averaged over output components) of predictors that see only the shown pairs of
/// the same sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReferenceErrors {
    /// Ordinary least squares fitted on the shown pairs ([`fit_predict`] with `lambda = 0`).
    pub least_squares: f64,
    /// Ridge with `lambda = noise^2`: the Bayes-optimal predictor for the generator's priors.
    pub bayes_ridge: f64,
    /// The mean of the shown outputs (zero before any).
    pub mean: f64,
    /// Always predicting zero.
    pub zero: f64,
}

impl ReferenceErrors {
    fn add(&mut self, other: &Self, scale: f64) {
        self.least_squares += scale * other.least_squares;
        self.bayes_ridge += scale * other.bayes_ridge;
        self.mean += scale * other.mean;
        self.zero += scale * other.zero;
    }

    /// The mean of `errors` (zeros when empty).
    pub fn average(errors: &[Self]) -> Self {
        let mut total = Self::default();
        for e in errors {
            total.add(e, 1.0 / errors.len() as f64);
        }
        total
    }
}

/// The reference predictors on the evaluation data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RegressionReferences {
    /// At every pair index `i`, fitted on the `i` preceding pairs (the counterpart of dynamic `y`).
    pub by_pair: Vec<ReferenceErrors>,
    /// `(k, errors on pairs >= k when fitted on the first k pairs only)` (the counterpart of `y` frozen
    /// after `k` pairs).
    pub frozen: Vec<(usize, ReferenceErrors)>,
}

/// The errors of the reference predictors at `query` given the shown pairs of `problem`.
fn reference_errors(
    problem: &RegressionProblem,
    shown: usize,
    query: usize,
    noise: f64,
) -> Result<ReferenceErrors> {
    let inputs = &problem.inputs[..shown];
    let outputs = &problem.outputs[..shown];
    let d_out = problem.bias.len();
    let target = &problem.outputs[query];
    let x = &problem.inputs[query];
    let error = |prediction: &[f64]| {
        prediction
            .iter()
            .zip(target)
            .map(|(p, t)| (p - t) * (p - t))
            .sum::<f64>()
            / d_out as f64
    };
    let mut mean = vec![0.0; d_out];
    for y in outputs {
        for o in 0..d_out {
            mean[o] += y[o] / shown as f64;
        }
    }
    Ok(ReferenceErrors {
        least_squares: error(&fit_predict(inputs, outputs, x, d_out, 0.0)?),
        bayes_ridge: error(&fit_predict(inputs, outputs, x, d_out, noise * noise)?),
        mean: error(&mean),
        zero: error(&vec![0.0; d_out]),
    })
}

/// Checks the data settings and that every freeze point lies in `1..n_pairs`.
fn check_settings(data: &LinearRegressionConfig, freeze_after: &[usize]) -> Result<()> {
    data.validate()?;
    if freeze_after.iter().any(|&k| k == 0 || k >= data.n_pairs) {
        return Err(CgtError::InvalidDataConfig(format!(
            "freeze points {freeze_after:?} must lie in 1..{}",
            data.n_pairs
        )));
    }
    Ok(())
}

/// Evaluates the reference predictors on the same `n_batches` batches of `data` that
/// [`evaluate_regression`] uses; `freeze_after` lists the prompt sizes `k`.
pub fn evaluate_regression_references(
    data: &LinearRegressionConfig,
    n_batches: usize,
    freeze_after: &[usize],
) -> Result<RegressionReferences> {
    check_settings(data, freeze_after)?;
    let n_pairs = data.n_pairs;
    let mut by_pair = vec![ReferenceErrors::default(); n_pairs];
    let mut frozen = vec![ReferenceErrors::default(); freeze_after.len()];
    let count = (n_batches * data.batch_size).max(1) as f64;
    for step in 0..n_batches {
        let (_, problems) = data.annotated_batch(step as u64);
        for problem in &problems {
            for pair in 0..n_pairs {
                by_pair[pair].add(
                    &reference_errors(problem, pair, pair, data.noise)?,
                    1.0 / count,
                );
            }
            for (slot, &k) in freeze_after.iter().enumerate() {
                for pair in k..n_pairs {
                    let errors = reference_errors(problem, k, pair, data.noise)?;
                    frozen[slot].add(&errors, 1.0 / (count * (n_pairs - k) as f64));
                }
            }
        }
    }
    Ok(RegressionReferences {
        by_pair,
        frozen: freeze_after.iter().copied().zip(frozen).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact fits are recovered up to the 1e-10 jitter and f64 rounding.
    const FIT_TOLERANCE: f64 = 1e-6;

    fn line(x: &[f64]) -> Vec<f64> {
        // y = 2 x0 - x1 + 0.5
        vec![2.0 * x[0] - x[1] + 0.5]
    }

    #[test]
    fn least_squares_oracle_on_a_hand_made_sequence() {
        let inputs = vec![
            vec![1.0, 0.0],
            vec![0.0, 1.0],
            vec![1.0, 1.0],
            vec![-1.0, 2.0],
        ];
        let outputs: Vec<Vec<f64>> = inputs.iter().map(|x| line(x)).collect();
        let query = [2.0, 3.0];
        // Nothing shown: zero.
        assert_eq!(fit_predict(&[], &[], &query, 1, 0.0).unwrap(), vec![0.0]);
        // One pair x = (1, 0), y = 2.5: the minimum-norm w over [x; 1] = (1, 0, 1) is 2.5/2 (1, 0, 1),
        // so the query (0, 1) gets 1.25.
        let one = fit_predict(&inputs[..1], &outputs[..1], &[0.0, 1.0], 1, 0.0).unwrap();
        assert!((one[0] - 1.25).abs() < FIT_TOLERANCE, "{one:?}");
        // Three pairs determine (W, b) exactly (dual branch n < p is not taken: n = p = 3) and four
        // over-determine them: both predict 2*2 - 3 + 0.5 = 1.5.
        for shown in [3, 4] {
            let p = fit_predict(&inputs[..shown], &outputs[..shown], &query, 1, 0.0).unwrap();
            assert!((p[0] - 1.5).abs() < FIT_TOLERANCE, "{shown}: {p:?}");
        }
        // Two pairs: the dual (minimum-norm) solution still interpolates the shown pairs.
        let p = fit_predict(&inputs[..2], &outputs[..2], &inputs[1], 1, 0.0).unwrap();
        assert!((p[0] - outputs[1][0]).abs() < FIT_TOLERANCE);
        // A ridge shrinks towards zero.
        let ridge = fit_predict(&inputs, &outputs, &query, 1, 10.0).unwrap();
        assert!(ridge[0].abs() < 1.5 && ridge[0] > 0.0, "{ridge:?}");
        assert!(fit_predict(&inputs[..2], &outputs[..1], &query, 1, 0.0).is_err());
    }

    #[test]
    fn reference_errors_of_a_hand_made_problem() {
        let inputs = vec![
            vec![1.0, 0.0],
            vec![0.0, 1.0],
            vec![1.0, 1.0],
            vec![2.0, 3.0],
        ];
        let problem = RegressionProblem {
            weight: vec![2.0, -1.0],
            bias: vec![0.5],
            outputs: inputs.iter().map(|x| line(x)).collect(),
            inputs,
        };
        // Query pair 3 (y = 1.5) after 3 shown pairs with outputs 2.5, -0.5, 1.5 (mean 7/6).
        let e = reference_errors(&problem, 3, 3, 0.0).unwrap();
        assert!(e.least_squares < FIT_TOLERANCE);
        assert!((e.zero - 2.25).abs() < 1e-12);
        assert!((e.mean - (1.5 - 7.0 / 6.0f64).powi(2)).abs() < 1e-12);
    }

    #[test]
    fn noise_free_least_squares_is_exact_once_determined() {
        let data = LinearRegressionConfig {
            d_in: 3,
            d_out: 2,
            n_pairs: 8,
            noise: 0.0,
            batch_size: 4,
            seed: 3,
            curriculum: None,
        };
        let references = evaluate_regression_references(&data, 2, &[2, 4]).unwrap();
        assert_eq!(references.by_pair.len(), 8);
        // With d_in + 1 = 4 unknowns per output, pairs 4.. are predicted exactly.
        for e in &references.by_pair[4..] {
            assert!(e.least_squares < FIT_TOLERANCE, "{e:?}");
            assert!(e.zero > 0.1);
        }
        // Frozen after 4 pairs: exact too; after 2: not.
        assert!(references.frozen[1].1.least_squares < FIT_TOLERANCE);
        assert!(references.frozen[0].1.least_squares > 0.01);
        // Pair 0 sees nothing: every predictor predicts zero.
        let first = references.by_pair[0];
        assert_eq!(first.least_squares, first.zero);
        assert_eq!(first.mean, first.zero);
        assert!(evaluate_regression_references(&data, 1, &[8]).is_err());
    }
}
