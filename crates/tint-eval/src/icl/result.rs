//! What an in-context classification cell produces: per-example predictions, per-seed accuracies and
//! their mean and standard deviation (serialisable; the JSON report is a list of these).

use serde::{Deserialize, Serialize};

use super::prompt::{DemoFormat, TrainLoss};
use super::task::TaskKind;

/// Identifies a cell of the results table (what `--resume` matches on).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CellKey {
    /// The task.
    pub task: TaskKind,
    /// The method's name ([`super::IclMethod::name`]).
    pub method: String,
    /// Number of demonstrations (0 = zero-shot).
    pub k: usize,
    /// Training format; `None` when the method does not train on demonstrations or `k = 0`.
    pub format: Option<DemoFormat>,
    /// Training loss; `None` as for `format`.
    pub loss: Option<TrainLoss>,
}

impl CellKey {
    /// Row label in the paper's layout, e.g. `dyn-eval(lr=1e-3,steps=1) [single, label]`.
    pub fn row_label(&self) -> String {
        match (self.format, self.loss) {
            (Some(format), Some(loss)) => {
                format!("{} [{}, {}]", self.method, format.name(), loss.name())
            }
            _ => self.method.clone(),
        }
    }
}

/// One classified example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Index in the task's evaluation set.
    pub index: usize,
    /// Gold class.
    pub label: usize,
    /// `log P(c | input, prompt)` per class.
    pub scores: Vec<f64>,
    /// `log P(c | prompt)` per class (the calibration prior).
    pub prior: Vec<f64>,
    /// Uncalibrated prediction.
    pub predicted: usize,
    /// Calibrated prediction.
    pub predicted_calibrated: usize,
}

/// One seed (one draw of demonstrations) of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedRun {
    /// Seed of the demonstration draw (0 for zero-shot).
    pub seed: u64,
    /// Demonstrations that fit in the context (in-context methods) or were drawn (training methods).
    pub demos_used: usize,
    /// Accuracy without calibration.
    pub accuracy: f64,
    /// Accuracy with calibration.
    pub accuracy_calibrated: f64,
    /// Training losses of the (last) adaptation, if the method reports them.
    pub train_losses: Vec<f64>,
    /// Every prediction.
    pub predictions: Vec<Prediction>,
    /// Wall seconds of this seed's adaptation and scoring (0 in reports written before it was kept).
    #[serde(default)]
    pub seconds: f64,
}

/// Settings of a cell besides its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSettings {
    /// Seeds of the demonstration draws.
    pub seeds: Vec<u64>,
    /// Balanced draws (k / n_classes per class).
    pub balanced: bool,
    /// Whether the demonstrations were part of the classification context.
    pub demos_in_context: bool,
    /// Evaluation examples.
    pub n_test: usize,
    /// Longest input in tokens (longer ones were cut).
    pub max_input_tokens: usize,
    /// Free-form method settings (learning rate, steps, trained layers).
    pub method_settings: String,
}

/// A finished cell: key, settings, seeds, and summary accuracies (fractions in `0..=1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// Which cell.
    pub key: CellKey,
    /// How it was run.
    pub settings: CellSettings,
    /// One entry per seed.
    pub runs: Vec<SeedRun>,
    /// Mean accuracy over seeds, without calibration.
    pub accuracy_mean: f64,
    /// Population standard deviation of the accuracy over seeds, without calibration.
    pub accuracy_std: f64,
    /// Mean accuracy over seeds, with calibration.
    pub calibrated_mean: f64,
    /// Population standard deviation, with calibration.
    pub calibrated_std: f64,
}
