//! The per-run figures that the report's rows and the paired table read from a [`VariantResult`]:
//! one definition each, so that a row and its paired difference always measure the same thing.
//! Every method is `None` where the run lacks the figure (the baseline's specialised accuracy, an
//! arithmetic figure of a regression run, ...).

use tint_cgt::metrics::RegressionEvaluation;

use super::variant_result::VariantResult;

/// Mean dynamic-`y` error on pairs `k..` (`None` when there are none).
fn tail_error(evaluation: &RegressionEvaluation, k: usize) -> Option<f64> {
    let tail = evaluation.dynamic_by_pair.get(k..)?;
    (!tail.is_empty()).then(|| tail.iter().sum::<f64>() / tail.len() as f64)
}

impl VariantResult {
    /// Arithmetic: answer-character accuracy on the last two examples of every task, dynamic `y`.
    pub fn dynamic_accuracy(&self) -> Option<f64> {
        self.icl.as_ref().map(|e| e.dynamic_accuracy)
    }

    /// Arithmetic: accuracy on the first example of every task (no example of it seen: the
    /// format-only level).
    pub fn no_example_accuracy(&self) -> Option<f64> {
        self.icl.as_ref().map(|e| e.no_example_accuracy)
    }

    /// Arithmetic: the in-context gain, dynamic minus no-example accuracy.
    pub fn in_context_gain(&self) -> Option<f64> {
        Some(self.dynamic_accuracy()? - self.no_example_accuracy()?)
    }

    /// Arithmetic: accuracy of the specialised model (`y` frozen, earlier examples hidden).
    pub fn specialised_accuracy(&self) -> Option<f64> {
        self.icl.as_ref()?.specialised_accuracy
    }

    /// Arithmetic: dynamic minus specialised accuracy.
    pub fn specialisation_gap(&self) -> Option<f64> {
        Some(self.dynamic_accuracy()? - self.specialised_accuracy()?)
    }

    /// Representation variation (paper eq. 4) of the arithmetic or regression evaluation.
    pub fn representation_variation(&self) -> Option<f64> {
        match (&self.icl, &self.regression) {
            (Some(e), _) => e.representation_variation,
            (None, Some(e)) => e.representation_variation,
            (None, None) => None,
        }
    }

    /// Error of the linear fit of the task parameters from `y` (arithmetic or regression).
    pub fn linear_fit_error(&self) -> Option<f64> {
        match (&self.icl, &self.regression) {
            (Some(e), _) => e.linear_fit_error,
            (None, Some(e)) => e.linear_fit_error,
            (None, None) => None,
        }
    }

    /// Regression: mean dynamic-`y` error on pairs `k..` (`k = 0`: all pairs).
    pub fn dynamic_error_from(&self, k: usize) -> Option<f64> {
        tail_error(self.regression.as_ref()?, k)
    }

    /// Regression: mean error on pairs `k..` with `y` frozen after `k` pairs.
    pub fn frozen_error_after(&self, k: usize) -> Option<f64> {
        let e = self.regression.as_ref()?;
        e.specialised.iter().find(|s| s.0 == k).map(|s| s.2)
    }

    /// Regression: frozen minus dynamic error on pairs `k..`.
    pub fn frozen_gap_after(&self, k: usize) -> Option<f64> {
        Some(self.frozen_error_after(k)? - self.dynamic_error_from(k)?)
    }

    /// Text: evaluation cross-entropy with dynamic `y`, nats per byte.
    pub fn text_loss_dynamic(&self) -> Option<f64> {
        self.text_loss.map(|t| t.0)
    }

    /// Text, guided variants: cross-entropy of the frozen-`y` auxiliary model.
    pub fn text_loss_frozen(&self) -> Option<f64> {
        self.text_loss.and_then(|t| t.1)
    }

    /// Training seconds per logged step (`None` without logged steps).
    pub fn seconds_per_step(&self) -> Option<f64> {
        (!self.losses.is_empty()).then(|| self.train_seconds / self.losses.len() as f64)
    }
}

#[cfg(test)]
mod tests {
    use tint_cgt::metrics::IclEvaluation;
    use tint_cgt::presets::Variant;

    use super::*;

    fn bare(variant: Variant) -> VariantResult {
        VariantResult {
            train_seconds: 6.0,
            ..VariantResult::empty(variant, 0)
        }
    }

    #[test]
    fn arithmetic_figures_and_their_differences() {
        let run = VariantResult {
            icl: Some(IclEvaluation {
                dynamic_accuracy: 0.625,
                no_example_accuracy: 0.375,
                specialised_accuracy: Some(0.5),
                representation_variation: Some(0.25),
                linear_fit_error: Some(0.75),
                ..Default::default()
            }),
            ..bare(Variant::Cgt)
        };
        // Binary fractions: the differences are exact.
        assert_eq!(run.in_context_gain(), Some(0.25));
        assert_eq!(run.specialisation_gap(), Some(0.125));
        assert_eq!(run.representation_variation(), Some(0.25));
        assert_eq!(run.linear_fit_error(), Some(0.75));
        assert_eq!(run.dynamic_error_from(0), None);
        let baseline = VariantResult {
            icl: Some(IclEvaluation {
                specialised_accuracy: None,
                ..run.icl.clone().unwrap()
            }),
            ..bare(Variant::Baseline)
        };
        assert_eq!(baseline.specialisation_gap(), None);
    }

    #[test]
    fn regression_figures_read_the_tail_and_the_freeze_point() {
        let run = VariantResult {
            regression: Some(RegressionEvaluation {
                dynamic_by_pair: vec![4.0, 2.0, 1.0, 0.5],
                specialised: vec![(1, 9.0, 3.0), (2, 9.0, 2.5)],
                representation_variation: Some(0.5),
                linear_fit_error: None,
            }),
            losses: vec![(0.0, 1.0), (1.0, 1.0), (2.0, 1.0)],
            ..bare(Variant::CgtAux)
        };
        assert_eq!(run.dynamic_error_from(0), Some(1.875));
        assert_eq!(run.dynamic_error_from(2), Some(0.75));
        assert_eq!(run.dynamic_error_from(4), None, "no pairs after the last");
        assert_eq!(run.frozen_error_after(2), Some(2.5));
        assert_eq!(run.frozen_error_after(3), None, "not a freeze point");
        assert_eq!(run.frozen_gap_after(2), Some(1.75));
        assert_eq!(run.representation_variation(), Some(0.5));
        assert_eq!(run.dynamic_accuracy(), None);
        assert_eq!(run.seconds_per_step(), Some(2.0));
        assert_eq!(bare(Variant::Cgt).seconds_per_step(), None);
    }
}
