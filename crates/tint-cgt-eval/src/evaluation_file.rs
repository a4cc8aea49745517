//! `evaluation.json` beside a run's checkpoint: the per-seed figures behind the report's cells
//! (which show only means and intervals over seeds), written each time the run is evaluated, with
//! the backend that evaluated it (`evaluation-test.json` for an evaluation on the test stream).

use std::path::Path;

use serde::{Deserialize, Serialize};
use tint_cgt::metrics::{IclEvaluation, PositionLoss, RegressionEvaluation};

use tint_cgt::presets::Variant;
use tint_cgt::train::read_log;

use super::conventions::EvalStream;
use super::curve_file::read_curve;
use super::error::CgtRunError;
use super::variant_result::VariantResult;
use tint_assets::write_atomic;

/// The file's content: one run (variant, seed) as last evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEvaluation {
    /// The preset's name.
    pub preset: String,
    /// The variant's slug (`baseline`, `baseline-wide`, `cgt`, `cgt-aux`, `cgt-aux-reg`).
    pub variant: String,
    /// The seed.
    pub seed: u64,
    /// Training steps of the run.
    pub steps: usize,
    /// The backend that evaluated it, as burn names it (`Backend::name` of the device: `flex`, …).
    pub evaluated_on: String,
    /// The held-out stream evaluated (`validation`, or `test`; files written before the test
    /// stream existed are validation ones).
    #[serde(default)]
    pub eval_stream: EvalStream,
    /// Mean task loss of the last 10 logged steps.
    pub final_task_loss: Option<f64>,
    /// Training seconds of all steps.
    pub train_seconds: f64,
    /// Arithmetic presets (without the `y · y` map, which is drawn as a chart).
    pub icl: Option<IclEvaluation>,
    /// Linear-regression presets.
    pub regression: Option<RegressionEvaluation>,
    /// Text presets: evaluation cross-entropy with dynamic `y`.
    pub text_loss: Option<f64>,
    /// Text presets, guided variants: cross-entropy of the frozen-`y` auxiliary model.
    pub text_aux_loss: Option<f64>,
    /// Text presets: cross-entropy by position of held-out continuations (dynamic and, guided
    /// variants, specialised; files written before it existed have none).
    #[serde(default)]
    pub text_positions: Option<PositionLoss>,
    /// Largest output difference between the folded and the frozen-`y` model (guided variants).
    pub fold_error: Option<f32>,
}

impl RunEvaluation {
    /// The file's content for `result`.
    pub fn of(
        preset: &str,
        steps: usize,
        evaluated_on: String,
        eval_stream: EvalStream,
        result: &VariantResult,
    ) -> Self {
        Self {
            preset: preset.to_string(),
            variant: result.variant.slug().to_string(),
            seed: result.seed,
            steps,
            evaluated_on,
            eval_stream,
            final_task_loss: result.final_task_loss(),
            train_seconds: result.train_seconds,
            icl: result.icl.clone().map(|e| IclEvaluation {
                dot_products: None,
                ..e
            }),
            regression: result.regression.clone(),
            text_loss: result.text_loss.map(|t| t.0),
            text_aux_loss: result.text_loss.and_then(|t| t.1),
            text_positions: result.text_positions.clone(),
            fold_error: result.fold_error,
        }
    }

    /// Writes the file atomically (pretty JSON).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write(&self, path: &Path) -> Result<(), CgtRunError> {
        let json = serde_json::to_string_pretty(self).expect("an evaluation serialises");
        write_atomic(path, json.as_bytes())?;
        Ok(())
    }

    /// The run's result as this file records it, for assembling a report from runs whose JSON was
    /// kept without their weights: the losses from the run's `log.jsonl` where it is kept (else
    /// none: the loss chart leaves the run out and the final training loss is the file's), the
    /// learning curve from its `curve.jsonl`. `None` when the file is not the final evaluation of
    /// this run on `stream` (another preset, variant, seed, step count or stream), or, for a text
    /// preset, lacks the position reading.
    ///
    /// # Errors
    /// The log or the curve file cannot be read.
    pub fn recorded_result(
        &self,
        dir: &Path,
        expected: (&str, Variant, u64, usize),
        stream: EvalStream,
        text: bool,
    ) -> Result<Option<VariantResult>, CgtRunError> {
        let (preset, variant, seed, steps) = expected;
        if self.preset != preset
            || self.variant != variant.slug()
            || self.seed != seed
            || self.steps != steps
            || self.eval_stream != stream
            || (text && self.text_positions.is_none())
        {
            return Ok(None);
        }
        let log = dir.join("log.jsonl");
        let losses = read_log(&log)
            .map_err(CgtRunError::cgt(format!("reading {}", log.display())))?
            .iter()
            .map(|r| (r.step as f64, r.terms.task))
            .collect();
        let curve = match stream {
            EvalStream::Validation => read_curve(&dir.join("curve.jsonl"))?,
            EvalStream::Test => Vec::new(),
        };
        Ok(Some(VariantResult {
            variant,
            seed,
            losses,
            train_seconds: self.train_seconds,
            wall_seconds: 0.0,
            resumed_at: steps,
            icl: self.icl.clone(),
            regression: self.regression.clone(),
            text_loss: self.text_loss.map(|loss| (loss, self.text_aux_loss)),
            text_positions: self.text_positions.clone(),
            fold_error: self.fold_error,
            curve,
            recorded_final_loss: self.final_task_loss,
        }))
    }

    /// Reads a file written by [`RunEvaluation::write`].
    ///
    /// # Errors
    /// The file cannot be read, or is not such a file (the error names it and the parse failure).
    pub fn read(path: &Path) -> Result<Self, CgtRunError> {
        let text = std::fs::read_to_string(path).map_err(|source| CgtRunError::Io {
            operation: "read",
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| CgtRunError::EvaluationFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }
}
