//! [`LlamaTintConfig`]: the hyper-parameters of a simulated TinT step on a LLaMA-family auxiliary model,
//! and [`LlamaUpdates`]: which auxiliary parameters the step updates.

use serde::{Deserialize, Serialize};

use crate::config::{DerivativeMode, LossGradientKind, TintConfig};
use crate::error::SimError;

/// Which auxiliary parameters of the simulated layers the LLaMA step updates (docs/tint-llama.md).
///
/// Never updated: `W_Q`, `W_K` (their gradient flows through the attention scores, which TinT's
/// value-only attention backward does not differentiate), the token embedding and the LM head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlamaUpdates {
    /// Attention value projection `W_V` (GQA: `[d_model, n_kv_heads · head_dim]`). Default: true.
    pub attn_value: bool,
    /// Attention output projection `W_O`. Default: true.
    pub attn_output: bool,
    /// SwiGLU `W_gate`, `W_up`, `W_down`. Default: true.
    pub mlp: bool,
    /// RMSNorm gains (both norms of each simulated layer and the final norm). Default: false, as the
    /// official LayerNorm descent freezes `gamma` (`ln_update_bias_only`); RMSNorm has no bias, so with
    /// this off no norm parameter moves.
    pub norm_gains: bool,
}

impl Default for LlamaUpdates {
    fn default() -> Self {
        Self {
            attn_value: true,
            attn_output: true,
            mlp: true,
            norm_gains: false,
        }
    }
}

/// Hyper-parameters of the LLaMA functional reference (the fields shared with [`TintConfig`] have
/// the same meaning; TinT width, prefixes and heads do not apply to the reference).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaTintConfig {
    /// Number of top auxiliary layers that are back-propagated and updated; `None` means all.
    pub n_simulation_layers: Option<usize>,
    /// Number of simulated SGD steps. Default: 1.
    pub n_forward_backward: usize,
    /// Inner learning rate `eta` of the descent on the **summed** training loss. Default: 1e-6.
    pub inner_lr: f64,
    /// Finite-difference factor `s` of the RMSNorm and SwiGLU backward passes. Default: 1000.
    pub scale_embeddings: f64,
    /// Which loss gradient is fed to the backward pass. Default: [`LossGradientKind::Prediction`].
    pub loss_gradient: LossGradientKind,
    /// Finite differences (what TinT computes) or exact derivatives.
    pub derivatives: DerivativeMode,
    /// Which parameters move.
    pub updates: LlamaUpdates,
}

impl Default for LlamaTintConfig {
    fn default() -> Self {
        Self {
            n_simulation_layers: None,
            n_forward_backward: 1,
            inner_lr: 1e-6,
            scale_embeddings: 1000.0,
            loss_gradient: LossGradientKind::Prediction,
            derivatives: DerivativeMode::FiniteDifference,
            updates: LlamaUpdates::default(),
        }
    }
}

impl LlamaTintConfig {
    /// The shared fields of a GPT-2-style [`TintConfig`] (simulated layers, steps, `eta`, `s`, loss
    /// gradient, derivative mode); default updates. `official_compat` has no LLaMA meaning and is ignored.
    pub fn from_tint(config: &TintConfig) -> Self {
        Self {
            n_simulation_layers: config.n_simulation_layers,
            n_forward_backward: config.n_forward_backward,
            inner_lr: config.inner_lr,
            scale_embeddings: config.scale_embeddings,
            loss_gradient: config.loss_gradient,
            derivatives: config.derivatives,
            updates: LlamaUpdates::default(),
        }
    }

    /// Number of updated layers for an auxiliary model with `n_layers` layers.
    pub fn simulated_layers(&self, n_layers: usize) -> usize {
        self.n_simulation_layers.unwrap_or(n_layers).min(n_layers)
    }

    /// Checks the values against a model with `n_layers` layers.
    ///
    /// # Errors
    /// [`SimError::InvalidConfig`] for `n_simulation_layers` outside `1..=n_layers`, zero steps, a
    /// non-finite `inner_lr`, or a non-positive / non-finite `scale_embeddings`.
    pub fn validate(&self, n_layers: usize) -> Result<(), SimError> {
        let bad = |msg: String| Err(SimError::InvalidConfig(msg));
        if let Some(n) = self.n_simulation_layers {
            if n == 0 || n > n_layers {
                return bad(format!(
                    "n_simulation_layers = {n} must be in 1..={n_layers} (the auxiliary model has {n_layers} layers)"
                ));
            }
        }
        if self.n_forward_backward == 0 {
            return bad("n_forward_backward must be at least 1".into());
        }
        if !self.inner_lr.is_finite() {
            return bad(format!("inner_lr = {} is not finite", self.inner_lr));
        }
        if !(self.scale_embeddings.is_finite() && self.scale_embeddings > 0.0) {
            return bad(format!(
                "scale_embeddings = {} must be finite and > 0",
                self.scale_embeddings
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_rejects_bad_values_and_from_tint_copies_shared_fields() {
        let ok = LlamaTintConfig::default();
        assert!(ok.validate(2).is_ok());
        let cases = [
            LlamaTintConfig {
                n_simulation_layers: Some(0),
                ..ok.clone()
            },
            LlamaTintConfig {
                n_simulation_layers: Some(3),
                ..ok.clone()
            },
            LlamaTintConfig {
                n_forward_backward: 0,
                ..ok.clone()
            },
            LlamaTintConfig {
                inner_lr: f64::NAN,
                ..ok.clone()
            },
            LlamaTintConfig {
                scale_embeddings: 0.0,
                ..ok.clone()
            },
        ];
        for config in cases {
            assert!(
                matches!(config.validate(2), Err(SimError::InvalidConfig(_))),
                "{config:?}"
            );
        }
        let tint = TintConfig {
            n_simulation_layers: Some(2),
            n_forward_backward: 3,
            inner_lr: 1e-4,
            scale_embeddings: 50.0,
            derivatives: DerivativeMode::Exact,
            ..TintConfig::for_model(64, 16, 16)
        };
        let llama = LlamaTintConfig::from_tint(&tint);
        assert_eq!(llama.n_simulation_layers, Some(2));
        assert_eq!(llama.n_forward_backward, 3);
        assert_eq!(llama.inner_lr, 1e-4);
        assert_eq!(llama.scale_embeddings, 50.0);
        assert_eq!(llama.derivatives, DerivativeMode::Exact);
        assert_eq!(llama.simulated_layers(4), 2);
    }
}
