//! [`IclSettings`]: the settings of one cell (task × method × k × format × loss), read by the cell's
//! runner (`super::runner`) and by its input digest (`super::cell_digest`).

use super::prompt::{DemoFormat, TrainLoss};

/// Settings of a cell.
#[derive(Debug, Clone, PartialEq)]
pub struct IclSettings {
    /// Demonstrations per prompt / training set; 0 = zero-shot.
    pub k: usize,
    /// Seeds of the demonstration draws (one run each; zero-shot runs once with seed 0).
    pub seeds: Vec<u64>,
    /// Single or Multi training inputs.
    pub format: DemoFormat,
    /// Label-only or full-context training loss.
    pub loss: TrainLoss,
    /// Draw k / n_classes demonstrations per class.
    pub balanced: bool,
    /// Put the demonstrations in the classification context. `None`: yes for methods that do not
    /// train, and for training methods in the Multi format (the demonstrations precede the query in
    /// the same input, as in TinT's Multi mode); no for training methods in the Single format.
    pub demos_in_context: Option<bool>,
    /// Free-form method settings recorded in the report.
    pub method_settings: String,
    /// The calibration prior `log P(c | prompt)` used for every query of every seed: the paper's
    /// calibration (appendix L), the unadapted model on the prompt template alone, the same for
    /// every row ([`super::calibration_prior`]). `None`: the demonstration-conditioned prior, scored by the
    /// method itself on the calibration prompt with this cell's demonstrations in its context
    /// (and, zero-shot, after training on it).
    pub prior: Option<Vec<f64>>,
    /// Record non-finite label-word scores and training losses in the cell instead of failing
    /// with [`crate::EvalError::NonFinite`]; a prediction from non-finite scores is class 0 (and the
    /// cell then fails [`super::CellResult::validate`], so `--resume` recomputes it).
    pub allow_non_finite: bool,
}
