//! How a CGT run reports to its front end: the events of a run ([`CgtEvent`]: training progress,
//! evaluations, notes) and the host that receives them and provides what the library does not
//! pick itself ([`CgtHost`]: the default text corpus).

use std::path::{Path, PathBuf};

use tint_cgt::presets::Variant;

use super::curve_file::CurvePoint;

/// What a CGT experiment reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum CgtEvent<'a> {
    /// The experiment starts.
    Started {
        /// The preset's name.
        preset: &'a str,
        /// Training steps per variant.
        steps: usize,
        /// Sequences per batch.
        batch_size: usize,
        /// The seeds.
        seeds: &'a [u64],
        /// Where the runs live.
        run_dir: &'a Path,
    },
    /// A variant of a seed starts (or resumes) training.
    VariantStarted {
        /// The variant.
        variant: Variant,
        /// The seed.
        seed: u64,
        /// Its training steps.
        steps: usize,
        /// The step of the checkpoint found in its run directory, which training resumes from
        /// (0: none, from scratch).
        resumes_at: usize,
        /// Its run directory.
        dir: &'a Path,
    },
    /// A training step finished.
    Step {
        /// Step index (0-based).
        step: usize,
        /// The task loss.
        task_loss: f64,
        /// The total loss.
        total_loss: f64,
    },
    /// A learning-curve point was measured (`--eval-every`).
    CurvePoint {
        /// The variant.
        variant: Variant,
        /// The seed.
        seed: u64,
        /// The held-out accuracies after `point.step` steps.
        point: CurvePoint,
    },
    /// A variant finished training (evaluation follows).
    VariantTrained {
        /// The variant.
        variant: Variant,
        /// The seed.
        seed: u64,
        /// The step it resumed at (0: from scratch).
        resumed_at: usize,
        /// Steps of the loss history (fewer than `steps` when a log was lost).
        logged_steps: usize,
        /// Its training steps.
        steps: usize,
    },
}

/// The caller's side of a CGT experiment.
pub trait CgtHost {
    /// The default text corpus of the text presets: files of blank-line separated documents and
    /// directories of one document per file
    /// ([`read_documents`](crate::text_corpus::read_documents)), asked for only when a text preset
    /// runs without [`CgtSettings::text`](crate::settings::CgtSettings::text).
    ///
    /// # Errors
    /// The corpus cannot be provided.
    fn default_corpus(&mut self) -> Result<Vec<PathBuf>, Box<dyn std::error::Error + Send + Sync>>;

    /// Progress.
    fn event(&mut self, event: CgtEvent<'_>);
}
