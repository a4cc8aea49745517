//! The joint training objective
//! `eta L_ce + (1 - eta) L_aux + w_C R_C + w_D R_D (+ beta KL)` (paper eq. 3 and appendix A.1),
//! including the auxiliary loss of §3.2.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::data::{standard_normal, HostBatch};
use crate::error::{CgtError, Result};
use crate::loss::{task_loss, TargetTensor};
use crate::model::CgtModel;
use crate::regularisers::{continuity, orthogonality, PositionWeighting};
use crate::vae::{gp_kl, prior_precision};

/// Weights and options of the joint loss.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectiveConfig {
    /// `eta`: weight of the dynamic-`y` loss; `1 - eta` goes to the auxiliary loss (`eta = 1`: no aux).
    pub eta: f64,
    /// Auxiliary horizon `Delta`: the frozen-`y` model is scored on `t_s .. t_{s+Delta}`; `None`: the whole rest.
    pub aux_horizon: Option<usize>,
    /// `w_C`, weight of the continuity regulariser.
    pub w_continuity: f64,
    /// `w_D`, weight of the orthogonality regulariser.
    pub w_orthogonality: f64,
    /// Position weighting `zeta` of both regularisers.
    pub zeta: PositionWeighting,
    /// VAE variant: `beta_y` (0 disables the KL term and sampling).
    pub vae_beta: f64,
    /// VAE prior: RBF length scale `lambda`.
    pub vae_length_scale: f64,
    /// VAE prior: identity mix `nu`.
    pub vae_identity_mix: f64,
}

impl Default for ObjectiveConfig {
    fn default() -> Self {
        Self {
            eta: 1.0,
            aux_horizon: None,
            w_continuity: 0.0,
            w_orthogonality: 0.0,
            zeta: PositionWeighting::Constant,
            vae_beta: 0.0,
            vae_length_scale: 16.0,
            vae_identity_mix: 0.05,
        }
    }
}

impl ObjectiveConfig {
    /// Checks ranges.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.eta) {
            return Err(CgtError::InvalidTrainingConfig(format!(
                "eta = {} outside [0, 1]",
                self.eta
            )));
        }
        if self.w_continuity < 0.0 || self.w_orthogonality < 0.0 || self.vae_beta < 0.0 {
            return Err(CgtError::InvalidTrainingConfig(
                "regulariser weights must be >= 0".into(),
            ));
        }
        if self.aux_horizon == Some(0) {
            return Err(CgtError::InvalidTrainingConfig(
                "aux_horizon must be positive".into(),
            ));
        }
        Ok(())
    }

    /// True when any `y`-dependent term is active.
    pub fn uses_context(&self) -> bool {
        self.eta < 1.0
            || self.w_continuity > 0.0
            || self.w_orthogonality > 0.0
            || self.vae_beta > 0.0
    }
}

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
}

/// The auxiliary loss: for each sample pick `s` in `[2, n - 1 - Delta]`, freeze `y_hat = y^l_{s-1}` from
/// the full sequence, run the `x` path on `t_s..` only (earlier keys hidden, original positions) and score
/// the positions `s..=s + Delta`.
///
/// # Shapes
/// - `context`: `[batch_size, seq_length, d_y]` (the `y` used for the dynamic loss)
/// - output: `[1]`
pub fn auxiliary_loss<B: Backend>(
    model: &CgtModel<B>,
    batch: &HostBatch,
    context: Tensor<B, 3>,
    horizon: Option<usize>,
    rng: &mut impl Rng,
    device: &B::Device,
) -> Result<Tensor<B, 1>> {
    let (batch_size, seq_length) = (batch.batch_size, batch.seq_length);
    let span = horizon.unwrap_or(0);
    if seq_length < 4 + span {
        return Err(CgtError::Shape(format!(
            "sequence of {seq_length} too short for the auxiliary loss with horizon {span}"
        )));
    }
    let starts: Vec<usize> = (0..batch_size)
        .map(|_| rng.random_range(2..=seq_length - 1 - span))
        .collect();
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
    let outputs = model.forward_x_path(&input, Some(frozen), Some(&starts))?;
    let mut mask = batch.loss_mask.clone();
    for (b, &s) in starts.iter().enumerate() {
        let last = horizon.map_or(seq_length - 1, |h| (s + h).min(seq_length - 1));
        for i in 0..seq_length {
            if i < s || i > last {
                mask[b * seq_length + i] = 0.0;
            }
        }
    }
    let mask = Tensor::from_data(TensorData::new(mask, [batch_size, seq_length]), device);
    Ok(task_loss(
        outputs,
        &TargetTensor::from_batch(batch, device),
        mask,
    ))
}

/// The joint loss of one batch and its terms.
pub fn joint_loss<B: Backend>(
    model: &CgtModel<B>,
    batch: &HostBatch,
    config: &ObjectiveConfig,
    rng: &mut impl Rng,
    device: &B::Device,
) -> Result<(Tensor<B, 1>, LossTerms)> {
    config.validate()?;
    batch.validate()?;
    let input = batch.input_tensor::<B>(device);
    let targets = TargetTensor::from_batch(batch, device);
    let mask = batch.mask_tensor::<B>(device);
    if !model.is_guided() {
        let outputs = model.forward(&input)?.logits;
        let loss = task_loss(outputs, &targets, mask);
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
    let sampled = config.vae_beta > 0.0 && model.y_log_var.is_some();
    let output = if sampled {
        let (b, t) = input.batch_and_length();
        let d_y = model.y_log_var.as_ref().map_or(0, |m| m.weight.dims()[0]);
        // Drawn from the step's generator (not the backend's), so resumed runs repeat it exactly.
        let values: Vec<f32> = (0..b * t * d_y)
            .map(|_| standard_normal(rng) as f32)
            .collect();
        let noise = Tensor::from_data(TensorData::new(values, [b, t, d_y]), device);
        model.forward_sampled(&input, noise)?
    } else {
        model.forward(&input)?
    };
    let context = output.context.ok_or(CgtError::NoContextStream)?;
    let task = task_loss(output.logits, &targets, mask);
    let mut terms = LossTerms {
        task: scalar(&task),
        ..LossTerms::default()
    };
    let mut total = task.clone().mul_scalar(config.eta);
    if config.eta < 1.0 {
        let aux = auxiliary_loss(
            model,
            batch,
            context.mean.clone(),
            config.aux_horizon,
            rng,
            device,
        )?;
        terms.aux = Some(scalar(&aux));
        total = total + aux.mul_scalar(1.0 - config.eta);
    }
    let zeta = config.zeta.tensor::<B>(batch.seq_length, device);
    if config.w_continuity > 0.0 {
        let value = continuity(context.mean.clone(), zeta.clone());
        terms.continuity = Some(scalar(&value));
        total = total + value.mul_scalar(config.w_continuity);
    }
    if config.w_orthogonality > 0.0 {
        let value = orthogonality(context.mean.clone(), zeta);
        terms.orthogonality = Some(scalar(&value));
        total = total + value.mul_scalar(config.w_orthogonality);
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
