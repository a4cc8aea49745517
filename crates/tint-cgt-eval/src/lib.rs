//! Contextually Guided Transformer experiments behind `cargo xtask eval cgt` (paper Table 1 at a
//! preset scale), on tint-cgt and the experiments' shared parts (`tint-lab`, `tint-assets`) only:
//! the variants baseline, CGT, CGT + aux and CGT + aux + reg trained over seeds (resumed from their
//! checkpoints, or only the finished ones assembled), evaluated on held-out streams, their context
//! folded into exported specialised models, SVG charts, and a markdown section with mean ± 95 %
//! Student-t intervals over seeds (`tint_lab::seed_interval`). This crate does not print: progress
//! goes to a [`tint_lab::Host`], which also provides the default text corpus.
//!
//! | module | what it holds |
//! |---|---|
//! | [`args`] | `CgtArgs`: the command line of `eval cgt` (`clap::Args` with the `clap` feature) and the settings it makes |
//! | [`settings`] | [`CgtSettings`]: preset overrides, variants, seeds, paths; the reproducing command |
//! | [`conventions`] | seed shifts, evaluation streams, freeze points, the default run directory |
//! | [`text_corpus`] | the text presets' documents, their held-out split and streams |
//! | [`variant_result`] | [`VariantResult`]: what one (seed, variant) produced; selections by variant and seed |
//! | [`variant_run`] | training + evaluation of one (seed, variant) |
//! | `run_metrics` | the per-run figures of the table's rows and paired differences (methods of [`VariantResult`]) |
//! | [`evaluation_file`] | `evaluation.json`: a run's per-seed figures, as last evaluated |
//! | [`host`] | the progress events a run sends its [`tint_lab::Host`]: how a run reports to its front end |
//! | [`run`] | [`run_cgt`], [`CgtOutcome`] |
//! | [`charts`] | loss and by-pair charts |
//! | [`curve_file`] | a learning curve's points (`--eval-every`), `curve.jsonl` |
//! | [`curve`] | the learning curves' chart and table over the runs |
//! | [`paired`] | paired differences between the variants, per seed |
//! | [`baseline_chart`] | the text presets' Fig. 5 comparison: each variant's cross-entropy minus the Baseline's, as bars with intervals |
//! | [`positions`] | the text presets' cross-entropy by position, specialised against dynamic (Fig. 6) |
//! | `metric_table` | the section's table of metrics per variant (and the regression's error by pair) |
//! | [`report`] | the markdown section |
//! | [`error`] | [`CgtRunError`] |

pub mod args;
pub mod baseline_chart;
pub mod charts;
pub mod conventions;
pub mod curve;
pub mod curve_file;
pub mod error;
pub mod evaluation_file;
pub mod host;
mod metric_table;
pub mod paired;
pub mod positions;
pub mod report;
pub mod run;
mod run_metrics;
pub mod settings;
pub mod text_corpus;
pub mod variant_result;
pub mod variant_run;

pub use error::CgtRunError;
pub use run::{run_cgt, CgtOutcome};
pub use settings::CgtSettings;
pub use variant_result::VariantResult;
