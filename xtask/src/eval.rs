//! `cargo xtask eval`: the front end of the experiments in [`tint_eval`]. It parses the flags (the
//! library's settings structs), picks the backend, draws the library's progress events as bars (or
//! lines when stderr is not a terminal), calls one library function per subcommand and prints where
//! the results went. With no subcommand, the default suite; `--quick` for a smoke run.

use std::path::{Path, PathBuf};

use anyhow::Result;
use tint_eval::icl::run::run_icl;
use tint_eval::icl::run_settings::IclRunSettings;
use tint_eval::lm_run::run_lm;
use tint_eval::lm_settings::LmRunSettings;
use tint_eval::run_env::{code_version, RunEnv};
use tint_eval::suite::{run_default_suite, SuiteDocs, SuiteProtocol};
use tint_lab::event::{Reporter, RunEvent};

use crate::fetch::FetchedAssets;
use crate::terminal::Terminal;

use crate::backend::{device, AB, BACKEND_NAME};

/// Arguments of `cargo xtask eval`.
#[derive(clap::Args, Debug)]
pub(crate) struct EvalArgs {
    #[command(subcommand)]
    what: Option<EvalWhat>,
    /// Run the smoke-test suite (micro model, a committed text, < 2 minutes).
    #[arg(long)]
    quick: bool,
    /// Output directory of the default suite.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Default suite: keep the finished cells of earlier runs in `--out` and compute the rest.
    #[arg(long)]
    resume: bool,
    /// Default suite: also rewrite the repository's pages, the suite's sections of
    /// experiments/default-suite/README.md and its JSON and charts in docs/data/ (without it the
    /// suite writes only under `--out`: its sections in OUT/README.md beside the reports).
    #[arg(long, conflicts_with = "quick")]
    update_docs: bool,
    /// Default suite: `reduced` (sized for ≤ 20 minutes on a 2-core CPU; sections `lm:default`,
    /// `icl:default`) or `full` (the papers' Table 1 and Table 2 protocols; sections `lm:full`,
    /// `icl:full`). Default: `full` on a GPU build (`cuda`, `wgpu`), `reduced` on `flex`.
    #[arg(long, value_enum, conflicts_with = "quick")]
    protocol: Option<SuiteProtocol>,
    /// GiB a training step (dynamic evaluation's forward and backward) may need by its estimate
    /// (logits, the blocks' intermediates, stored block inputs, gradients kept for reuse, what
    /// another method keeps at the same time); a step
    /// over it is refused before it allocates, with the estimate and its parts. Default: three
    /// quarters of the machine's memory.
    #[arg(long, global = true)]
    max_memory_gib: Option<f64>,
}

// Parsed once per process: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand, Debug)]
enum EvalWhat {
    /// Language-modelling perplexity per method (paper Table 2).
    Lm(LmRunSettings),
    /// One report from the parts of a language-modelling protocol (`eval lm --shard I/N`, or
    /// runs of other methods on the same blocks): refuses parts of other settings, checkpoints or
    /// texts, and cells present in two parts.
    LmMerge(LmMergeArgs),
    /// Contextually Guided Transformer: reduced-scale Table 1 (see `--preset`).
    Cgt(tint_cgt_eval::args::CgtArgs),
    /// In-context classification (paper Table 1): ICL, dynamic evaluation, TinT.
    Icl(IclRunSettings),
    /// One report from the per-task or per-seed pieces of an in-context classification protocol
    /// (`eval icl --task T` or `--seeds S` each, e.g. `scripts/table1_paper.sh task T`, or one seed
    /// per job of a job array with `--tune-per-seed`): a cell found in seed pieces gets every
    /// piece's seed runs, in the order the pieces are given; refuses pieces of other settings (but
    /// the task, data file and seeds) or checkpoints, a seed run or tuning record present in two
    /// pieces, and seed runs of one cell whose settings differ.
    IclMerge(IclMergeArgs),
}

/// Arguments of `cargo xtask eval icl-merge`.
#[derive(clap::Args, Debug)]
pub(crate) struct IclMergeArgs {
    /// The merged report (`.json`; the markdown and charts are written next to it).
    #[arg(long)]
    out: PathBuf,
    /// The pieces: `eval icl` reports, one or more tasks and seeds each (seed pieces in seed
    /// order: a zero-shot cell comes from the first).
    #[arg(required = true)]
    pieces: Vec<PathBuf>,
}

/// Arguments of `cargo xtask eval lm-merge`.
#[derive(clap::Args, Debug)]
pub(crate) struct LmMergeArgs {
    /// The merged report (`.json`; the markdown and charts are written next to it).
    #[arg(long)]
    out: PathBuf,
    /// Title of the charts.
    #[arg(long, default_value = "merged")]
    title: String,
    /// The parts: finished `eval lm` reports.
    #[arg(required = true)]
    parts: Vec<PathBuf>,
}

/// The run environment: the chosen backend's device, the fetched assets, the version of the
/// sources this binary was built from.
fn env(args: &EvalArgs) -> Result<RunEnv<'static, AB>> {
    Ok(RunEnv {
        device: device(),
        backend: BACKEND_NAME,
        assets: &FetchedAssets,
        code_version: code_version(env!("TINT_SOURCE_DIGEST")),
        memory_limit: crate::memory_limit(args.max_memory_gib)?,
    })
}

/// Runs `cargo xtask eval …`.
pub(crate) fn run(args: &EvalArgs) -> Result<()> {
    match &args.what {
        Some(EvalWhat::Lm(lm)) => eval_lm(lm, "lm", &env(args)?),
        Some(EvalWhat::Cgt(cgt)) => crate::eval_cgt::run(cgt),
        Some(EvalWhat::LmMerge(merge)) => {
            tint_eval::run_settings::check_out_extension(&merge.out, "json")?;
            let report = tint_eval::lm_merge::merge_lm_reports(&merge.parts)?;
            let written = tint_eval::lm_run::write_lm_outputs(
                &report,
                &merge.out,
                &merge.title,
                &mut |event| {
                    if let RunEvent::Note(line) = event {
                        eprintln!("{line}");
                    }
                },
            )?;
            println!("{}", report.markdown_table() + &report.paired_markdown());
            println!("{}", report.tuning_markdown());
            let written: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
            println!("wrote {}", written.join(", "));
            Ok(())
        }
        Some(EvalWhat::IclMerge(merge)) => {
            tint_eval::run_settings::check_out_extension(&merge.out, "json")?;
            let report = tint_eval::icl::merge_icl_reports(&merge.pieces)?;
            // One writer per report (a run on the same --out is refused); creates its directory.
            let _lock = tint_eval::output_lock::OutputLock::acquire(&merge.out)?;
            tint_eval::icl::run::write_outputs(&report, &merge.out)?;
            println!("{}", report.markdown());
            println!("report: {}", merge.out.display());
            Ok(())
        }
        Some(EvalWhat::Icl(icl)) => {
            let mut terminal = Terminal::in_stage("icl");
            let report = run_icl(icl, &env(args)?, &mut |e| terminal.event(e));
            terminal.finish();
            println!("{}", report?.markdown());
            println!("report: {}", icl.out.display());
            Ok(())
        }
        None if args.quick => eval_lm(
            &LmRunSettings::quick(&project_root(), &args.out),
            "quick",
            &env(args)?,
        ),
        None => {
            let protocol = args
                .protocol
                .unwrap_or_else(|| SuiteProtocol::for_backend(BACKEND_NAME));
            eprintln!(
                "default suite, {} protocol (backend {BACKEND_NAME})",
                protocol.name()
            );
            let mut terminal = Terminal::default();
            let docs = if args.update_docs {
                SuiteDocs::repository(&project_root())
            } else {
                SuiteDocs::in_out(&args.out)
            };
            let outcome = run_default_suite(
                protocol,
                &args.out,
                args.resume,
                &docs,
                &env(args)?,
                &mut |event| terminal.event(event),
            );
            terminal.finish();
            let outcome = outcome?;
            // The headline tables at the end, where a reader of the terminal or the log looks.
            for section in &outcome.sections {
                println!("{section}");
            }
            println!(
                "wrote {} ({:.0} s in all)",
                outcome.doc.display(),
                outcome.seconds
            );
            Ok(())
        }
    }
}

/// Runs a language-modelling run under a bar named `name` and prints its tables.
fn eval_lm(lm: &LmRunSettings, name: &str, env: &RunEnv<'static, AB>) -> Result<()> {
    let mut terminal = Terminal::in_stage(name);
    let outcome = run_lm(lm, env, &mut |e| terminal.event(e));
    terminal.finish();
    let outcome = outcome?;
    let report = &outcome.report;
    println!("{}", report.markdown_table() + &report.paired_markdown());
    println!("{}", report.tuning_markdown());
    for r in &report.results {
        println!(
            "{:>9} f={:.1}: {:.1}s",
            r.method, r.train_fraction, r.seconds
        );
    }
    let written: Vec<String> = outcome
        .written
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    println!("wrote {}", written.join(", "));
    Ok(())
}

/// The repository root (xtask lives one level below it).
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent")
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        what: EvalWhat,
    }

    #[derive(Parser, Debug)]
    struct SuiteCli {
        #[command(flatten)]
        eval: EvalArgs,
    }

    #[test]
    fn the_suite_protocol_is_a_flag_refused_with_quick() {
        let parse = |argv: &[&str]| SuiteCli::try_parse_from(argv).map(|c| c.eval.protocol);
        assert_eq!(parse(&["eval"]).unwrap(), None);
        assert_eq!(
            parse(&["eval", "--protocol", "full"]).unwrap(),
            Some(SuiteProtocol::Full)
        );
        assert_eq!(
            parse(&["eval", "--protocol", "reduced"]).unwrap(),
            Some(SuiteProtocol::Reduced)
        );
        assert!(parse(&["eval", "--protocol", "paper"]).is_err());
        assert!(parse(&["eval", "--quick", "--protocol", "full"]).is_err());
    }

    #[test]
    fn icl_defaults_match_the_command_line_defaults() {
        match Cli::try_parse_from(["eval", "icl"]).unwrap().what {
            EvalWhat::Icl(parsed) => assert_eq!(parsed, IclRunSettings::default()),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn lm_flags_parse_into_the_library_settings() {
        let parsed = Cli::try_parse_from([
            "eval",
            "lm",
            "--methods",
            "vanilla,tint-ref",
            "--tune",
            "lr=1e-3",
            "--budget",
            "2x1",
            "--sim-layers",
            "3",
            "--out",
            "r/x.json",
        ])
        .unwrap();
        let EvalWhat::Lm(lm) = parsed.what else {
            panic!("not lm")
        };
        let names: Vec<String> = lm.methods.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["vanilla", "tint-ref"]);
        assert_eq!(lm.grid("lr"), Some(vec![1e-3]));
        assert_eq!(lm.budget[0].to_string(), "2x1");
        assert_eq!(lm.tint.sim_layers, "3");
        assert_eq!(lm.train_fraction, [0.3, 0.5, 0.7, 0.9]);
        for bad in [
            ["--methods", "gpt4"],
            ["--tune", "mu=1"],
            ["--budget", "0x1"],
        ] {
            let mut argv = vec!["eval", "lm"];
            argv.extend(bad);
            assert!(
                Cli::try_parse_from(argv).is_err(),
                "{bad:?} must be refused"
            );
        }
    }
}
