//! Run-time options of the constructed TinT modules (docs/construction.md §1.1 defaults).

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
    /// `*structured*` / row-form tests, `tint-sim/tests/executions.rs`): with exact gates, the linear
    /// modules read `W, b` out of their prefix rows (the rows the constructed keys/values read) and
    /// apply one matmul; the norm and activation backward apply their finite difference directly;
    /// gates are 0/1 row selections.
    Structured,
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
#[derive(Debug, Clone, Copy, PartialEq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivationKind {
    /// GPT-2 `gelu_new`: `0.5 x (1 + tanh(sqrt(2/π)(x + 0.044715 x³)))`.
    GeluNew,
    /// OPT: `max(x, 0)`.
    Relu,
}

/// Options shared by all constructed modules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TintOptions {
    /// Float dtype of every constructed weight (states must use the same dtype). Default: F32.
    pub float_dtype: DType,
    /// Gate evaluation. Default: [`GateMode::Exact`].
    pub gate_mode: GateMode,
    /// Gate logit scale `g10` stored in the gate weights. Default: 10.
    pub gate_scale: f64,
    /// First-order backward. Default: finite differences with `s = 1000`.
    pub derivative: Derivative,
    /// LayerNorm epsilon used inside TinT. Default: 1e-5.
    pub ln_epsilon: f64,
    /// Inner learning rate `η` (on the summed loss). Default: 1e-6.
    pub inner_lr: f64,
    /// Auxiliary activation. Default: [`ActivationKind::GeluNew`].
    pub activation: ActivationKind,
    /// Constructed or structured evaluation. Default: [`Execution::Constructed`].
    pub execution: Execution,
}

impl Default for TintOptions {
    fn default() -> Self {
        Self {
            float_dtype: DType::F32,
            gate_mode: GateMode::Exact,
            gate_scale: 10.0,
            derivative: Derivative::FiniteDifference { scale: 1000.0 },
            ln_epsilon: 1e-5,
            inner_lr: 1e-6,
            activation: ActivationKind::GeluNew,
            execution: Execution::Constructed,
        }
    }
}

impl TintOptions {
    /// Sets [`TintOptions::float_dtype`].
    pub fn with_float_dtype(mut self, dtype: DType) -> Self {
        self.float_dtype = dtype;
        self
    }
    /// Sets [`TintOptions::gate_mode`].
    pub fn with_gate_mode(mut self, mode: GateMode) -> Self {
        self.gate_mode = mode;
        self
    }
    /// Sets [`TintOptions::gate_scale`].
    pub fn with_gate_scale(mut self, scale: f64) -> Self {
        self.gate_scale = scale;
        self
    }
    /// Sets [`TintOptions::derivative`].
    pub fn with_derivative(mut self, derivative: Derivative) -> Self {
        self.derivative = derivative;
        self
    }
    /// Sets [`TintOptions::ln_epsilon`].
    pub fn with_ln_epsilon(mut self, eps: f64) -> Self {
        self.ln_epsilon = eps;
        self
    }
    /// Sets [`TintOptions::inner_lr`].
    pub fn with_inner_lr(mut self, lr: f64) -> Self {
        self.inner_lr = lr;
        self
    }
    /// Sets [`TintOptions::execution`].
    pub fn with_execution(mut self, execution: Execution) -> Self {
        self.execution = execution;
        self
    }
    /// Sets [`TintOptions::activation`].
    pub fn with_activation(mut self, activation: ActivationKind) -> Self {
        self.activation = activation;
        self
    }

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
