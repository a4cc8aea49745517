//! The evaluation suite of the paper, as a library: language-modelling perplexity of an auxiliary model
//! under several adaptation methods (vanilla, dynamic evaluation, TinT simulator, TinT functional
//! reference), with bootstrap confidence intervals and JSON / markdown / SVG reports.
//!
//! The command line (`cargo xtask eval …`) lives in `xtask`; this crate does not print. Long runs report
//! progress through a callback.

pub mod blocks;
pub mod by_fraction;
pub mod documents;
pub mod error;
pub mod icl;
pub mod lm;
pub mod lm_donors;
pub mod lm_grid;
pub mod lm_merge;
pub mod lm_method;
pub mod lm_plot;
pub mod lm_rows;
pub mod lm_run;
pub mod lm_settings;
pub mod lm_split;
pub mod lm_tune;
pub mod lm_workers;
pub mod logits;
pub mod method;
pub mod methods;
pub mod model_source;
pub mod non_finite;
pub mod output_lock;
pub mod perplexity;
pub mod report;
pub mod results_doc;
pub mod resume;
pub mod run_env;
pub mod run_settings;
pub mod step_reuse;
pub mod suite;
pub mod tune_record;

pub use lm::{run_lm_eval, LmEvalConfig, LmMethod, LmProgress};
pub use method::Method;
pub use perplexity::{BlockNll, Perplexity};
pub use report::{LmReport, MethodResult};

pub use error::EvalError;
pub use tint_assets::atomic_write;
pub use tint_assets::atomic_write::{write_atomic, write_atomic_with, AtomicWriteError};
