//! What one variant of one seed produced ([`VariantResult`]: losses, evaluations, the learning curve)
//! and the selections the tables make of a set of them (by variant, by seed). Made by
//! [`crate::variant_run`], read by the charts, the report, the paired differences and
//! `evaluation.json`.

use tint_cgt::metrics::{IclEvaluation, PositionLoss, RegressionEvaluation};
use tint_cgt::presets::Variant;

use super::curve_file::CurvePoint;

/// What one variant of one seed produced.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantResult {
    /// The variant.
    pub variant: Variant,
    /// The seed of this run.
    pub seed: u64,
    /// `(step, task loss)` of every step, earlier runs' steps included (read back from the log).
    pub losses: Vec<(f64, f64)>,
    /// Training seconds of all steps (earlier runs' steps from the log).
    pub train_seconds: f64,
    /// Wall seconds of this invocation for the variant: the steps trained now plus evaluation.
    pub wall_seconds: f64,
    /// Step this invocation resumed at (0: trained from scratch).
    pub resumed_at: usize,
    /// In-context evaluation (arithmetic presets).
    pub icl: Option<IclEvaluation>,
    /// Regression evaluation (linear-regression presets).
    pub regression: Option<RegressionEvaluation>,
    /// Text presets: mean evaluation cross-entropy with dynamic `y`, and of the frozen-`y`
    /// auxiliary model (guided variants).
    pub text_loss: Option<(f64, Option<f64>)>,
    /// Text presets: the cross-entropy by position of held-out continuations, dynamic and (guided
    /// variants) with `y` frozen after a prefix (paper Fig. 6).
    pub text_positions: Option<PositionLoss>,
    /// Largest output difference between the folded model and the frozen-`y` model (guided
    /// variants of the arithmetic and regression presets).
    pub fold_error: Option<f32>,
    /// Learning curve (`--eval-every`; empty without it): held-out accuracies during training,
    /// earlier invocations' points included (read back from the run's `curve.jsonl`).
    pub curve: Vec<CurvePoint>,
    /// The final training loss as an `evaluation.json` recorded it, for a run read back from that
    /// file without its log (`None` otherwise: the losses say it).
    pub recorded_final_loss: Option<f64>,
}

impl VariantResult {
    /// Mean task loss of the last 10 logged steps (`None` without logged steps): the report's
    /// "final training loss" and `evaluation.json`'s `final_task_loss`.
    pub fn final_task_loss(&self) -> Option<f64> {
        let tail = &self.losses[self.losses.len().saturating_sub(10)..];
        if tail.is_empty() {
            return self.recorded_final_loss;
        }
        Some(tail.iter().map(|p| p.1).sum::<f64>() / tail.len() as f64)
    }

    /// A run of `variant` and `seed` with nothing measured (no losses, evaluations or times): what
    /// the tests fill in with the fields they need.
    #[cfg(test)]
    pub(crate) fn empty(variant: Variant, seed: u64) -> Self {
        Self {
            variant,
            seed,
            losses: Vec::new(),
            train_seconds: 0.0,
            wall_seconds: 0.0,
            resumed_at: 0,
            icl: None,
            regression: None,
            text_loss: None,
            text_positions: None,
            fold_error: None,
            curve: Vec::new(),
            recorded_final_loss: None,
        }
    }
}

/// The variants present in `results`, in table order.
pub fn variants_of(results: &[VariantResult]) -> Vec<Variant> {
    Variant::ALL
        .into_iter()
        .filter(|v| results.iter().any(|r| r.variant == *v))
        .collect()
}

/// The seed whose training losses the loss chart draws: the smallest among the runs with a logged
/// loss history (`None` when every run was read back without its log).
pub fn loss_chart_seed(results: &[VariantResult]) -> Option<u64> {
    results
        .iter()
        .filter(|r| !r.losses.is_empty())
        .map(|r| r.seed)
        .min()
}

/// The values of `metric` over the seeds of `variant`.
pub fn per_seed(
    results: &[VariantResult],
    variant: Variant,
    metric: &dyn Fn(&VariantResult) -> Option<f64>,
) -> Vec<f64> {
    by_seed(results, variant, metric)
        .into_iter()
        .map(|(_, value)| value)
        .collect()
}

/// The values of `metric` over the seeds of `variant`, each with its seed, in the order of the runs.
pub fn by_seed(
    results: &[VariantResult],
    variant: Variant,
    metric: &dyn Fn(&VariantResult) -> Option<f64>,
) -> Vec<(u64, f64)> {
    results
        .iter()
        .filter(|r| r.variant == variant)
        .filter_map(|r| metric(r).map(|value| (r.seed, value)))
        .collect()
}
