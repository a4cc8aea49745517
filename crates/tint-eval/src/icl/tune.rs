//! Step-size selection for in-context classification on a development set carved from the
//! demonstration pool ([`super::TaskData::carve_dev`]): never on the evaluated examples.

use super::error::IclError;
use super::method::IclMethod;
use super::prompt::PromptEncoder;
use super::result::CellResult;
use super::runner::{non_finite_origin, run_icl_cell, IclProgress, IclSettings};
use super::task::TaskData;
use crate::lm_tune::{best_index, TuneRecord};

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
/// data's pool); the value with the lowest [`dev_label_nll`] wins. `progress` sees `(done, total)`
/// over all grid values.
///
/// # Errors
///
/// An empty grid, errors of the runs, and a grid on which no value gives a finite objective (the
/// first [`crate::EvalError::NonFinite`] of the grid when there is one, so the error says where
/// the non-finite value appeared).
#[allow(clippy::too_many_arguments)]
pub fn tune_icl<'a>(
    method: &str,
    parameter: &str,
    grid: &[f64],
    encoder: &PromptEncoder<'_>,
    dev: &TaskData,
    settings: &IclSettings,
    make: &mut dyn FnMut(f64) -> Result<Box<dyn IclMethod + 'a>, IclError>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<TuneRecord, IclError> {
    if grid.is_empty() {
        return Err(IclError::InvalidSetting {
            name: "tune",
            value: "[]".into(),
            rule: "give at least one grid value".into(),
        });
    }
    let per_value = settings.seeds.len().max(1) * dev.test.len();
    let total = grid.len() * per_value;
    let mut scores = Vec::with_capacity(grid.len());
    // Non-finite values are errors here (with their origin), whatever the evaluation records.
    let settings = &IclSettings {
        allow_non_finite: false,
        ..settings.clone()
    };
    let mut first_non_finite = None;
    for (g, &value) in grid.iter().enumerate() {
        let mut m = make(value)?;
        let cell = run_icl_cell(m.as_mut(), encoder, dev, settings, &mut |p: IclProgress| {
            progress(g * per_value + p.done, total)
        });
        // A diverging step is a grid outcome, not an error.
        let score = match cell {
            Ok(cell) => dev_label_nll(&cell),
            Err(e) if non_finite_origin(&e).is_some() => {
                first_non_finite.get_or_insert(e);
                f64::NAN
            }
            Err(e) => return Err(e),
        };
        scores.push(if score.is_finite() { score } else { f64::NAN });
    }
    let best = best_index(&scores, true).map_err(|_| {
        // Every value diverged: the first non-finite value says where (e.g. the weights).
        first_non_finite.unwrap_or_else(|| IclError::InvalidSetting {
            name: "tune",
            value: format!("{scores:?}"),
            rule: "no grid value gave a finite dev objective".into(),
        })
    })?;
    Ok(TuneRecord {
        method: method.into(),
        parameter: parameter.into(),
        grid: grid.to_vec(),
        scores,
        objective: "mean gold-label NLL among the label words on the dev set, lower is better"
            .into(),
        choice: grid[best],
        source: format!(
            "{} dev examples of {} carved from the demonstration pool, k = {}, seeds {:?}",
            dev.test.len(),
            dev.task,
            settings.k,
            settings.seeds
        ),
        tuned: true,
        train_fraction: None,
        extended: Vec::new(),
        interior: best > 0 && best + 1 < grid.len(),
    })
}
