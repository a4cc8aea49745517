//! The TinT hyper-parameters ([`TintConfig`]) and their validation against an auxiliary model.

use serde::{Deserialize, Serialize};
/// The largest `P + T` a construction takes (docs/construction.md §1.2 rule 6: the official code's
/// causal-mask buffer).
pub use tint_ops::dims::MAX_POSITION_EMBEDDINGS;
pub use tint_ops::{Execution, GateMode};

use crate::error::SimError;
use crate::params::{AuxDims, AuxParams};
pub use crate::step_config::{AttentionBackwardMode, DerivativeMode, LossGradientKind, StepConfig};

/// Hyper-parameters of a TinT simulator (names follow docs/construction.md §1.1).
///
/// Defaults follow the official code except `hidden_size`, `num_prefixes` and `num_heads`, which
/// must always be chosen for the auxiliary model (see [`TintConfig::for_model`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TintConfig {
    /// TinT width `Ds`; the README rule is `Ds = D (S + 1)` with `S = D / P`.
    pub hidden_size: usize,
    /// Number of prefix tokens `P`.
    pub num_prefixes: usize,
    /// Number of heads `Hs` of TinT's softmax modules (head size `Ds / Hs`).
    pub num_heads: usize,
    /// What the simulated step does (layers, steps, `η`, `s`, loss gradient, derivatives), shared
    /// with the LLaMA configurations; flattened in JSON (the keys stay top-level).
    #[serde(flatten)]
    pub step: StepConfig,
    /// LayerNorm epsilon used by TinT (also by the functional reference). Default: 1e-5.
    pub epsilon: f64,
    /// The final forward pass reuses the first-pass forward modules (fewer parameters, same result).
    pub reuse_forward_blocks: bool,
    /// Steps 2.. reuse the step-1 backward modules (fewer parameters, same result).
    pub reuse_backward_blocks: bool,
    /// Linear attention only between token queries and prefix keys (a speed-up, same result). Kept for
    /// the official interface and the JSON config: tint-ops always computes the restricted form.
    pub restrict_prefixes: bool,
    /// Reproduce the official code's quirks (docs/construction.md §12 bugs 1 and 2): the MLP output bias takes
    /// a step of `(n_inner / D) * eta`, and the loss gradient at the last position is not masked.
    /// Off by default (the paper's math).
    pub official_compat: bool,
    /// How the simulator evaluates its constructed network. Default: [`Execution::Constructed`]
    /// (every module from its stored weights); [`Execution::Structured`] is the proven-equal
    /// shortcut (docs/construction.md §15, "Executions").
    #[serde(default)]
    pub execution: Execution,
    /// Gate evaluation: [`GateMode::Exact`] (default, the hard limit of the stored gates) or the
    /// official [`GateMode::Tanh`] form.
    #[serde(default)]
    pub gate_mode: GateMode,
    /// Gate logit scale `g10` stored in the gate weights. Default: 10 (the official value).
    #[serde(default = "default_gate_scale")]
    pub gate_scale: f64,
}

/// The official gate logit scale `g10`.
pub const DEFAULT_GATE_SCALE: f64 = 10.0;

fn default_gate_scale() -> f64 {
    DEFAULT_GATE_SCALE
}

/// Prefix blocks per auxiliary layer with `n_chunks` MLP chunks: ln_1, Q, K, V, attention c_proj,
/// ln_2, then (c_fc chunk, activation, c_proj chunk) per chunk (docs/construction.md §5.1).
pub fn blocks_per_layer(n_chunks: usize) -> usize {
    6 + 3 * n_chunks
}

/// The TinT sizes a caller sets explicitly; `None` takes the rule of [`TintConfig::sized_for`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TintSizes {
    /// TinT width `Ds` (the heads then keep the auxiliary head size unless `num_heads` is set).
    pub hidden_size: Option<usize>,
    /// Prefix rows `P`.
    pub num_prefixes: Option<usize>,
    /// Softmax heads `Hs`.
    pub num_heads: Option<usize>,
}

impl TintConfig {
    /// The sizing rule of every engine and front end, for an auxiliary model of width `d_model` with
    /// `n_heads` heads: `S` = 4 weight rows per prefix (3 when 4 does not divide `D`), `P = D / S`
    /// prefixes, `Ds = D (D / P + 1)`, and softmax heads of the auxiliary head size
    /// (`Hs = Ds / (D / H)`), which satisfy every constraint of docs/construction.md §1.2. Explicit
    /// `sizes` replace the rule's values; every other field at its default ([`TintConfig::for_model`]).
    pub fn sized_for(d_model: usize, n_heads: usize, sizes: TintSizes) -> Self {
        let stack = if d_model.is_multiple_of(4) { 4 } else { 3 };
        let num_prefixes = sizes.num_prefixes.unwrap_or(d_model / stack);
        let head_size = d_model / n_heads.max(1);
        let mut config = Self::for_model(d_model, num_prefixes, head_size);
        if let Some(ds) = sizes.hidden_size {
            config.hidden_size = ds;
            config.num_heads = ds / head_size.max(1);
        }
        if let Some(hs) = sizes.num_heads {
            config.num_heads = hs;
        }
        config
    }

    /// The README setting for an auxiliary model of width `d_model`: `P` prefixes, `Ds = D (D/P + 1)`,
    /// `Hs = Ds / head_size` heads with the given softmax head size; every other field at its default.
    pub fn for_model(d_model: usize, num_prefixes: usize, head_size: usize) -> Self {
        let stack = d_model / num_prefixes.max(1);
        let hidden_size = d_model * (stack + 1);
        Self {
            hidden_size,
            num_prefixes,
            num_heads: hidden_size / head_size.max(1),
            step: StepConfig::default(),
            epsilon: 1e-5,
            reuse_forward_blocks: false,
            reuse_backward_blocks: false,
            restrict_prefixes: false,
            official_compat: false,
            execution: Execution::Constructed,
            gate_mode: GateMode::Exact,
            gate_scale: DEFAULT_GATE_SCALE,
        }
    }

    /// Number of updated layers for an auxiliary model with `n_layers` layers.
    pub fn simulated_layers(&self, n_layers: usize) -> usize {
        self.step.simulated_layers(n_layers)
    }

    /// Checks the hyper-parameters that the functional reference needs (finite, positive values).
    pub fn validate_reference(&self, n_layers: usize) -> Result<(), SimError> {
        self.step.validate(n_layers)?;
        if self.step.attention_backward == AttentionBackwardMode::Exact {
            return Err(SimError::invalid_config(
                "attention_backward",
                "exact",
                "is implemented by the LLaMA functional reference only (GPT-2/OPT engines and the \
                 constructed networks back-propagate through the attention values only)",
            ));
        }
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return Err(SimError::invalid_config(
                "epsilon",
                self.epsilon,
                "must be finite and > 0",
            ));
        }
        if !(self.gate_scale.is_finite() && self.gate_scale > 0.0) {
            return Err(SimError::invalid_config(
                "gate_scale",
                self.gate_scale,
                "must be finite and > 0",
            ));
        }
        Ok(())
    }

    /// Checks every construction constraint of docs/construction.md §1.2 for the given auxiliary model.
    pub fn validate<B: burn::tensor::backend::Backend>(
        &self,
        aux: &AuxParams<B>,
    ) -> Result<(), SimError> {
        let dims = aux.dims();
        self.validate_reference(dims.n_layers)?;
        let (d, p, ds, hs) = (
            dims.d_model,
            self.num_prefixes,
            self.hidden_size,
            self.num_heads,
        );
        if p == 0 || !d.is_multiple_of(p) {
            return Err(SimError::invalid_config(
                "num_prefixes P",
                p,
                format!("must divide the model width D = {d}"),
            ));
        }
        let stack = d / p;
        if !ds.is_multiple_of(p) || ds < d * (stack + 1) {
            return Err(SimError::invalid_config(
                "hidden_size Ds",
                ds,
                format!(
                    "must be a multiple of P = {p} and at least D (D/P + 1) = {}",
                    d * (stack + 1)
                ),
            ));
        }
        if ds < 4 * d {
            return Err(SimError::invalid_config(
                "hidden_size Ds",
                ds,
                format!("must be at least 4 D = {} (memory layout)", 4 * d),
            ));
        }
        if hs == 0 || !ds.is_multiple_of(hs) {
            return Err(SimError::invalid_config(
                "num_heads Hs",
                hs,
                format!("must divide hidden_size Ds = {ds}"),
            ));
        }
        let head = ds / hs;
        if !d.is_multiple_of(head) {
            return Err(SimError::invalid_config(
                "num_heads Hs",
                hs,
                format!("makes the softmax head size Ds/Hs = {head}, which must divide D = {d}"),
            ));
        }
        let npart = d / head;
        if !dims.n_heads.is_multiple_of(npart) || dims.n_heads > hs {
            return Err(SimError::invalid_config(
                "num_heads Hs",
                hs,
                format!(
                    "must be at least the auxiliary heads H = {}, and H must be a multiple of \
                     D/(Ds/Hs) = {npart}",
                    dims.n_heads
                ),
            ));
        }
        check_mlp_width(&dims)?;
        check_memory(
            self.simulated_layers(dims.n_layers),
            blocks_per_layer(dims.d_inner / d),
            d,
            p,
            ds,
        )
    }
}

/// Refuses an auxiliary MLP whose inner size is not a multiple of `D` (the simulator splits it into
/// `d_inner / D` chunks of width `D`), or `D = 0`.
pub(crate) fn check_mlp_width(dims: &AuxDims) -> Result<(), SimError> {
    if dims.d_model == 0 || !dims.d_inner.is_multiple_of(dims.d_model) {
        return Err(SimError::UnsupportedModel(format!(
            "the MLP inner size {} must be a multiple of D = {}",
            dims.d_inner, dims.d_model
        )));
    }
    Ok(())
}

/// Refuses sizes whose simulator cannot fit in this machine's memory, before anything is allocated.
///
/// Lower bound counted (float32): per simulated layer, the prefix rows (`blocks · P · Ds`) and one
/// `Ds² / D` term of the official parameter count (docs/reliability.md); compared with `MemTotal` of
/// `/proc/meminfo` (no limit where it cannot be read, except for sizes overflowing 64 bits).
fn check_memory(
    layers: usize,
    blocks: usize,
    d: usize,
    p: usize,
    ds: usize,
) -> Result<(), SimError> {
    let [layers, blocks, d, p, ds] = [layers, blocks, d, p, ds].map(|v| v as u64);
    let needed = blocks
        .checked_mul(p)
        .and_then(|v| v.checked_mul(ds))
        .and_then(|v| v.checked_add(ds.checked_mul(ds)? / d.max(1)))
        .and_then(|v| v.checked_mul(layers.max(1)))
        .and_then(|v| v.checked_mul(4));
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        });
    match (needed, total) {
        (Some(needed), Some(total)) if needed > total => Err(SimError::invalid_config(
            "hidden_size Ds",
            ds,
            format!(
                "needs at least {needed} bytes ({:.1} GiB) for the simulator's weights, more than \
                 this machine's {total} bytes of memory",
                needed as f64 / (1u64 << 30) as f64
            ),
        )),
        (None, _) => Err(SimError::invalid_config(
            "hidden_size Ds",
            ds,
            "makes the simulator's memory overflow a 64-bit byte count",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod memory_tests {
    use super::check_memory;

    #[test]
    fn huge_hidden_sizes_are_refused_with_the_memory_they_need() {
        // GPT-2 small sizes (12 layers, D = 768, P = 4): Ds = 3072 fits any machine.
        check_memory(12, 8, 768, 4, 3072).unwrap();
        // Ds = 2^40: Ds² overflows 64 bits.
        let err = check_memory(12, 8, 768, 4, 1 << 40).unwrap_err();
        assert!(
            err.to_string().contains("overflow a 64-bit byte count"),
            "{err}"
        );
        // Ds = 10^8: 4 · 12 · (8 · 4 · 10^8 + 10^16 / 768) bytes ≈ 569 TiB, beyond any MemTotal.
        if std::path::Path::new("/proc/meminfo").exists() {
            let err = check_memory(12, 8, 768, 4, 100_000_000).unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains("needs at least 625153599999984 bytes"),
                "{text}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llama::{LlamaSimulatorConfig, LlamaTintConfig};

    /// The one sizing rule: SmolLM2 (D 576, 9 heads) gets the sizes the bench reports, a width
    /// that 4 does not divide stacks 3 rows, explicit sizes win, and the LLaMA simulator's
    /// sizes are the same rule's.
    #[test]
    fn the_sizing_rule_is_one_and_explicit_sizes_replace_it() {
        let sizes = |c: &TintConfig| (c.hidden_size, c.num_prefixes, c.num_heads);
        let smollm2 = TintConfig::sized_for(576, 9, TintSizes::default());
        assert_eq!(sizes(&smollm2), (2880, 144, 45));
        assert_eq!(
            sizes(&TintConfig::sized_for(64, 4, TintSizes::default())),
            (320, 16, 20)
        );
        assert_eq!(
            sizes(&TintConfig::sized_for(30, 3, TintSizes::default())),
            (120, 10, 12)
        );
        let explicit = TintSizes {
            hidden_size: Some(640),
            num_prefixes: Some(32),
            num_heads: None,
        };
        // Ds 640 with the auxiliary head size 128 / 4 = 32: 20 heads.
        assert_eq!(
            sizes(&TintConfig::sized_for(128, 4, explicit)),
            (640, 32, 20)
        );
        let heads = TintSizes {
            num_heads: Some(5),
            ..explicit
        };
        assert_eq!(sizes(&TintConfig::sized_for(128, 4, heads)).2, 5);
        let llama = LlamaSimulatorConfig::for_model(576, 9, LlamaTintConfig::default());
        assert_eq!(
            (llama.hidden_size, llama.num_prefixes, llama.num_heads),
            sizes(&smollm2)
        );
    }
}
