//! The rows of a language-modelling run before their step sizes are known: every method × compute
//! budget (× given `eta` value), and where each row's step comes from (none, given, tuned over a
//! grid on the tuning split, or shared with the row that computes the same update).

use crate::lm_grid::{Budget, LmMethodSpec};
use crate::lm_settings::LmRunSettings;
use crate::method::Method;
use crate::run_settings::{check_step_count, check_steps, refuse_repeats};
use crate::tune_record::TuneRecord;
use crate::EvalError;
use tint_sim::Engine;

/// A row of the run before its step size is known.
#[derive(Debug, Clone)]
pub struct PendingRow {
    /// The method, its budget and label.
    pub spec: LmMethodSpec,
    /// Where its step comes from.
    pub step: StepSource,
}

/// Where a row's step size comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum StepSource {
    /// Not an adaptive method.
    None,
    /// Given in the settings (`--lr`, `--inner-lr`).
    Given(TuneRecord),
    /// Tuned over this grid of this parameter.
    Tune {
        /// `eta` or `lr`.
        parameter: &'static str,
        /// The grid.
        grid: Vec<f64>,
    },
    /// The choice of the row with this label (`tint-ref` for `tint` / `tint-structured`).
    Shared(String),
}

/// The rows of `settings`: every method × budget (× given `inner_lr` value).
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] for negative or non-finite step sizes, zero steps, a method,
/// fraction or budget named twice, a bad `sim_layers`, and `tune_tint_via_ref` without `tint-ref`
/// among the methods.
pub fn pending_rows(settings: &LmRunSettings) -> Result<Vec<PendingRow>, EvalError> {
    refuse_repeats("--methods", &settings.methods)?;
    refuse_repeats("--train-fraction", &settings.train_fraction)?;
    refuse_repeats("--budget", &settings.budget)?;
    check_step_count(settings.steps)?;
    if let Some(etas) = &settings.inner_lr {
        check_steps("--inner-lr", etas)?;
    }
    if let Some(lr) = settings.lr {
        check_steps("--lr", &[lr])?;
    }
    let budgets = if settings.budget.is_empty() {
        vec![Budget {
            layers: settings.tint.sim_layer_count()?,
            steps: settings.steps,
        }]
    } else {
        settings.budget.clone()
    };
    let reference = Method::Tint(Engine::Reference);
    let mut rows = Vec::new();
    for &m in &settings.methods {
        let base = LmMethodSpec {
            method: m,
            label: m.name().to_string(),
            eta: 0.0,
            lr: None,
            budget: budgets[0],
        };
        if !m.adapts() {
            rows.push(PendingRow {
                spec: base,
                step: StepSource::None,
            });
            continue;
        }
        // `dyn-eval` is the paper's baseline: every parameter, `--steps` steps, one row whatever
        // the budgets; the other adaptive methods run once per budget.
        let own_budgets = if m == Method::DynEval {
            vec![Budget {
                layers: None,
                steps: settings.steps,
            }]
        } else {
            budgets.clone()
        };
        for budget in &own_budgets {
            let mut spec = base.clone();
            spec.budget = *budget;
            if own_budgets.len() > 1 {
                spec.label += &format!(" {budget}");
            }
            if let (true, Some(lr)) = (m.is_dyn_eval(), settings.lr) {
                spec.lr = Some(lr);
                rows.push(PendingRow {
                    step: StepSource::Given(TuneRecord::given(&spec.label, "lr", lr, "--lr")),
                    spec,
                });
            } else if let Some(etas) = &settings.inner_lr {
                for &eta in etas {
                    let mut spec = spec.clone();
                    spec.eta = eta;
                    if etas.len() > 1 {
                        spec.label += &format!(" eta={eta:e}");
                    }
                    rows.push(PendingRow {
                        step: StepSource::Given(TuneRecord::given(
                            &spec.label,
                            "eta",
                            eta,
                            "--inner-lr",
                        )),
                        spec,
                    });
                }
            } else if settings.tune_tint_via_ref && m.is_tint() && m != reference {
                if !settings.methods.contains(&reference) {
                    return Err(EvalError::InvalidSetting {
                        name: "--tune-tint-via-ref",
                        value: "true".into(),
                        rule: "needs tint-ref among the --methods".into(),
                    });
                }
                let from = spec.label.replacen(m.name(), reference.name(), 1);
                rows.push(PendingRow {
                    spec,
                    step: StepSource::Shared(from),
                });
            } else {
                let parameter = if m.is_dyn_eval() && settings.grid("lr").is_some() {
                    "lr"
                } else {
                    "eta"
                };
                let grid = settings.grid(parameter).unwrap_or_default();
                rows.push(PendingRow {
                    spec,
                    step: StepSource::Tune { parameter, grid },
                });
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::run_settings::parse_tune;

    fn settings(methods: &[&str]) -> LmRunSettings {
        let mut s = LmRunSettings::default_suite(Path::new("/tmp"), false);
        s.methods = methods.iter().map(|m| m.parse().unwrap()).collect();
        s.tune_tint_via_ref = false;
        s
    }

    #[test]
    fn explicit_steps_skip_tuning_and_say_so() {
        let mut a = settings(&["vanilla", "dyn-eval", "tint"]);
        let rows = pending_rows(&a).unwrap();
        assert!(matches!(rows[0].step, StepSource::None));
        assert!(matches!(
            rows[1].step,
            StepSource::Tune {
                parameter: "eta",
                ..
            }
        ));
        a.inner_lr = Some(vec![1e-4]);
        a.lr = Some(1e-2);
        let rows = pending_rows(&a).unwrap();
        for row in &rows[1..] {
            match &row.step {
                StepSource::Given(record) => {
                    assert!(!record.tuned && record.source.contains("not tuned"))
                }
                _ => panic!("an explicit step must not be tuned"),
            }
        }
        assert_eq!(rows[1].spec.lr, Some(1e-2));
        assert_eq!(rows[2].spec.eta, 1e-4);
        a.inner_lr = None;
        a.lr = None;
        a.tune.push(parse_tune("lr=1e-3,1e-2").unwrap());
        let rows = pending_rows(&a).unwrap();
        assert!(matches!(
            rows[1].step,
            StepSource::Tune {
                parameter: "lr",
                ..
            }
        ));
        assert!(matches!(
            rows[2].step,
            StepSource::Tune {
                parameter: "eta",
                ..
            }
        ));
        a.lr = Some(-1.0);
        assert!(pending_rows(&a).is_err(), "a negative --lr is refused");
        let mut via_ref = settings(&["tint", "tint-structured", "tint-ref"]);
        via_ref.tune_tint_via_ref = true;
        let rows = pending_rows(&via_ref).unwrap();
        assert!(matches!(&rows[0].step, StepSource::Shared(from) if from == "tint-ref"));
        assert!(matches!(&rows[1].step, StepSource::Shared(from) if from == "tint-ref"));
        assert!(matches!(rows[2].step, StepSource::Tune { .. }));
        via_ref.methods = vec![Method::Tint(Engine::CONSTRUCTED)];
        assert!(pending_rows(&via_ref).is_err(), "no tint-ref to share from");
    }

    #[test]
    fn budgets_and_eta_lists_name_their_rows() {
        let mut a = settings(&["vanilla", "tint-ref"]);
        a.budget = vec![
            crate::lm_grid::parse_budget("2x1").unwrap(),
            crate::lm_grid::parse_budget("1x2").unwrap(),
        ];
        a.inner_lr = Some(vec![1e-4, 3e-4]);
        let labels: Vec<String> = pending_rows(&a)
            .unwrap()
            .into_iter()
            .map(|r| r.spec.label)
            .collect();
        assert_eq!(
            labels,
            [
                "vanilla",
                "tint-ref 2x1 eta=1e-4",
                "tint-ref 2x1 eta=3e-4",
                "tint-ref 1x2 eta=1e-4",
                "tint-ref 1x2 eta=3e-4"
            ]
        );
    }
}
