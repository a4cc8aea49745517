//! [`StepConfig`]: what the simulated training step does — layers, steps, step size, finite-difference
//! factor, loss gradient, derivatives — shared by every TinT engine (GPT-2/OPT and LLaMA, simulator
//! and functional reference), with one validation.

use serde::{Deserialize, Serialize};

use crate::error::SimError;

/// How the gradient of the language-modelling loss with respect to the final hidden state is
/// approximated (docs/construction.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LossGradientKind {
    /// `E^T softmax(E h) - e_next`: the exact cross-entropy gradient (official default,
    /// `use_prediction_loss`).
    #[default]
    Prediction,
    /// `E^T (E h) - e_next` (official `use_quad`).
    Quadratic,
    /// `mean_rows(E) - e_next` (official: neither flag set).
    MeanEmbedding,
}

/// How the norm and activation backward passes are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DerivativeMode {
    /// First-order finite differences with step `1/s` (what TinT computes, docs/construction.md §6.6, §6.9).
    #[default]
    FiniteDifference,
    /// Exact Jacobian-vector products (functional reference only; TinT cannot express them).
    Exact,
}

/// How the gradient passes back through the attention of a simulated layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AttentionBackwardMode {
    /// Through the attention values only, the attention probabilities held constant (what TinT
    /// computes, docs/construction.md §6.11, paper Def. E.6).
    #[default]
    ValuesOnly,
    /// Also through the attention scores into the queries and keys (the exact gradient; the LLaMA
    /// functional reference only: TinT cannot express it). `W_Q` and `W_K` still do not move.
    Exact,
}

/// The simulated step, as every engine runs it (names follow docs/construction.md §1.1). Defaults
/// follow the official code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepConfig {
    /// Number of top auxiliary layers that are back-propagated and updated; `None` means all.
    pub n_simulation_layers: Option<usize>,
    /// Number of simulated SGD steps. Default: 1.
    pub n_forward_backward: usize,
    /// Inner learning rate `eta` of the descent on the **summed** training loss. Default: 1e-6.
    pub inner_lr: f64,
    /// Finite-difference factor `s` of the norm and activation backward passes. Default: 1000.
    pub scale_embeddings: f64,
    /// Which loss gradient is fed to the backward pass. Default: [`LossGradientKind::Prediction`].
    pub loss_gradient: LossGradientKind,
    /// Finite differences (what TinT computes) or exact derivatives (functional references only).
    pub derivatives: DerivativeMode,
    /// Back-propagation through the attention values only (what TinT computes) or also through
    /// the scores (the LLaMA functional reference only).
    #[serde(default)]
    pub attention_backward: AttentionBackwardMode,
}

impl Default for StepConfig {
    fn default() -> Self {
        Self {
            n_simulation_layers: None,
            n_forward_backward: 1,
            inner_lr: 1e-6,
            scale_embeddings: 1000.0,
            loss_gradient: LossGradientKind::Prediction,
            derivatives: DerivativeMode::FiniteDifference,
            attention_backward: AttentionBackwardMode::ValuesOnly,
        }
    }
}

impl StepConfig {
    /// Number of updated layers for an auxiliary model with `n_layers` layers.
    pub fn simulated_layers(&self, n_layers: usize) -> usize {
        self.n_simulation_layers.unwrap_or(n_layers).min(n_layers)
    }

    /// Checks the values against a model with `n_layers` layers.
    ///
    /// # Errors
    /// [`SimError::InvalidConfig`] naming the field, the rule and the value: `n_simulation_layers`
    /// outside `1..=n_layers`, zero steps, a non-finite `inner_lr`, or a non-positive / non-finite
    /// `scale_embeddings`.
    pub fn validate(&self, n_layers: usize) -> Result<(), SimError> {
        if let Some(n) = self.n_simulation_layers {
            if n == 0 || n > n_layers {
                return Err(SimError::invalid_config(
                    "n_simulation_layers",
                    n,
                    format!(
                        "must be in 1..={n_layers} (the auxiliary model has {n_layers} layers)"
                    ),
                ));
            }
        }
        if self.n_forward_backward == 0 {
            return Err(SimError::invalid_config(
                "n_forward_backward",
                0,
                "must be at least 1",
            ));
        }
        if !self.inner_lr.is_finite() {
            return Err(SimError::invalid_config(
                "inner_lr",
                self.inner_lr,
                "is not finite",
            ));
        }
        if !(self.scale_embeddings.is_finite() && self.scale_embeddings > 0.0) {
            return Err(SimError::invalid_config(
                "scale_embeddings",
                self.scale_embeddings,
                "must be finite and > 0",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_each_bad_field_and_value() {
        let ok = StepConfig::default();
        assert!(ok.validate(2).is_ok());
        assert_eq!(ok.simulated_layers(4), 4);
        let cases = [
            (
                StepConfig {
                    n_simulation_layers: Some(0),
                    ..ok.clone()
                },
                "n_simulation_layers = 0",
            ),
            (
                StepConfig {
                    n_simulation_layers: Some(3),
                    ..ok.clone()
                },
                "n_simulation_layers = 3",
            ),
            (
                StepConfig {
                    n_forward_backward: 0,
                    ..ok.clone()
                },
                "n_forward_backward = 0",
            ),
            (
                StepConfig {
                    inner_lr: f64::NAN,
                    ..ok.clone()
                },
                "inner_lr = NaN",
            ),
            (
                StepConfig {
                    scale_embeddings: 0.0,
                    ..ok.clone()
                },
                "scale_embeddings = 0",
            ),
        ];
        for (config, needle) in cases {
            match config.validate(2) {
                Err(error @ SimError::InvalidConfig { .. }) => {
                    let message = error.to_string();
                    assert!(message.contains(needle), "{message} lacks {needle}")
                }
                other => panic!("{config:?}: {other:?}"),
            }
        }
        let two = StepConfig {
            n_simulation_layers: Some(2),
            ..ok
        };
        assert_eq!(two.simulated_layers(4), 2);
        assert_eq!(two.simulated_layers(1), 1);
    }
}
