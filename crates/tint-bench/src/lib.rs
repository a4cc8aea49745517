//! The performance benchmark behind `cargo xtask bench` (docs/performance.md): one simulated TinT
//! step in both executions (constructed: every module from its stored weights; structured: the
//! proven-equal shortcut) against the functional reference, dynamic evaluation, a plain auxiliary
//! forward and the machine's sgemm rate, each against the authors' figures measured side by side
//! (issue 17); optionally the step time against B, T and the number of simulated layers, and the
//! same measurements on SmolLM2-135M.
//!
//! [`run_bench`] writes a seeded random GPT-2 checkpoint (the tiny model of issue #9, or a micro
//! one with `quick`) and asks its [`BenchHost`] to run every measurement in a child process (so
//! each measurement's peak RSS is its own); the child calls [`run_measurement`]. Sections go back
//! to the host as markdown. This crate does not print.
//!
//! | module | what it holds |
//! |---|---|
//! | [`args`] | `BenchArgs`: the command line of `bench` (`clap::Args` with the `clap` feature) and the settings it makes |
//! | [`config`] | [`BenchConfig`] (tiny, micro), the timed TinT / LLaMA steps, scaling points |
//! | [`mode`] | measurement names, labels and their model FLOPs ([`tint_sim::flops`]) |
//! | [`checkpoint`] | the seeded checkpoint and token ids |
//! | [`measure`] | [`Measurement`], [`ChildRequest`], [`run_measurement`] |
//! | [`goals`] | issue 65's goals a bench run checks, and where the ratios to the authors' code come from |
//! | [`machine`] | [`ReportContext`]: machine, GPU, build, date |
//! | [`report`] | the markdown sections |
//! | [`scaling`] | the scaling section: time and memory against T and B, fitted exponents, log-log charts |
//! | [`run`] | [`BenchSettings`], [`run_bench`], [`BenchHost`] |
//! | [`error`] | [`BenchError`] |

pub mod args;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod goals;
pub mod machine;
pub mod measure;
pub mod mode;
pub mod report;
pub mod run;
pub mod scaling;

pub use checkpoint::{checkpoint_dir, write_checkpoint};
pub use config::{BenchConfig, ChildShape};
pub use error::BenchError;
pub use machine::ReportContext;
pub use measure::{run_measurement, ChildRequest, Measurement};
pub use mode::{SGEMM_SIZE_CPU, SGEMM_SIZE_GPU};
pub use report::REPORT_HEADER;
pub use run::{run_bench, BenchHost, BenchSettings, ReportSection};
