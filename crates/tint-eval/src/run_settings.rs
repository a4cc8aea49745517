//! Settings shared by the language-modelling and in-context classification runs: the TinT
//! hyper-parameters ([`TintFlags`]) and the step-size grids tuned on held-out data ([`TuneGrid`]).
//!
//! With the `clap` feature both are command-line arguments (`cargo xtask eval lm`, `eval icl`,
//! `logits --tint`); their documentation is the help text.

use burn::tensor::backend::Backend;
use tint_aux::AuxModel;
use tint_sim::{TintConfig, TintSizes};

use crate::EvalError;

/// TinT hyper-parameters (the name and fields are recorded in resume fingerprints: keep them; a
/// field added later is printed and serialised only when it is set, so that recorded
/// fingerprints and the settings of reports made before it keep their form).
#[derive(Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TintFlags {
    /// TinT width `Ds`. Default: `D (S + 1)` with `S = D / P`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tint_hidden_size: Option<usize>,
    /// Number of prefix tokens `P`. Default: `D / 4` (or `D / 3`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub tint_prefixes: Option<usize>,
    /// Number of TinT softmax heads `Hs`. Default: `Ds / (D / H)`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tint_heads: Option<usize>,
    /// Number of top auxiliary layers that TinT updates: a number or `all`.
    #[cfg_attr(feature = "clap", arg(long, default_value = "all"))]
    pub sim_layers: String,
    /// Reproduce the official code's quirks (MLP output-bias step ×4, unmasked last position).
    #[cfg_attr(feature = "clap", arg(long))]
    pub official_compat: bool,
    /// Exact LayerNorm/activation derivatives instead of finite differences (tint-ref only).
    #[cfg_attr(feature = "clap", arg(long))]
    pub exact_derivatives: bool,
    /// Build separate modules for the final forward pass and for every step (the official
    /// `reuse_*_blocks False`): more parameters, same result.
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_reuse: bool,
    /// Back-propagate through the attention scores as well as the values (`tint-ref` on LLaMA
    /// models only; TinT holds the attention probabilities constant).
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub exact_attention_backward: bool,
}

impl std::fmt::Debug for TintFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("TintFlags");
        out.field("tint_hidden_size", &self.tint_hidden_size)
            .field("tint_prefixes", &self.tint_prefixes)
            .field("tint_heads", &self.tint_heads)
            .field("sim_layers", &self.sim_layers)
            .field("official_compat", &self.official_compat)
            .field("exact_derivatives", &self.exact_derivatives)
            .field("no_reuse", &self.no_reuse);
        if self.exact_attention_backward {
            out.field("exact_attention_backward", &true);
        }
        out.finish()
    }
}

impl Default for TintFlags {
    fn default() -> Self {
        Self {
            tint_hidden_size: None,
            tint_prefixes: None,
            tint_heads: None,
            sim_layers: "all".into(),
            official_compat: false,
            exact_derivatives: false,
            no_reuse: false,
            exact_attention_backward: false,
        }
    }
}

/// Parses a layer count: a number, or `all` (`None`).
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] naming `flag` and the text.
pub fn parse_layers(flag: &'static str, text: &str) -> Result<Option<usize>, EvalError> {
    match text {
        "all" => Ok(None),
        n => n.parse().map(Some).map_err(|_| EvalError::InvalidSetting {
            name: flag,
            value: n.to_string(),
            rule: "expected a number or `all`".into(),
        }),
    }
}

impl TintFlags {
    /// `sim_layers` as a count (`None` = all).
    ///
    /// # Errors
    ///
    /// [`EvalError::InvalidSetting`] when it is neither a number nor `all`.
    pub fn sim_layer_count(&self) -> Result<Option<usize>, EvalError> {
        parse_layers("--sim-layers", &self.sim_layers)
    }

    /// The simulator configuration for `model` with step `inner_lr` and `steps` simulated steps.
    ///
    /// # Errors
    ///
    /// A bad `sim_layers`, and a model the simulator does not support.
    pub fn config<B: Backend>(
        &self,
        model: &AuxModel<B>,
        inner_lr: f64,
        steps: usize,
    ) -> Result<TintConfig, EvalError> {
        if !matches!(model, AuxModel::Llama(_)) {
            // The GPT-2/OPT simulator takes the model's parameters as they are: refused here, up front.
            tint_sim::AuxParams::from_aux(model)?;
        }
        let sizes = TintSizes {
            hidden_size: self.tint_hidden_size,
            num_prefixes: self.tint_prefixes,
            num_heads: self.tint_heads,
        };
        let mut config = TintConfig::sized_for(model.hidden_size(), model.n_heads(), sizes);
        config.step.inner_lr = inner_lr;
        config.step.n_forward_backward = steps;
        config.official_compat = self.official_compat;
        config.reuse_forward_blocks = !self.no_reuse;
        config.reuse_backward_blocks = !self.no_reuse;
        config.restrict_prefixes = true;
        config.step.n_simulation_layers = self.sim_layer_count()?;
        if self.exact_derivatives {
            config.step.derivatives = tint_sim::DerivativeMode::Exact;
        }
        if self.exact_attention_backward {
            config.step.attention_backward = tint_sim::AttentionBackwardMode::Exact;
        }
        Ok(config)
    }
}

/// A step-size grid tuned on held-out data, `NAME=V1,V2,…` on the command line (the name and
/// fields are recorded in resume fingerprints: keep them).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TuneGrid {
    /// `eta` (TinT's step on the summed loss) or `lr` (dynamic evaluation's on the mean loss).
    pub parameter: String,
    /// The values.
    pub values: Vec<f64>,
}

impl TuneGrid {
    /// The grid of `parameter` over `values`.
    pub fn new(parameter: &str, values: &[f64]) -> Self {
        Self {
            parameter: parameter.into(),
            values: values.to_vec(),
        }
    }

    /// The last grid of `parameter` in `grids` (a later flag overrides an earlier one).
    pub fn find(grids: &[TuneGrid], parameter: &str) -> Option<Vec<f64>> {
        grids
            .iter()
            .rev()
            .find(|g| g.parameter == parameter)
            .map(|g| g.values.clone())
    }
}

/// Parses `eta=1e-5,3e-5` or `lr=1e-3,1e-2`.
///
/// # Errors
///
/// A message naming the text, the rule and an example.
pub fn parse_tune(text: &str) -> Result<TuneGrid, String> {
    let bad = |why: &str| format!("--tune {text:?}: {why}; expected e.g. eta=1e-5,3e-5,1e-4,3e-4");
    let (name, list) = text.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let parameter = name.trim().to_string();
    if parameter != "eta" && parameter != "lr" {
        return Err(bad("the parameter is `eta` or `lr`"));
    }
    let values = list
        .split(',')
        .map(|v| v.trim().parse::<f64>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad("a value is not a number"))?;
    if values.is_empty() || values.iter().any(|v| !v.is_finite() || *v <= 0.0) {
        return Err(bad("give positive, finite values"));
    }
    Ok(TuneGrid { parameter, values })
}

/// Checks that `values` (of `flag`) are finite and non-negative step sizes.
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] naming the flag and the values.
pub fn check_steps(flag: &'static str, values: &[f64]) -> Result<(), EvalError> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite() || *v < 0.0) {
        return Err(EvalError::InvalidSetting {
            name: flag,
            value: format!("{values:?}"),
            rule: "give one or more finite, non-negative learning rates".into(),
        });
    }
    Ok(())
}

/// Refuses a list that names a value twice: a repeated method, fraction, budget, task, shot count,
/// seed, format or loss would give duplicate cells, or an interval over one repeated seed.
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] naming the flag and the repeated value as the command line spells
/// it (`Display`).
pub fn refuse_repeats<T: PartialEq + std::fmt::Display>(
    flag: &'static str,
    values: &[T],
) -> Result<(), EvalError> {
    refuse_repeats_shown(flag, values, |v| v.to_string())
}

/// [`refuse_repeats`] with the values written by `show` (e.g. `icl` for the plain model of `eval
/// icl`, which `Display` calls `vanilla`).
///
/// # Errors
///
/// As [`refuse_repeats`].
pub fn refuse_repeats_shown<T: PartialEq>(
    flag: &'static str,
    values: &[T],
    show: impl Fn(&T) -> String,
) -> Result<(), EvalError> {
    match tint_lab::first_repeat(values) {
        Some(v) => Err(EvalError::InvalidSetting {
            name: flag,
            value: format!(
                "{} (in {})",
                show(v),
                values.iter().map(&show).collect::<Vec<_>>().join(",")
            ),
            rule: "name each value once".into(),
        }),
        None => Ok(()),
    }
}

/// Refuses zero SGD / simulated steps (no step: the adapted model would be the unadapted one under
/// another name).
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] naming `--steps`.
pub fn check_step_count(steps: usize) -> Result<(), EvalError> {
    if steps == 0 {
        return Err(EvalError::InvalidSetting {
            name: "--steps",
            value: "0".into(),
            rule: "at least one step (a method without a step is `vanilla` / `icl`)".into(),
        });
    }
    Ok(())
}

/// Checks that a report path ends in `.ext` (so `--out x.md` never receives JSON and a markdown
/// file is never overwritten by a report).
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] naming `--out` and the path.
pub fn check_out_extension(out: &std::path::Path, ext: &str) -> Result<(), EvalError> {
    if out.extension().and_then(|e| e.to_str()) != Some(ext) {
        return Err(EvalError::InvalidSetting {
            name: "--out",
            value: out.display().to_string(),
            rule: if ext == "json" {
                "the report is written as .json (markdown and charts go next to it); give a path \
                 ending in .json"
                    .into()
            } else {
                "give a path with the report's extension".into()
            },
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The later flag enters fingerprints and settings only when set: unset, both keep the form
    /// reports recorded before it; set, both name it.
    #[test]
    fn the_attention_backward_flag_appears_only_when_set() {
        let unset = TintFlags::default();
        let set = TintFlags {
            exact_attention_backward: true,
            ..TintFlags::default()
        };
        let json = |flags: &TintFlags| serde_json::to_string(flags).unwrap();
        assert!(format!("{unset:?}").ends_with("exact_derivatives: false, no_reuse: false }"));
        assert!(!json(&unset).contains("attention"));
        assert!(format!("{set:?}").ends_with("no_reuse: false, exact_attention_backward: true }"));
        assert!(json(&set).contains("\"exact_attention_backward\":true"));
    }

    #[test]
    fn repeated_values_and_zero_steps_are_refused_by_name() {
        assert!(refuse_repeats("--seeds", &[0u64, 1, 2]).is_ok());
        let err = refuse_repeats("--seeds", &[0u64, 1, 0])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--seeds") && err.contains("--seeds = 0 (in 0,1,0)"),
            "{err}"
        );
        assert!(refuse_repeats("--train-fraction", &[0.5, 0.5]).is_err());
        assert!(check_step_count(1).is_ok());
        let err = check_step_count(0).unwrap_err().to_string();
        assert!(err.contains("--steps"), "{err}");
    }

    #[test]
    fn tune_grids_parse() {
        assert_eq!(
            parse_tune("eta=1e-5,3e-5").unwrap(),
            TuneGrid::new("eta", &[1e-5, 3e-5])
        );
        for bad in ["eta", "mu=1", "eta=", "eta=a", "lr=-1", "eta=1,inf"] {
            assert!(parse_tune(bad).is_err(), "{bad:?} must be refused");
        }
        let grids = [TuneGrid::new("lr", &[1.0]), TuneGrid::new("lr", &[2.0])];
        assert_eq!(TuneGrid::find(&grids, "lr"), Some(vec![2.0]));
        assert_eq!(TuneGrid::find(&grids, "eta"), None);
    }

    #[test]
    fn layers_steps_and_out_paths_are_checked() {
        assert_eq!(parse_layers("--sim-layers", "all").unwrap(), None);
        assert_eq!(parse_layers("--sim-layers", "2").unwrap(), Some(2));
        let err = parse_layers("--sim-layers", "two").unwrap_err().to_string();
        assert!(err.contains("--sim-layers") && err.contains("two"), "{err}");
        assert!(check_steps("--lr", &[0.0, 1e-3]).is_ok());
        for bad in [&[][..], &[-1.0], &[f64::NAN]] {
            assert!(check_steps("--lr", bad).is_err(), "{bad:?}");
        }
        assert!(check_out_extension(std::path::Path::new("r/lm.json"), "json").is_ok());
        for bad in ["x.md", "x", "x.json.md", "x.svg"] {
            let err = check_out_extension(std::path::Path::new(bad), "json")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("--out") && err.contains(bad) && err.contains(".json"),
                "{err}"
            );
        }
    }
}
