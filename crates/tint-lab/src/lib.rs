//! What every experiment of the project shares (issue 64's protocol crate, grown one piece at a time):
//! a small library without burn that the TinT evaluation (`tint-eval`), the CGT experiments
//! (`tint-cgt-eval`) and the benches use alike.
//!
//! | module | what it holds |
//! |---|---|
//! | [`rng`] | the one seeded generator (SplitMix64) and the draws the experiments make from it |
//! | [`chart`] | the one chart module: line, interval, grouped-bar and heat-map SVGs, one error type |
//! | [`bootstrap`] | the percentile bootstrap of every resampled interval (perplexity, paired differences) |
//! | [`paired`] | paired differences from a baseline with bootstrap intervals (per unit, or per cluster: a query with its seeds) |
//! | [`event`] | [`RunEvent`] and [`Reporter`]: what every run reports while it works, and what receives it |
//! | [`host`] | [`Host`]: the caller's side of a run, a [`Reporter`] that also provides the offline [`Assets`] (tint-assets' provider trait) |
//! | [`progress`] | progress of a long run on the terminal: a bar, or lines with the ETA when piped |
//! | [`table`] | [`Table`]: the one markdown table type of the reports |
//! | [`seed_interval`] | the mean over seeds and the half-width of its 95 % Student-t interval |
//! | [`json_nan`] | non-finite numbers through JSON (`null` read back as NaN) |
//! | [`repeats`] | the first value a list of settings repeats (a seed or a variant named twice) |

pub mod bootstrap;
pub mod chart;
pub mod event;
pub mod host;
pub mod json_nan;
pub mod paired;
pub mod progress;
pub mod repeats;
pub mod rng;
pub mod seed_interval;
pub mod table;

pub use event::{OnEvent, Reporter, RunEvent};
pub use host::{AssetError, Assets, Host, NoAssets};
pub use repeats::first_repeat;
pub use table::{Align, Table};
