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
use crate::objective::ObjectiveConfig;

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
