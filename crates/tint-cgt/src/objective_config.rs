//! The weights and options of the joint training objective ([`ObjectiveConfig`], paper eq. 3 and
//! appendix A), apart from the objective's computation (`crate::objective`) so that the draws of a
//! step ([`crate::draws`]) can read them without importing the objective.

use serde::{Deserialize, Serialize};

use crate::error::{CgtError, Result};
use crate::regularisers::{Normalisation, PositionWeighting};

/// Which `y` the auxiliary loss freezes in the VAE variant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuxContext {
    /// The sampled `y = mu + sigma * noise` that the dynamic loss also uses: appendix A.1 puts
    /// `eta L_ce + (1 - eta) L_aux` in place of the reconstruction loss, an expectation over `q(y | t)`.
    #[default]
    Sample,
    /// The posterior mean `mu` (what inference freezes).
    Mean,
}

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
    /// Normalisation of `R_C` and `R_D` (the paper writes them up to a constant).
    #[serde(default)]
    pub normalisation: Normalisation,
    /// VAE variant: the `y` the auxiliary loss freezes (the paper's reading: the sample).
    #[serde(default)]
    pub aux_context: AuxContext,
    /// `w_P`, weight of the distribution-matching regulariser of appendix A.2 (0: off). Its prior kernel
    /// is the VAE prior's (`vae_length_scale`, `vae_identity_mix`).
    #[serde(default)]
    pub w_distribution: f64,
    /// Appendix A.2 form: `true` matches the covariance across position pairs (the Gaussian-process
    /// form), `false` the per-position simplified `R'_D`.
    #[serde(default)]
    pub distribution_cross_positions: bool,
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
            normalisation: Normalisation::Mean,
            aux_context: AuxContext::Sample,
            w_distribution: 0.0,
            distribution_cross_positions: false,
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
        if self.w_continuity < 0.0
            || self.w_orthogonality < 0.0
            || self.vae_beta < 0.0
            || self.w_distribution < 0.0
        {
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
            || self.w_distribution > 0.0
    }
}
