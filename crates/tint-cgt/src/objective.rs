//! The joint training objective
//! `eta L_ce + (1 - eta) L_aux + w_C R_C + w_D R_D (+ beta KL) (+ w_P R_P)` (paper eq. 3, appendix A.1
//! eq. 7 and the distribution-matching regulariser of appendix A.2), including the auxiliary loss of
//! §3.2. Every reading of the paper made here is listed in docs/cgt.md.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::data::HostBatch;
use crate::draws::{auxiliary_mask, StepDraws};
use crate::error::{CgtError, Result};
use crate::loss::{task_loss, TargetTensor};
use crate::model::{CgtModel, LowerPass};
pub use crate::objective_config::{AuxContext, ObjectiveConfig};
use crate::regularisers::{continuity, distribution_matching, orthogonality};
use crate::vae::{gp_kl, prior_kernel, prior_precision};

/// Scalar values of the loss terms (for logs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LossTerms {
    /// The joint loss.
    pub total: f64,
    /// Dynamic-`y` task loss (cross-entropy or L2).
    pub task: f64,
    /// Auxiliary (frozen-`y`) loss, if used.
    pub aux: Option<f64>,
    /// `R_C`, if used.
    pub continuity: Option<f64>,
    /// `R_D`, if used.
    pub orthogonality: Option<f64>,
    /// VAE KL, if used.
    pub kl: Option<f64>,
    /// Distribution-matching `R_P` (appendix A.2), if used.
    #[serde(default)]
    pub distribution: Option<f64>,
}

/// The auxiliary loss: for each sample, with its start `s` in `[2, n - 1 - Delta]` (drawn by
/// [`StepDraws::draw`]), freeze `y_hat = y^l_{s-1}` from the full sequence, run the `x` path on `t_s..`
/// only (earlier keys hidden, original positions) and score the positions `s..=s + Delta`.
///
/// # Shapes
/// - `context`: `[batch_size, seq_length, d_y]` (the `y` used for the dynamic loss)
/// - `starts`: `batch_size` positions
/// - output: `[1]`
pub fn auxiliary_loss<B: Backend>(
    model: &CgtModel<B>,
    batch: &HostBatch,
    context: Tensor<B, 3>,
    horizon: Option<usize>,
    starts: &[usize],
    device: &B::Device,
) -> Result<Tensor<B, 1>> {
    let (batch_size, seq_length) = (batch.batch_size, batch.seq_length);
    let span = horizon.unwrap_or(0);
    let valid = 2..=seq_length.saturating_sub(1 + span);
    if starts.len() != batch_size || starts.iter().any(|s| !valid.contains(s)) {
        return Err(CgtError::Shape(format!(
            "auxiliary starts {starts:?} for {batch_size} sequences of {seq_length} with horizon \
             {span}: one start in [2, {}] per sequence is needed",
            valid.end()
        )));
    }
    let d_y = context.dims()[2];
    let index: Vec<i64> = starts
        .iter()
        .flat_map(|&s| std::iter::repeat_n((s - 1) as i64, d_y))
        .collect();
    let index =
        Tensor::<B, 3, Int>::from_data(TensorData::new(index, [batch_size, 1, d_y]), device);
    // [batch_size, 1, d_y]
    let frozen = context.gather(1, index);
    let input = batch.input_tensor::<B>(device);
    let outputs = model.forward_x_path(&input, Some(frozen), Some(starts))?;
    let mask = auxiliary_mask(batch, starts, horizon);
    let mask = Tensor::from_data(TensorData::new(mask, [batch_size, seq_length]), device);
    Ok(task_loss(
        outputs,
        &TargetTensor::from_batch(batch, device),
        mask,
    ))
}

/// The joint loss of one batch and its terms, with the step's random values drawn from `rng`
/// ([`StepDraws::draw`]).
pub fn joint_loss<B: Backend>(
    model: &CgtModel<B>,
    batch: &HostBatch,
    config: &ObjectiveConfig,
    rng: &mut impl Rng,
    device: &B::Device,
) -> Result<(Tensor<B, 1>, LossTerms)> {
    config.validate()?;
    batch.validate()?;
    let draws = StepDraws::draw(model, batch, config, rng)?;
    joint_loss_with_draws(model, batch, config, &draws, device)
}

/// The joint loss of one batch with given random values (a whole batch's, or a row shard's from
/// [`StepDraws::shard`], whose masked-mean scales it applies to the task and auxiliary losses).
pub fn joint_loss_with_draws<B: Backend>(
    model: &CgtModel<B>,
    batch: &HostBatch,
    config: &ObjectiveConfig,
    draws: &StepDraws,
    device: &B::Device,
) -> Result<(Tensor<B, 1>, LossTerms)> {
    config.validate()?;
    batch.validate()?;
    let scaled = |loss: Tensor<B, 1>, scale: f64| {
        // A whole batch keeps the unscaled graph (bit-identical to the loss before shards existed).
        if scale == 1.0 {
            loss
        } else {
            loss.mul_scalar(scale)
        }
    };
    let input = batch.input_tensor::<B>(device);
    let targets = TargetTensor::from_batch(batch, device);
    let mask = batch.mask_tensor::<B>(device);
    if !model.is_guided() {
        let outputs = model.forward(&input)?.logits;
        let loss = scaled(task_loss(outputs, &targets, mask), draws.task_scale);
        let value = scalar(&loss);
        return Ok((
            loss,
            LossTerms {
                total: value,
                task: value,
                ..LossTerms::default()
            },
        ));
    }
    // One pass through the layers up to the readout layer gives y^l and the x stream the task
    // pass continues from (the auxiliary pass, whose attention hides the prompt, needs its own).
    let LowerPass {
        context,
        x: lower_x,
    } = model.lower_pass(&input)?;
    // The y the upper layers read: the VAE sample while training a VAE, else y^l itself.
    let used = match (&context.log_var, config.vae_beta > 0.0) {
        (Some(log_var), true) => {
            let [b, t, d_y] = context.mean.dims();
            let values = draws
                .noise
                .clone()
                .filter(|v| v.len() == b * t * d_y)
                .ok_or_else(|| {
                    CgtError::Shape(format!(
                        "VAE noise of {:?} values given for y of shape [{b}, {t}, {d_y}]",
                        draws.noise.as_ref().map(Vec::len)
                    ))
                })?;
            let noise = Tensor::from_data(TensorData::new(values, [b, t, d_y]), device);
            context.mean.clone() + log_var.clone().mul_scalar(0.5).exp() * noise
        }
        _ => context.mean.clone(),
    };
    let logits = model.upper_pass(lower_x, used.clone())?;
    let task = scaled(task_loss(logits, &targets, mask), draws.task_scale);
    let mut terms = LossTerms {
        task: scalar(&task),
        ..LossTerms::default()
    };
    let mut total = task.clone().mul_scalar(config.eta);
    if config.eta < 1.0 {
        let frozen_from = match config.aux_context {
            AuxContext::Sample => used,
            AuxContext::Mean => context.mean.clone(),
        };
        let starts = draws.aux_starts.as_deref().unwrap_or_default();
        let aux = auxiliary_loss(
            model,
            batch,
            frozen_from,
            config.aux_horizon,
            starts,
            device,
        )?;
        let aux = scaled(aux, draws.aux_scale);
        terms.aux = Some(scalar(&aux));
        total = total + aux.mul_scalar(1.0 - config.eta);
    }
    let zeta = config.zeta.tensor::<B>(batch.seq_length, device);
    let (n, b) = (batch.seq_length, batch.batch_size);
    if config.w_continuity > 0.0 {
        let value = continuity(context.mean.clone(), zeta.clone())
            .mul_scalar(config.normalisation.continuity_factor(n));
        terms.continuity = Some(scalar(&value));
        total = total + value.mul_scalar(config.w_continuity);
    }
    if config.w_orthogonality > 0.0 {
        let value = orthogonality(context.mean.clone(), zeta)
            .mul_scalar(config.normalisation.orthogonality_factor(n, b));
        terms.orthogonality = Some(scalar(&value));
        total = total + value.mul_scalar(config.w_orthogonality);
    }
    if config.w_distribution > 0.0 {
        if config.vae_length_scale <= 0.0 || !(0.0..=1.0).contains(&config.vae_identity_mix) {
            return Err(CgtError::InvalidTrainingConfig(format!(
                "the A.2 prior kernel needs length_scale > 0 and identity_mix in [0, 1], got {}, {}",
                config.vae_length_scale, config.vae_identity_mix
            )));
        }
        let kernel: Vec<f32> = prior_kernel(n, config.vae_length_scale, config.vae_identity_mix)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let kernel = Tensor::from_data(TensorData::new(kernel, [n, n]), device);
        let value = distribution_matching(
            context.mean.clone(),
            kernel,
            config.distribution_cross_positions,
        );
        terms.distribution = Some(scalar(&value));
        total = total + value.mul_scalar(config.w_distribution);
    }
    if let (true, Some(log_var)) = (config.vae_beta > 0.0, context.log_var.clone()) {
        let precision = prior_precision::<B>(
            batch.seq_length,
            config.vae_length_scale,
            config.vae_identity_mix,
            device,
        )?;
        let value = gp_kl(context.mean.clone(), log_var, precision);
        terms.kl = Some(scalar(&value));
        total = total + value.mul_scalar(config.vae_beta);
    }
    terms.total = scalar(&total);
    Ok((total, terms))
}

fn scalar<B: Backend>(tensor: &Tensor<B, 1>) -> f64 {
    tensor
        .clone()
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .map(|v| v[0])
        .unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CgtConfig, InputKind};
    use crate::data::{standard_normal, step_rng};
    use crate::data::{BatchSource, LinearRegressionConfig};
    use crate::regularisers::Normalisation;
    use crate::tests::TestBackend;

    /// The same arithmetic evaluated twice in one process: only summation order could differ, and it
    /// does not (same ops, same shapes); 1e-5 leaves room for f32 reassociation in reductions.
    const SAME_MATH_TOLERANCE: f64 = 1e-5;

    fn setup(vae: bool) -> (CgtModel<TestBackend>, HostBatch) {
        let data = LinearRegressionConfig {
            d_in: 3,
            d_out: 1,
            n_pairs: 6,
            noise: 0.1,
            batch_size: 3,
            seed: 11,
            curriculum: None,
        };
        let config = CgtConfig::new(1, data.sequence_length(), 2, 16, 2)
            .with_d_y(8)
            .with_n_heads_y(2)
            .with_readout_layer(1)
            .with_rank(2)
            .with_n_templates(2)
            .with_vae(vae)
            // Large initial weights so that y visibly changes the outputs (at GPT-2's 0.02 the
            // templates barely act and the two readings differ by ~1e-5 only).
            .with_init_std(0.3)
            .with_input(InputKind::PaddedVectors(data.width()));
        let device = Default::default();
        (CgtModel::new(&config, &device).unwrap(), data.batch(0))
    }

    /// The auxiliary loss the objective must have computed, rebuilt by hand: the step's generator
    /// first draws the VAE noise (when sampling), then the auxiliary positions.
    fn expected_aux(model: &CgtModel<TestBackend>, batch: &HostBatch, sample: bool) -> f64 {
        let device = Default::default();
        let mut rng = step_rng(5, 0);
        let context = model.context(&batch.input_tensor(&device)).unwrap();
        let [b, t, d_y] = context.mean.dims();
        let values: Vec<f32> = (0..b * t * d_y)
            .map(|_| standard_normal(&mut rng) as f32)
            .collect();
        let noise = Tensor::from_data(TensorData::new(values, [b, t, d_y]), &device);
        let log_var = context.log_var.unwrap();
        let frozen_from = if sample {
            context.mean.clone() + log_var.mul_scalar(0.5).exp() * noise
        } else {
            context.mean
        };
        let starts: Vec<usize> = (0..b).map(|_| rng.random_range(2..=t - 1)).collect();
        scalar(&auxiliary_loss(model, batch, frozen_from, None, &starts, &device).unwrap())
    }

    #[test]
    fn vae_auxiliary_loss_freezes_the_sample_or_the_mean() {
        let (model, batch) = setup(true);
        let device = Default::default();
        let mut values = Vec::new();
        for (aux_context, sample) in [(AuxContext::Sample, true), (AuxContext::Mean, false)] {
            let config = ObjectiveConfig {
                eta: 0.0,
                vae_beta: 0.5,
                aux_context,
                ..ObjectiveConfig::default()
            };
            let (_, terms) =
                joint_loss(&model, &batch, &config, &mut step_rng(5, 0), &device).unwrap();
            let aux = terms.aux.unwrap();
            let expected = expected_aux(&model, &batch, sample);
            assert!(
                (aux - expected).abs() < SAME_MATH_TOLERANCE,
                "{aux_context:?}: {aux} vs {expected}"
            );
            values.push(aux);
        }
        // The two readings differ (sigma = exp(log_var / 2) is far from 0 at initialisation).
        assert!((values[0] - values[1]).abs() > 1e-3, "{values:?}");
    }

    #[test]
    fn sum_normalisation_rescales_the_regularisers_by_the_derived_factors() {
        let (model, batch) = setup(false);
        let device = Default::default();
        let terms = |normalisation| {
            let config = ObjectiveConfig {
                w_continuity: 0.08,
                w_orthogonality: 0.04,
                normalisation,
                ..ObjectiveConfig::default()
            };
            joint_loss(&model, &batch, &config, &mut step_rng(1, 0), &device)
                .unwrap()
                .1
        };
        let (mean, sum) = (terms(Normalisation::Mean), terms(Normalisation::Sum));
        let (n, b) = (batch.seq_length as f64, batch.batch_size as f64);
        let ratio_c = sum.continuity.unwrap() / mean.continuity.unwrap();
        let ratio_d = sum.orthogonality.unwrap() / mean.orthogonality.unwrap();
        assert!((ratio_c - (n - 1.0)).abs() < 1e-3 * n, "{ratio_c}");
        assert!((ratio_d - n * b * b).abs() < 1e-3 * n * b * b, "{ratio_d}");
    }

    #[test]
    fn distribution_matching_term_is_added_with_its_weight() {
        let (model, batch) = setup(false);
        let device = Default::default();
        for cross in [false, true] {
            let config = ObjectiveConfig {
                w_distribution: 0.5,
                distribution_cross_positions: cross,
                ..ObjectiveConfig::default()
            };
            let (_, terms) =
                joint_loss(&model, &batch, &config, &mut step_rng(1, 0), &device).unwrap();
            let value = terms.distribution.unwrap();
            assert!(value > 0.0);
            assert!(
                (terms.total - terms.task - 0.5 * value).abs() < SAME_MATH_TOLERANCE,
                "{terms:?}"
            );
        }
        let bad = ObjectiveConfig {
            w_distribution: 0.5,
            vae_length_scale: 0.0,
            ..ObjectiveConfig::default()
        };
        assert!(joint_loss(&model, &batch, &bad, &mut step_rng(1, 0), &device).is_err());
    }
}
