//! [`LlamaTintConfig`]: the hyper-parameters of a simulated TinT step on a LLaMA-family auxiliary model,
//! and [`LlamaUpdates`]: which auxiliary parameters the step updates.

use serde::{Deserialize, Serialize};

use crate::config::{StepConfig, TintConfig};
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

/// Hyper-parameters of a simulated TinT step on a LLaMA-family model: the [`StepConfig`] every
/// engine shares and which parameters move (TinT width, prefixes and heads do not apply to the
/// functional reference; the simulator's are in [`crate::llama::LlamaSimulatorConfig`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LlamaTintConfig {
    /// What the simulated step does (layers, steps, `η`, `s`, loss gradient, derivatives).
    #[serde(flatten)]
    pub step: StepConfig,
    /// Which parameters move.
    pub updates: LlamaUpdates,
}

impl LlamaTintConfig {
    /// The step of a GPT-2-style [`TintConfig`] with the default updates. `official_compat` has no
    /// LLaMA meaning and is ignored.
    pub fn from_tint(config: &TintConfig) -> Self {
        Self {
            step: config.step.clone(),
            updates: LlamaUpdates::default(),
        }
    }

    /// Number of updated layers for an auxiliary model with `n_layers` layers.
    pub fn simulated_layers(&self, n_layers: usize) -> usize {
        self.step.simulated_layers(n_layers)
    }

    /// Checks the values against a model with `n_layers` layers ([`StepConfig::validate`]).
    ///
    /// # Errors
    /// [`SimError::InvalidConfig`] as [`StepConfig::validate`].
    pub fn validate(&self, n_layers: usize) -> Result<(), SimError> {
        self.step.validate(n_layers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DerivativeMode;

    #[test]
    fn from_tint_copies_the_step() {
        let tint = TintConfig {
            step: StepConfig {
                n_simulation_layers: Some(2),
                n_forward_backward: 3,
                inner_lr: 1e-4,
                scale_embeddings: 50.0,
                derivatives: DerivativeMode::Exact,
                ..StepConfig::default()
            },
            ..TintConfig::for_model(64, 16, 16)
        };
        let llama = LlamaTintConfig::from_tint(&tint);
        assert_eq!(llama.step, tint.step);
        assert_eq!(llama.updates, LlamaUpdates::default());
        assert_eq!(llama.simulated_layers(4), 2);
        assert!(llama.validate(2).is_ok());
        assert!(matches!(
            llama.validate(1),
            Err(SimError::InvalidConfig { field: "n_simulation_layers", ref value, .. }) if value == "2"
        ));
    }
}
