//! Run-time options of the constructed TinT modules (docs/construction.md §1.1 defaults).

use burn::config::Config;
use burn::tensor::DType;
use serde::{Deserialize, Serialize};

use crate::error::TintOpsError;

/// How the constructed network is evaluated (docs/construction.md §15, "Executions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Execution {
    /// Every module computes its output from its own stored weights by the operations that define
    /// it: the linear modules run their linear attention over the prefix rows with the stored
    /// query/key/value/position maps and `c_proj`, then their H_sim-split permutation and bias-add
    /// maps; the norms run the group norm, the stored gate and the linear module; the norm and
    /// activation backward run their stored shift maps; every gate is evaluated from its stored
    /// weights (`tanh` or, in [`GateMode::Exact`], its hard limit). H_sim-split ops whose stored
    /// weights are identity, zero or block selections are applied as the copies they are
    /// (recognised from the stored weights at construction). No module reads the auxiliary
    /// weights out of its prefix rows into a plain matmul.
    #[default]
    Constructed,
    /// An optimisation proven equal to [`Execution::Constructed`] (tests: `tint-ops` module tests
    /// `*structured*` / row-form tests, `tint-sim/tests/all/executions.rs`): with exact gates, the linear
    /// modules read `W, b` out of their prefix rows (the rows the constructed keys/values read) and
    /// apply one matmul; the norm and activation backward apply their finite difference directly;
    /// gates are 0/1 row selections.
    Structured,
}

impl std::str::FromStr for Execution {
    type Err = String;

    /// `constructed` or `structured` (the command line's names, as serialised).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "constructed" => Ok(Execution::Constructed),
            "structured" => Ok(Execution::Structured),
            other => Err(format!(
                "unknown execution {other:?}: expected constructed or structured"
            )),
        }
    }
}

/// How the gates (§3.3) and the group-norm weights (§3.4) are evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateMode {
    /// The hard limit of the stored `tanh(logit)` gates: 1 where the stored logit is positive,
    /// else 0 (the paper's 0/1 selections; `tanh(10) == 1` in f32, so in f32 both modes agree).
    #[default]
    Exact,
    /// The official `tanh(gate_scale · …)` form (`gate_scale = 10` by default; in f64 `tanh(10) = 1 - 4.1e-9`).
    Tanh,
}

/// How the first-order backward of LayerNorm and activations is computed (§6.6, §6.9).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Derivative {
    /// `s · (f(x + dy/s) - f(x))` with `s` = `scale_embeddings` (default 1000).
    FiniteDifference {
        /// The finite-difference factor `s`; the step is `1/s`.
        scale: f64,
    },
    /// The exact derivative (`f'(x) dy`), the limit `s → ∞`.
    Exact,
}

/// The auxiliary model's activation function (§6.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivationKind {
    /// GPT-2 `gelu_new`: `0.5 x (1 + tanh(sqrt(2/π)(x + 0.044715 x³)))`.
    GeluNew,
    /// OPT: `max(x, 0)`.
    Relu,
}

/// Options shared by all constructed modules: a burn [`Config`], so `TintOptions::new()` gives the
/// defaults below, each field has a `with_<field>` setter, and the options save and load as JSON.
#[derive(Config, Debug, Copy, PartialEq)]
pub struct TintOptions {
    /// Float dtype of every constructed weight (states must use the same dtype). Default: F32.
    #[config(default = "DType::F32")]
    pub float_dtype: DType,
    /// Gate evaluation. Default: [`GateMode::Exact`].
    #[config(default = "GateMode::Exact")]
    pub gate_mode: GateMode,
    /// Gate logit scale `g10` stored in the gate weights. Default: 10.
    #[config(default = 10.0)]
    pub gate_scale: f64,
    /// First-order backward. Default: finite differences with `s = 1000`.
    #[config(default = "Derivative::FiniteDifference { scale: 1000.0 }")]
    pub derivative: Derivative,
    /// LayerNorm epsilon used inside TinT. Default: 1e-5.
    #[config(default = 1e-5)]
    pub ln_epsilon: f64,
    /// Inner learning rate `η` (on the summed loss). Default: 1e-6.
    #[config(default = 1e-6)]
    pub inner_lr: f64,
    /// Auxiliary activation. Default: [`ActivationKind::GeluNew`].
    #[config(default = "ActivationKind::GeluNew")]
    pub activation: ActivationKind,
    /// Constructed or structured evaluation. Default: [`Execution::Constructed`].
    #[config(default = "Execution::Constructed")]
    pub execution: Execution,
}

impl Default for TintOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl TintOptions {
    /// Checks that every scalar option is usable.
    ///
    /// # Errors
    /// [`TintOpsError::BadOption`] naming the option.
    pub fn validate(&self) -> Result<(), TintOpsError> {
        if !matches!(
            self.float_dtype,
            DType::F32 | DType::F64 | DType::F16 | DType::BF16
        ) {
            return Err(TintOpsError::BadOption {
                name: "float_dtype",
                value: f64::NAN,
                reason: "must be a float dtype",
            });
        }
        if !(self.gate_scale.is_finite() && self.gate_scale > 0.0) {
            return Err(TintOpsError::BadOption {
                name: "gate_scale",
                value: self.gate_scale,
                reason: "must be finite and > 0",
            });
        }
        if let Derivative::FiniteDifference { scale } = self.derivative {
            if !(scale.is_finite() && scale > 0.0) {
                return Err(TintOpsError::BadOption {
                    name: "scale_embeddings",
                    value: scale,
                    reason: "must be finite and > 0",
                });
            }
        }
        if !(self.ln_epsilon.is_finite() && self.ln_epsilon >= 0.0) {
            return Err(TintOpsError::BadOption {
                name: "ln_epsilon",
                value: self.ln_epsilon,
                reason: "must be finite and >= 0",
            });
        }
        if !self.inner_lr.is_finite() {
            return Err(TintOpsError::BadOption {
                name: "inner_lr",
                value: self.inner_lr,
                reason: "must be finite",
            });
        }
        Ok(())
    }

    /// The gate value `tanh(g10)` used for "on" gates (exactly 1 in [`GateMode::Exact`]).
    pub fn gate_on_value(&self) -> f64 {
        match self.gate_mode {
            GateMode::Exact => 1.0,
            GateMode::Tanh => self.gate_scale.tanh(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executions_parse_from_their_names_only() {
        assert_eq!("constructed".parse(), Ok(Execution::Constructed));
        assert_eq!("structured".parse(), Ok(Execution::Structured));
        let err = "Structured".parse::<Execution>().unwrap_err();
        assert!(
            err.contains("\"Structured\"") && err.contains("constructed or structured"),
            "{err}"
        );
    }

    #[test]
    fn defaults_setters_and_saved_json_round_trip() {
        let defaults = TintOptions::default();
        assert_eq!(defaults, TintOptions::new());
        assert_eq!(defaults.float_dtype, DType::F32);
        assert_eq!(defaults.gate_mode, GateMode::Exact);
        assert_eq!(defaults.gate_scale, 10.0);
        assert_eq!(
            defaults.derivative,
            Derivative::FiniteDifference { scale: 1000.0 }
        );
        assert_eq!(defaults.ln_epsilon, 1e-5);
        assert_eq!(defaults.inner_lr, 1e-6);
        assert_eq!(defaults.activation, ActivationKind::GeluNew);
        assert_eq!(defaults.execution, Execution::Constructed);
        defaults.validate().unwrap();

        let custom = TintOptions::new()
            .with_float_dtype(DType::F64)
            .with_gate_mode(GateMode::Tanh)
            .with_derivative(Derivative::Exact)
            .with_activation(ActivationKind::Relu)
            .with_execution(Execution::Structured)
            .with_inner_lr(2.5e-4);
        assert_ne!(custom, defaults);
        let path = std::env::temp_dir().join(format!("tint-options-{}.json", std::process::id()));
        custom.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"execution\": \"structured\""), "{text}");
        assert!(text.contains("\"derivative\": \"exact\""), "{text}");
        let loaded = TintOptions::load(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(loaded, custom);
    }

    #[test]
    fn validate_names_the_bad_option() {
        let bad = TintOptions::new().with_derivative(Derivative::FiniteDifference { scale: 0.0 });
        match bad.validate() {
            Err(TintOpsError::BadOption { name, .. }) => assert_eq!(name, "scale_embeddings"),
            other => panic!("{other:?}"),
        }
    }
}
