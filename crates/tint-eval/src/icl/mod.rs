//! In-context classification (paper Table 1, appendix L): task loaders, prompt templates and label
//! words, zero-shot and k-shot prompts with seeded demonstration draws, Single / Multi training
//! formats with label-only or full-context loss, predictions with and without calibration
//! (`argmax_c P(c | input, prompt) / P(c | prompt)`), and the methods plain ICL, dynamic evaluation
//! and — through [`IclMethod`] — TinT.
//!
//! Flow: load a [`TaskData`] ([`loaders`]), bind a [`Template`] to the model's tokenizer with a
//! [`PromptEncoder`], pick a method, call [`run_icl_cell`] per cell, collect the [`CellResult`]s in an
//! [`IclReport`] (JSON, markdown) and draw [`accuracy_bars_svg`].

pub mod calibration;
pub mod cell_digest;
pub mod cell_donors;
pub mod cell_settings;
pub mod loaders;
pub mod merge;
pub mod method;
pub mod per_seed;
pub mod plot;
pub mod prompt;
/// The R serialization reader, from [`tint_assets::r_data`] (kept at this path for existing users).
pub use tint_assets::r_data;
pub mod report;
pub mod result;
pub mod run;
pub mod run_settings;
pub mod runner;
pub mod sampling;
pub mod task;
pub mod template;
pub mod tint;
pub mod tune;

/// Kept one-step gradients, shared with the LM tuning ([`crate::step_reuse`]; kept at this path
/// for existing users).
pub use crate::step_reuse::{StepKey, StepReuse};
pub use merge::merge_icl_reports;
pub use method::{candidate_log_probs, DynEvalIcl, IclMethod, PlainIcl, ScoreRequest};
pub use per_seed::PerSeedStep;
pub use plot::accuracy_bars_svg;
pub use prompt::{DemoFormat, EncodedDemo, InContext, PromptEncoder, TrainLoss, TrainingSequences};
pub use report::{IclPaired, IclReport};
pub use result::{CellKey, CellResult, CellSettings, Prediction, SeedRun};
pub use runner::{calibration_prior, cell_key, run_icl_cell, IclProgress, IclSettings};
pub use task::{Example, TaskData, TaskKind};
pub use template::Template;
pub use tint::TintIcl;
pub use tune::{dev_label_nll, tune_icl};
