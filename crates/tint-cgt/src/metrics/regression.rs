//! Evaluation on linear regression (paper §4.3): error with dynamic `y` and with `y` frozen after `k` pairs.

use burn::tensor::backend::Backend;
use serde::{Deserialize, Serialize};

use super::{frozen_context, host};
use crate::data::{HostTargets, LinearRegressionConfig};
use crate::error::{CgtError, Result};
use crate::model::CgtModel;

/// Regression errors (mean squared error over output components).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RegressionEvaluation {
    /// Dynamic-`y` error at every pair index (pair `i` is predicted after `i` shown pairs).
    pub dynamic_by_pair: Vec<f64>,
    /// `(k, dynamic error on pairs >= k, frozen-after-k error on pairs >= k)`.
    pub specialised: Vec<(usize, f64, f64)>,
}

/// Evaluates on `n_batches` batches of `data`; `freeze_after` lists the prompt sizes `k`.
pub fn evaluate_regression<B: Backend>(
    model: &CgtModel<B>,
    data: &LinearRegressionConfig,
    n_batches: usize,
    freeze_after: &[usize],
    device: &B::Device,
) -> Result<RegressionEvaluation> {
    data.validate()?;
    if freeze_after.iter().any(|&k| k == 0 || k >= data.n_pairs) {
        return Err(CgtError::InvalidDataConfig(format!(
            "freeze points {freeze_after:?} must lie in 1..{}",
            data.n_pairs
        )));
    }
    let n_pairs = data.n_pairs;
    let mut dynamic = vec![0.0; n_pairs];
    let mut frozen_sums = vec![0.0; freeze_after.len()];
    let mut count = 0usize;
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
        let (batch, _) = data.annotated_batch(step as u64);
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
    Ok(RegressionEvaluation {
        dynamic_by_pair,
        specialised,
    })
}
