//! Step-size selection for in-context classification on a development set carved from the
//! demonstration pool ([`super::TaskData::carve_dev`]): never on the evaluated examples.

use super::method::IclMethod;
use super::prompt::PromptEncoder;
use super::result::CellResult;
use super::runner::{non_finite_origin, run_icl_cell, IclProgress, IclSettings};
use super::task::TaskData;
use crate::lm_tune::{bracket, check_grid};
use crate::tune_record::TuneRecord;
use crate::EvalError;

/// Mean over a cell's predictions of the gold label's negative log-probability among the label
/// words (`−log softmax(scores)[gold]`, uncalibrated): a continuous dev objective (accuracy on a
/// small dev set ties too often to choose a step size).
pub fn dev_label_nll(cell: &CellResult) -> f64 {
    let mut total = 0.0;
    let mut n = 0usize;
    for p in cell.runs.iter().flat_map(|r| &r.predictions) {
        let max = p.scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let log_z = max + p.scores.iter().map(|s| (s - max).exp()).sum::<f64>().ln();
        total += log_z - p.scores[p.label];
        n += 1;
    }
    total / n.max(1) as f64
}

/// Chooses `parameter` of `method` from `grid` on the dev data: each value builds a method with
/// `make`, which classifies the dev examples with `settings` (demonstrations drawn from the dev
/// data's pool); the value with the lowest [`dev_label_nll`] wins, and a best value on an edge of
/// the grid extends it past that edge ([`bracket`], at most `max_extensions` values). A value whose
/// scores are not finite (a diverging step) is a grid outcome, never chosen. `progress` sees
/// `(done, total)` over the given grid's values (`total` grows by one value's examples when the
/// grid is extended).
///
/// # Errors
///
/// A grid that [`crate::lm_tune::check_grid`] refuses, errors of the runs, a grid on which no
/// value gives a finite objective (the first [`crate::EvalError::NonFinite`] of the grid when
/// there is one, so the error says where the non-finite value appeared), and a best value still
/// on an edge after the extensions ([`EvalError::Unbracketed`]).
#[allow(clippy::too_many_arguments)]
pub fn tune_icl<'a>(
    method: &str,
    parameter: &str,
    grid: &[f64],
    max_extensions: usize,
    encoder: &PromptEncoder<'_>,
    dev: &TaskData,
    settings: &IclSettings,
    make: &mut dyn FnMut(f64) -> Result<Box<dyn IclMethod + 'a>, EvalError>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<TuneRecord, EvalError> {
    check_grid(grid)?;
    let per_value = settings.seeds.len().max(1) * dev.test.len();
    let mut total = grid.len() * per_value;
    // Non-finite values are errors here (with their origin), whatever the evaluation records.
    let settings = &IclSettings {
        allow_non_finite: false,
        ..settings.clone()
    };
    let mut first_non_finite = None;
    let mut scored = 0usize;
    let mut score = |value: f64| -> Result<f64, EvalError> {
        if scored >= grid.len() {
            total += per_value;
        }
        let start = scored * per_value;
        scored += 1;
        let mut m = make(value)?;
        let cell = run_icl_cell(m.as_mut(), encoder, dev, settings, &mut |p: IclProgress| {
            progress(start + p.done, total)
        });
        // A diverging step is a grid outcome, not an error.
        match cell {
            Ok(cell) => Ok(dev_label_nll(&cell)),
            Err(e) if non_finite_origin(&e).is_some() => {
                first_non_finite.get_or_insert(e);
                Ok(f64::NAN)
            }
            Err(e) => Err(e),
        }
    };
    let result = bracket(method, parameter, grid, max_extensions, &mut score);
    // Every value diverged: the first non-finite value says where (e.g. the weights).
    let bracketed = result.map_err(|e| match (e, first_non_finite.take()) {
        (EvalError::InvalidSetting { .. }, Some(first)) => first,
        (e, _) => e,
    })?;
    Ok(TuneRecord {
        method: method.into(),
        parameter: parameter.into(),
        choice: bracketed.grid[bracketed.best],
        grid: bracketed.grid,
        scores: bracketed.scores,
        objective: "mean gold-label NLL among the label words on the dev set, lower is better"
            .into(),
        source: format!(
            "{} dev examples of {} carved from the demonstration pool, k = {}, seeds {:?}",
            dev.test.len(),
            dev.task,
            settings.k,
            settings.seeds
        ),
        tuned: true,
        train_fraction: None,
        extended: bracketed.extended,
        interior: true,
        inputs_sha256: None,
    })
}
