//! The random draws of one step of the joint loss (VAE noise, auxiliary start positions) and their row
//! shards: drawn once for the global batch, in the order [`crate::objective::joint_loss`] has always
//! drawn them, so a data-parallel peer that takes the rows of its shard sees exactly the draws that
//! single-device training gives those rows (docs/cgt.md, "Data-parallel training").

use std::ops::Range;

use burn::tensor::backend::Backend;
use rand::Rng;

use crate::data::{standard_normal, HostBatch};
use crate::error::{CgtError, Result};
use crate::model::CgtModel;
use crate::objective_config::ObjectiveConfig;

/// The random draws of one step of the joint loss and the scales of its masked means.
#[derive(Clone, Debug, PartialEq)]
pub struct StepDraws {
    /// VAE reparameterisation noise, row-major `[batch_size, seq_length, d_y]` (VAE training only).
    pub noise: Option<Vec<f32>>,
    /// Auxiliary start position per sequence (auxiliary loss only, paper §3.2).
    pub aux_starts: Option<Vec<usize>>,
    /// Factor on the masked-mean task loss: 1 for a whole batch; for a row shard, `N c_k / c` with
    /// `c_k` the shard's and `c` the global batch's scored-position count, so that the mean over the
    /// `N` shards of the scaled shard losses is the global batch's masked mean.
    pub task_scale: f64,
    /// The same factor for the auxiliary loss's mask (which depends on the start positions).
    pub aux_scale: f64,
}

impl StepDraws {
    /// Draws the step's random values for `batch` from `rng`: first the VAE noise (when `model` is a
    /// VAE and `config.vae_beta > 0`), `batch_size * seq_length * d_y` standard normals, then one
    /// auxiliary start per sequence in `[2, n - 1 - Delta]` (when guided and `eta < 1`).
    pub fn draw<B: Backend>(
        model: &CgtModel<B>,
        batch: &HostBatch,
        config: &ObjectiveConfig,
        rng: &mut impl Rng,
    ) -> Result<Self> {
        let (b, n) = (batch.batch_size, batch.seq_length);
        let mut draws = Self {
            noise: None,
            aux_starts: None,
            task_scale: 1.0,
            aux_scale: 1.0,
        };
        if !model.is_guided() {
            return Ok(draws);
        }
        if let (Some(log_var), true) = (&model.y_log_var, config.vae_beta > 0.0) {
            // Linear weights are `[d_in, d_out]`: the map is `d_y -> d_y`.
            let d_y = log_var.weight.dims()[1];
            // Drawn from the step's generator (not the backend's), so resumed runs repeat it exactly.
            draws.noise = Some(
                (0..b * n * d_y)
                    .map(|_| standard_normal(rng) as f32)
                    .collect(),
            );
        }
        if config.eta < 1.0 {
            let span = config.aux_horizon.unwrap_or(0);
            if n < 4 + span {
                return Err(CgtError::Shape(format!(
                    "sequence of {n} too short for the auxiliary loss with horizon {span}"
                )));
            }
            draws.aux_starts = Some((0..b).map(|_| rng.random_range(2..=n - 1 - span)).collect());
        }
        Ok(draws)
    }

    /// The draws of the sequences `rows` of `batch` (a shard of `shards` equal row blocks), with the
    /// task and auxiliary scales of that shard (see [`StepDraws::task_scale`]).
    pub fn shard(
        &self,
        batch: &HostBatch,
        rows: Range<usize>,
        shards: usize,
        aux_horizon: Option<usize>,
    ) -> Self {
        let n = batch.seq_length;
        let noise = self.noise.as_ref().map(|noise| {
            let per_row = noise.len() / batch.batch_size.max(1);
            noise[rows.start * per_row..rows.end * per_row].to_vec()
        });
        let scale = |mask: &[f32]| {
            let shard: f64 = mask[rows.start * n..rows.end * n]
                .iter()
                .map(|&m| m as f64)
                .sum();
            let global: f64 = mask.iter().map(|&m| m as f64).sum();
            // The losses divide by max(count, 1) (crate::loss); so does the global mean here.
            shards as f64 * shard / global.max(1.0)
        };
        let aux_scale = self.aux_starts.as_ref().map_or(1.0, |starts| {
            scale(&auxiliary_mask(batch, starts, aux_horizon))
        });
        Self {
            noise,
            aux_starts: self.aux_starts.as_ref().map(|s| s[rows.clone()].to_vec()),
            task_scale: scale(&batch.loss_mask),
            aux_scale,
        }
    }
}

/// The loss mask of the auxiliary pass: the batch's mask restricted, per sequence, to the positions
/// `s ..= s + Delta` after its start `s` (the whole rest when `Delta` is `None`); `[batch_size * seq_length]`.
pub fn auxiliary_mask(batch: &HostBatch, starts: &[usize], horizon: Option<usize>) -> Vec<f32> {
    let n = batch.seq_length;
    let mut mask = batch.loss_mask.clone();
    for (b, &s) in starts.iter().enumerate() {
        let last = horizon.map_or(n - 1, |h| (s + h).min(n - 1));
        for i in 0..n {
            if i < s || i > last {
                mask[b * n + i] = 0.0;
            }
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{HostInput, HostTargets};

    /// f64 sums of 24 values of order 1: rounding only.
    const F64_SUM_TOLERANCE: f64 = 1e-12;

    /// `sum(v * m) / max(sum(m), 1)` over the rows `rows` (how crate::loss averages).
    fn masked_mean(values: &[f64], mask: &[f32], rows: Range<usize>, n: usize) -> f64 {
        let cells = rows.start * n..rows.end * n;
        let weighted: f64 = cells.clone().map(|i| values[i] * mask[i] as f64).sum();
        let count: f64 = cells.map(|i| mask[i] as f64).sum();
        weighted / count.max(1.0)
    }

    #[test]
    fn scaled_shard_means_average_to_the_global_masked_mean_and_shards_take_their_rows() {
        let (b, n, d_y) = (4, 6, 2);
        // Rows score 3, 1, 5 and 2 positions: the shards' counts differ.
        let loss_mask: Vec<f32> = [
            [0., 1., 0., 1., 0., 1.],
            [0., 0., 0., 0., 0., 1.],
            [0., 1., 1., 1., 1., 1.],
            [0., 0., 0., 1., 0., 1.],
        ]
        .concat();
        let batch = HostBatch {
            batch_size: b,
            seq_length: n,
            input: HostInput::Vectors {
                values: vec![0.0; b * n],
                dim: 1,
            },
            targets: HostTargets::Vectors {
                values: vec![0.0; b * n],
                dim: 1,
            },
            loss_mask,
        };
        let draws = StepDraws {
            noise: Some((0..b * n * d_y).map(|i| i as f32).collect()),
            aux_starts: Some(vec![2, 4, 3, 5]),
            task_scale: 1.0,
            aux_scale: 1.0,
        };
        let values: Vec<f64> = (0..b * n).map(|i| (i as f64).sin()).collect();
        let shards = 2;
        let parts: Vec<StepDraws> = (0..shards)
            .map(|k| draws.shard(&batch, 2 * k..2 * k + 2, shards, None))
            .collect();
        let aux_mask = auxiliary_mask(&batch, draws.aux_starts.as_ref().unwrap(), None);
        let task_scales: Vec<f64> = parts.iter().map(|p| p.task_scale).collect();
        let aux_scales: Vec<f64> = parts.iter().map(|p| p.aux_scale).collect();
        for (mask, scales) in [(&batch.loss_mask, task_scales), (&aux_mask, aux_scales)] {
            let global = masked_mean(&values, mask, 0..b, n);
            let averaged: f64 = scales
                .iter()
                .enumerate()
                .map(|(k, scale)| scale * masked_mean(&values, mask, 2 * k..2 * k + 2, n))
                .sum::<f64>()
                / shards as f64;
            assert!(
                (global - averaged).abs() < F64_SUM_TOLERANCE,
                "{global} vs {averaged}"
            );
            // Unscaled shard means would not average to it (the counts differ).
            let plain: f64 = (0..shards)
                .map(|k| masked_mean(&values, mask, 2 * k..2 * k + 2, n))
                .sum::<f64>()
                / shards as f64;
            assert!((global - plain).abs() > 1e-3, "{global} vs {plain}");
        }
        let second = &parts[1];
        assert_eq!(second.aux_starts, Some(vec![3, 5]));
        let noise = draws.noise.as_ref().unwrap();
        assert_eq!(
            second.noise.as_deref(),
            Some(&noise[2 * n * d_y..4 * n * d_y])
        );
    }
}
