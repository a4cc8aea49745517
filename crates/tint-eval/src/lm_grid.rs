//! The methods of a language-modelling run ([`Method`]), with their step size and compute budget:
//! `vanilla`, `dyn-eval`, and the TinT methods of [`tint_sim::Engine`]: `tint` (the constructed
//! simulator), `tint-structured` (the same simulator in its proven-equal structured execution) and
//! `tint-ref` (the functional reference).

use serde::{Deserialize, Serialize};
use tint_aux::{AuxModel, SgdGradient};
use tint_sim::{Engine, StepDirection, TintConfig};

use burn::tensor::backend::AutodiffBackend;

use crate::by_fraction::ByTrainLen;
use crate::lm::LmMethod;
use crate::method::Method;
use crate::methods::{DynEval, Labelled, Tint, UnadaptedNlls, Vanilla};
use crate::step_reuse::StepReuse;
use crate::EvalError;

/// A compute budget of the adaptive methods: the top `layers` blocks (`None` = all) for `steps`
/// steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// Updated (simulated) top layers; `None` = every layer.
    pub layers: Option<usize>,
    /// Steps on the training part.
    pub steps: usize,
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.layers {
            Some(l) => write!(f, "{l}x{}", self.steps),
            None => write!(f, "allx{}", self.steps),
        }
    }
}

/// Parses `LAYERSxSTEPS` (`12x1`, `allx2`; `×` also accepted).
///
/// # Errors
///
/// A message naming the text and the expected form.
pub fn parse_budget(text: &str) -> Result<Budget, String> {
    let bad = || format!("budget {text:?}: expected LAYERSxSTEPS, e.g. 12x1, 6x2 or allx1");
    let (layers, steps) = text.trim().split_once(['x', 'X', '×']).ok_or_else(bad)?;
    let layers = match layers.trim() {
        "all" => None,
        n => Some(n.parse::<usize>().map_err(|_| bad())?),
    };
    let steps: usize = steps.trim().parse().map_err(|_| bad())?;
    if steps == 0 || layers == Some(0) {
        return Err(format!(
            "budget {text:?}: layers and steps must be at least 1"
        ));
    }
    Ok(Budget { layers, steps })
}

/// One row of a run: a method, its step and budget, and its name in reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LmMethodSpec {
    /// The method.
    pub method: Method,
    /// Name in reports (the method, plus the grid point or budget when there are several).
    pub label: String,
    /// TinT's step on the SUMMED loss (dynamic evaluation's matched step when `lr` is `None`).
    pub eta: f64,
    /// Dynamic evaluation's step on the MEAN loss; `None` = matched, `eta × (train tokens − 1)`.
    pub lr: Option<f64>,
    /// Top layers and steps (`dyn-eval` on every parameter: all layers, `--steps`).
    pub budget: Budget,
}

/// Builds the method of `spec`: `model` is the trainable model (dynamic evaluation), `inference` its
/// inference copy, `tint` the simulator configuration whose step, steps and simulated layers are
/// replaced by the spec's.
///
/// With `first_pass`, `vanilla` reads its NLLs from that cache and `tint-ref` fills it with its
/// first pass ([`Tint::recording_first_pass`]; `--vanilla-from-ref`).
///
/// # Errors
///
/// Construction errors of the simulator.
pub fn build_lm_method<'a, AB: AutodiffBackend>(
    spec: &LmMethodSpec,
    model: &'a AuxModel<AB>,
    inference: &'a AuxModel<AB::InnerBackend>,
    tint: &TintConfig,
    first_pass: Option<&UnadaptedNlls>,
) -> Result<Box<dyn LmMethod + 'a>, EvalError> {
    let method: Box<dyn LmMethod + 'a> = match spec.method {
        Method::Vanilla => match first_pass {
            Some(cache) => Box::new(Vanilla::with_cache(inference, cache.clone())),
            None => Box::new(Vanilla::new(inference)),
        },
        Method::DynEval | Method::DynEvalMatched => Box::new(dyn_eval_of(spec, model)),
        Method::Tint(method) => {
            let tint = Tint::for_method(inference, tint_config_of(spec, tint), method)?;
            match first_pass {
                Some(cache) if method == Engine::Reference => {
                    Box::new(tint.recording_first_pass(cache.clone()))
                }
                _ => Box::new(tint),
            }
        }
    };
    Ok(Box::new(Labelled {
        label: spec.label.clone(),
        method,
    }))
}

/// `tint` with the step, steps and simulated layers of a TinT spec.
fn tint_config_of(spec: &LmMethodSpec, tint: &TintConfig) -> TintConfig {
    let mut config = tint.clone();
    config.step.inner_lr = spec.eta;
    config.step.n_forward_backward = spec.budget.steps;
    config.step.n_simulation_layers = spec.budget.layers;
    config
}

/// The dynamic evaluation of a `dyn-eval` or `dyn-eval-matched` spec.
fn dyn_eval_of<'a, AB: AutodiffBackend>(
    spec: &LmMethodSpec,
    model: &'a AuxModel<AB>,
) -> DynEval<'a, AB> {
    DynEval {
        model,
        lr: spec.lr,
        inner_lr: spec.eta,
        steps: spec.budget.steps,
        top_layers: spec.budget.layers,
        tint_params_only: spec.method == Method::DynEvalMatched,
    }
}

/// Whether the methods [`build_tuning_method`] builds for the step sizes of one grid share each
/// block's gradient (dynamic evaluation with one step) or descent direction (TinT's functional
/// reference with one step, where its engine gives directions), so that tuning scores the grid
/// block by block ([`crate::lm_tune::tune_lm`]; the same record in either order).
pub fn shares_gradients(spec: &LmMethodSpec) -> bool {
    matches!(
        spec.method,
        Method::DynEval | Method::DynEvalMatched | Method::Tint(Engine::Reference)
    ) && spec.budget.steps == 1
}

/// What the methods of one tuning grid share: each block's dynamic-evaluation gradient and
/// TinT descent direction ([`crate::step_reuse`]).
pub struct TuningReuse<AB: AutodiffBackend> {
    /// Dynamic evaluation's gradients.
    pub gradients: StepReuse<SgdGradient<AB>>,
    /// The functional reference's descent directions.
    pub directions: StepReuse<dyn StepDirection<AB::InnerBackend>>,
}

impl<AB: AutodiffBackend> Default for TuningReuse<AB> {
    /// The last block's gradient and direction.
    fn default() -> Self {
        Self {
            gradients: StepReuse::default(),
            directions: StepReuse::default(),
        }
    }
}

/// [`build_lm_method`] for a value of a tuning grid: where [`shares_gradients`], dynamic
/// evaluation that keeps each block's gradient in `reuse` for the grid's other values
/// ([`DynEval::sharing_gradients`]) or the functional reference that keeps each block's descent
/// direction there ([`Tint::sharing_directions`]; both the same NLLs); otherwise the method
/// itself.
///
/// # Errors
///
/// Those of [`build_lm_method`].
pub fn build_tuning_method<'a, AB: AutodiffBackend>(
    spec: &LmMethodSpec,
    model: &'a AuxModel<AB>,
    inference: &'a AuxModel<AB::InnerBackend>,
    tint: &TintConfig,
    reuse: &TuningReuse<AB>,
) -> Result<Box<dyn LmMethod + 'a>, EvalError> {
    if !shares_gradients(spec) {
        return build_lm_method(spec, model, inference, tint, None);
    }
    let label = spec.label.clone();
    if let Method::Tint(engine) = spec.method {
        let method = Tint::for_method(inference, tint_config_of(spec, tint), engine)?;
        let method: Box<dyn LmMethod + 'a> =
            match method.sharing_directions(reuse.directions.clone()) {
                Ok(method) => Box::new(Labelled { label, method }),
                Err(method) => Box::new(Labelled { label, method }),
            };
        return Ok(method);
    }
    Ok(Box::new(Labelled {
        label,
        method: dyn_eval_of(spec, model).sharing_gradients(reuse.gradients.clone()),
    }))
}

/// What an LM tuning is computed from, as the SHA-256 (hex) of [`crate::lm::cell_inputs_sha256`]
/// over: the row (its label, method and budget, the tuned parameter's value left out), the tuned
/// parameter, the given grid and how many extensions [`crate::lm_tune::bracket`] may add, a TinT
/// row's TinT configuration (its sizes and step settings; a dynamic-evaluation row does not read
/// it), the train fraction and the tuning blocks' tokens. Recorded in
/// [`crate::tune_record::TuneRecord::inputs_sha256`] so that `--cells-from` takes another report's
/// tuning only for the same computation ([`crate::lm_donors`]). The model, text and code are the
/// donor report's checks.
#[allow(clippy::too_many_arguments)]
pub fn tuning_inputs_sha256(
    spec: &LmMethodSpec,
    parameter: &str,
    grid: &[f64],
    max_extensions: usize,
    tint: &TintConfig,
    train_fraction: f64,
    block_size: usize,
    tune_blocks: &[Vec<u32>],
) -> String {
    let mut row = spec.clone();
    if parameter == "lr" {
        row.lr = None;
    } else {
        row.eta = 0.0;
    }
    let what = serde_json::json!({
        "tuning": parameter,
        "grid": grid,
        "max_extensions": max_extensions,
        "row": row,
        "tint": matches!(spec.method, Method::Tint(_)).then_some(tint),
    });
    crate::lm::cell_inputs_sha256(&what.to_string(), train_fraction, block_size, tune_blocks)
}

/// A row of a run with its spec at every evaluated train fraction: the same spec everywhere, or
/// the step tuned for each fraction (`--tune-per-fraction`).
#[derive(Debug, Clone, PartialEq)]
pub struct RowPlan {
    /// `(train fraction, training tokens of a block, spec)`, in the order of the fractions.
    pub per_fraction: Vec<(f64, usize, LmMethodSpec)>,
}

impl RowPlan {
    /// The plan of `spec` at `fractions` of blocks of `block_size` tokens: `chosen` holds the step
    /// of `parameter` (`eta` or `lr`) tuned at each tuning fraction; empty: `spec`'s own step
    /// everywhere; one value: that step everywhere; several: each fraction takes the one tuned at
    /// it (a fraction without one keeps `spec`'s step, which the caller never lets happen).
    pub fn new(
        spec: LmMethodSpec,
        fractions: &[f64],
        chosen: &[(f64, f64)],
        parameter: &str,
        block_size: usize,
    ) -> Self {
        let per_fraction = fractions
            .iter()
            .map(|&f| {
                let step = match chosen {
                    [] => None,
                    [(_, only)] => Some(*only),
                    many => many
                        .iter()
                        .find(|(tf, _)| (tf - f).abs() < 1e-12)
                        .map(|(_, v)| *v),
                };
                let mut s = spec.clone();
                match (step, parameter) {
                    (Some(v), "lr") => s.lr = Some(v),
                    (Some(v), _) => s.eta = v,
                    (None, _) => {}
                }
                let train_len = crate::blocks::BlockSpec {
                    block_size,
                    train_fraction: f,
                    max_blocks: 1,
                }
                .train_len();
                (f, train_len, s)
            })
            .collect();
        Self { per_fraction }
    }

    /// The row's method.
    pub fn method(&self) -> Method {
        self.per_fraction[0].2.method
    }

    /// The row's name in reports.
    pub fn label(&self) -> &str {
        &self.per_fraction[0].2.label
    }

    /// Builds the row ([`build_lm_method`]): one method when every fraction has the same spec,
    /// else one per training length behind [`ByTrainLen`].
    ///
    /// # Errors
    ///
    /// Those of [`build_lm_method`].
    pub fn build<'a, AB: AutodiffBackend>(
        &self,
        model: &'a AuxModel<AB>,
        inference: &'a AuxModel<AB::InnerBackend>,
        tint: &TintConfig,
        first_pass: Option<&UnadaptedNlls>,
    ) -> Result<Box<dyn LmMethod + 'a>, EvalError> {
        let first = &self.per_fraction[0].2;
        if self.per_fraction.iter().all(|(_, _, s)| s == first) {
            return build_lm_method(first, model, inference, tint, first_pass);
        }
        let methods = self
            .per_fraction
            .iter()
            .map(|(_, train_len, s)| {
                build_lm_method(s, model, inference, tint, first_pass).map(|m| (*train_len, m))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Box::new(ByTrainLen {
            name: first.label.clone(),
            methods,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tuning_digest_moves_with_what_the_tuning_computes_and_only_a_tint_row_reads_the_tint_config(
    ) {
        let spec = |method: Method| LmMethodSpec {
            method,
            label: method.to_string(),
            eta: 1e-4,
            lr: None,
            budget: Budget {
                layers: None,
                steps: 1,
            },
        };
        let tint = TintConfig::for_model(576, 144, 64);
        let mut exact = tint.clone();
        exact.step.derivatives = tint_sim::DerivativeMode::Exact;
        let blocks = vec![vec![1_u32, 2, 3, 4]];
        let grid = [1e-4, 1e-3];
        for method in [Method::DynEvalMatched, Method::Tint(Engine::Reference)] {
            let digest = |s: &LmMethodSpec,
                          g: &[f64],
                          ext: usize,
                          t: &TintConfig,
                          f: f64,
                          b: &[Vec<u32>]| {
                tuning_inputs_sha256(s, "eta", g, ext, t, f, 4, b)
            };
            let base = digest(&spec(method), &grid, 3, &tint, 0.5, &blocks);
            let mut other_eta = spec(method);
            other_eta.eta = 3e-4;
            assert_eq!(
                base,
                digest(&other_eta, &grid, 3, &tint, 0.5, &blocks),
                "the tuned value is left out"
            );
            let mut two_steps = spec(method);
            two_steps.budget.steps = 2;
            let mut relabelled = spec(method);
            relabelled.label = "x 15x2".into();
            for (what, other) in [
                ("budget", digest(&two_steps, &grid, 3, &tint, 0.5, &blocks)),
                ("label", digest(&relabelled, &grid, 3, &tint, 0.5, &blocks)),
                (
                    "grid",
                    digest(&spec(method), &[1e-4, 1e-2], 3, &tint, 0.5, &blocks),
                ),
                (
                    "extensions",
                    digest(&spec(method), &grid, 0, &tint, 0.5, &blocks),
                ),
                (
                    "fraction",
                    digest(&spec(method), &grid, 3, &tint, 0.3, &blocks),
                ),
                (
                    "blocks",
                    digest(&spec(method), &grid, 3, &tint, 0.5, &[vec![1, 2, 3, 5]]),
                ),
            ] {
                assert_ne!(base, other, "{method}: {what}");
            }
            assert_ne!(
                base,
                tuning_inputs_sha256(&spec(method), "lr", &grid, 3, &tint, 0.5, 4, &blocks),
                "{method}: parameter"
            );
            let with_exact = digest(&spec(method), &grid, 3, &exact, 0.5, &blocks);
            assert_eq!(
                base == with_exact,
                method == Method::DynEvalMatched,
                "{method}: only a TinT row reads the TinT configuration"
            );
        }
    }

    #[test]
    fn budgets_parse_and_print() {
        assert_eq!(
            parse_budget("12x1").unwrap(),
            Budget {
                layers: Some(12),
                steps: 1
            }
        );
        assert_eq!(
            parse_budget("all×2").unwrap(),
            Budget {
                layers: None,
                steps: 2
            }
        );
        assert_eq!(parse_budget(" 3X4 ").unwrap().to_string(), "3x4");
        for bad in ["12", "x1", "ax1", "0x1", "3x0", "3x-1"] {
            assert!(parse_budget(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn a_row_plan_puts_each_fractions_tuned_step_at_its_training_length() {
        let spec = LmMethodSpec {
            method: Method::DynEvalMatched,
            label: "dyn-eval-matched".into(),
            eta: 0.0,
            lr: None,
            budget: Budget {
                layers: None,
                steps: 1,
            },
        };
        let fractions = [0.3, 0.5];
        let per = RowPlan::new(
            spec.clone(),
            &fractions,
            &[(0.3, 1e-4), (0.5, 3e-5)],
            "eta",
            256,
        );
        let steps: Vec<(usize, f64)> = per
            .per_fraction
            .iter()
            .map(|(_, t, s)| (*t, s.eta))
            .collect();
        assert_eq!(steps, [(76, 1e-4), (128, 3e-5)]);
        let one = RowPlan::new(spec.clone(), &fractions, &[(0.5, 3e-5)], "lr", 256);
        assert!(one
            .per_fraction
            .iter()
            .all(|(_, _, s)| s.lr == Some(3e-5) && s.eta == 0.0));
        let none = RowPlan::new(spec, &fractions, &[], "eta", 256);
        assert!(none.per_fraction.iter().all(|(_, _, s)| s.eta == 0.0));
        assert_eq!(none.label(), "dyn-eval-matched");
        assert_eq!(none.method(), Method::DynEvalMatched);
    }
}
