//! `cargo xtask eval cgt`: the front end of [`tint_cgt_eval`] (paper Table 1 for the Contextually
//! Guided Transformer at a preset scale, over seeds). Parses the flags, draws a progress bar per run,
//! writes the section into an experiment folder's README (default
//! `experiments/cgt-icl-small/README.md`; charts go to `docs/cgt/`).

use std::path::PathBuf;

use anyhow::Result;
use tint_cgt::nodes::NodeSetup;
use tint_cgt_eval::conventions::EvalStream;
use tint_cgt_eval::{run_cgt, CgtEvent, CgtHost, CgtSettings};

use crate::backend::{devices, B, BACKEND_NAME};
use tint_lab::progress::Progress;

/// Arguments of `cargo xtask eval cgt`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CgtArgs {
    /// Experiment preset: icl-tiny (smoke, ~2 min), icl-small (CPU Table 1), icl-paper, linreg-small,
    /// linreg-paper, text-small, text-paper.
    #[arg(long, default_value = "icl-small")]
    pub preset: String,
    /// Training steps per variant (overrides the preset).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Sequences per training batch (overrides the preset; larger batches pay off on a GPU).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Comma-separated variants to run: baseline, cgt, cgt-aux, cgt-aux-reg (default: all four).
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Text corpus for the text presets (blank-line separated documents; default: the State of the
    /// Union addresses, fetched on demand like `cargo xtask fetch sotu`).
    #[arg(long)]
    pub text: Option<PathBuf>,
    /// Save a checkpoint every N steps (overrides the preset: 1000 for the *-paper presets, 0 = only at
    /// the end for the others). Does not change the results, so it is not part of the run directory.
    #[arg(long)]
    pub checkpoint_every: Option<usize>,
    /// Directory for the SVG plots.
    #[arg(long, default_value = "docs/cgt")]
    pub plots: PathBuf,
    /// Markdown file that receives this preset's section, which links the charts in `--plots`
    /// relative to its folder (the linreg presets' sections are in
    /// `experiments/cgt-linreg/README.md`).
    #[arg(long, default_value = "experiments/cgt-icl-small/README.md")]
    pub report: PathBuf,
    /// Directory for checkpoints, JSONL logs and exported specialised models
    /// (default: `target/cgt-runs/<preset>-<steps>steps-batch<batch>`); an existing checkpoint of the same
    /// settings is resumed (losses and training time are read back from its log.jsonl), one written with
    /// other settings is an error.
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Comma-separated seeds: each seeds the model initialisation, the training stream and the
    /// auxiliary draws (evaluation sequences are the same for every seed). One run per seed and variant;
    /// with several seeds the report gives the mean and a 95 % Student-t interval over seeds.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub seeds: Vec<u64>,
    /// Report only the (seed, variant) runs whose final checkpoint exists, without training the others
    /// (they are listed as not run): assembles the table of runs trained by separate invocations
    /// (an error naming the run directory when none has finished).
    #[arg(long)]
    pub only_finished: bool,
    /// Train data-parallel over this many devices of the backend (cuda: GPUs 0..N; wgpu: discrete
    /// GPUs 0..N; flex: N peers sharing the CPU, for testing): the batch is split into N equal
    /// shards and gradients are all-reduced through burn's collective operations (docs/cgt.md,
    /// "Data-parallel training"). Must divide the batch size.
    #[arg(long, default_value_t = 1)]
    pub devices: usize,
    /// Train over this many nodes (processes, usually machines), each with --devices devices: every
    /// node runs this same command with its own --node-rank and --node-address, after
    /// `cargo xtask orchestrator` has started (docs/cgt.md, "Several nodes"). The devices of all
    /// nodes must divide the batch size. Every node writes and evaluates its own copy of the runs.
    /// Needs the build with the network: `cargo xtask-nodes` (feature `nodes`).
    #[arg(long, requires_all = ["node_rank", "orchestrator", "node_address"])]
    pub nodes: Option<u32>,
    /// This node's rank, 0..--nodes (each rank on exactly one node).
    #[arg(long, requires = "nodes")]
    pub node_rank: Option<u32>,
    /// The orchestrator's address, ws://host:port.
    #[arg(long, requires = "nodes")]
    pub orchestrator: Option<String>,
    /// The address at which the other nodes reach this node, ws://host:port (a free port of this
    /// machine; the node listens on it on every interface).
    #[arg(long, requires = "nodes")]
    pub node_address: Option<String>,
    /// Measure the learning curve of the arithmetic presets: the held-out answer accuracy (and the
    /// no-example, format-only accuracy) every N training steps and after the last, kept in each
    /// run's `curve.jsonl`, drawn in `<plots>/<preset>-curve.svg` and tabulated in the report. Does not
    /// change the training; single-device runs only.
    #[arg(long)]
    pub eval_every: Option<usize>,
    /// Evaluate on the test stream (the preset's data seed + 2000) instead of the validation
    /// stream (+ 1000) that every table, curve and choice of a preset uses: to confirm a result once
    /// on sequences no choice was made on. The section is keyed `cgt:<preset>-test`, the charts
    /// `<preset>-test-*.svg` and each run's figures go to `evaluation-test.json`. Not with
    /// --eval-every.
    #[arg(long)]
    pub test_stream: bool,
    /// Name of the report section (`cgt:<NAME>`, `-test` appended on the test stream) and of the
    /// charts (`<NAME>-loss.svg`, …) instead of the preset's name: runs of a preset at other
    /// settings (say `--steps 7000`) then keep a section of their own instead of replacing the
    /// preset's. ASCII letters, digits, `-` and `_`.
    #[arg(long)]
    pub section: Option<String>,
}

impl CgtArgs {
    /// The library's settings for these flags on this binary's backend.
    fn settings(&self) -> CgtSettings {
        CgtSettings {
            preset: self.preset.clone(),
            steps: self.steps,
            batch_size: self.batch_size,
            variants: self.variants.clone(),
            text: self.text.clone(),
            checkpoint_every: self.checkpoint_every,
            plots: self.plots.clone(),
            plots_link: tint_eval::results_doc::relative_link(
                self.report.parent().unwrap_or(std::path::Path::new("")),
                &self.plots,
            ),
            run_dir: self.run_dir.clone(),
            seeds: self.seeds.clone(),
            only_finished: self.only_finished,
            backend: BACKEND_NAME.to_string(),
            eval_every: self.eval_every,
            devices: self.devices,
            nodes: self.nodes.map(|nodes| {
                NodeSetup::new(
                    self.node_rank.unwrap_or_default(),
                    nodes,
                    self.orchestrator.clone().unwrap_or_default(),
                    self.node_address.clone().unwrap_or_default(),
                )
            }),
            eval_stream: if self.test_stream {
                EvalStream::Test
            } else {
                EvalStream::Validation
            },
            section: self.section.clone(),
        }
    }
}

/// Runs the command.
pub(crate) fn run(args: &CgtArgs) -> Result<()> {
    let outcome = run_cgt::<B>(
        &args.settings(),
        &devices(args.devices),
        &mut Terminal {
            run: None,
            steps: 0,
        },
    )?;
    tint_eval::results_doc::write_marked_section(
        &args.report,
        &outcome.key,
        &outcome.markdown,
        "# CGT runs\n\nEach section is regenerated by the command it names.\n",
    )?;
    eprintln!("{}", outcome.markdown);
    eprintln!(
        "wrote {} and plots in {}",
        args.report.display(),
        args.plots.display()
    );
    Ok(())
}

/// Progress: a line per experiment, a bar per run on a terminal (a line every
/// [`Progress::LINE_EVERY`] with the step, loss and ETA when the output is piped), resume notes and
/// warnings.
struct Terminal {
    /// The run being trained.
    run: Option<Progress>,
    /// Its number of steps.
    steps: usize,
}

impl CgtHost for Terminal {
    fn default_corpus(&mut self) -> Result<PathBuf, Box<dyn std::error::Error + Send + Sync>> {
        Ok(crate::fetch::sotu_text()?)
    }

    fn event(&mut self, event: CgtEvent<'_>) {
        match event {
            CgtEvent::Started {
                preset,
                steps,
                batch_size,
                seeds,
                run_dir,
            } => eprintln!(
                "cgt preset {preset} | {steps} steps/variant, batch {batch_size} | seeds {seeds:?} \
                 | backend {BACKEND_NAME} | runs in {}",
                run_dir.display()
            ),
            CgtEvent::VariantStarted {
                variant,
                seed,
                steps,
                resumes_at,
                dir,
            } => {
                if resumes_at == steps {
                    eprintln!(
                        "{} seed {seed}: finished ({steps} steps), evaluating the checkpoint in {}",
                        variant.slug(),
                        dir.display()
                    );
                } else if resumes_at > 0 {
                    eprintln!(
                        "{} seed {seed}: resuming at step {resumes_at} of {steps} from the \
                         checkpoint in {}",
                        variant.slug(),
                        dir.display()
                    );
                }
                self.run = Some(Progress::new(&format!(
                    "cgt {} seed {seed}",
                    variant.slug()
                )));
                self.steps = steps;
            }
            CgtEvent::Step {
                step,
                task_loss,
                total_loss,
            } => {
                if let Some(run) = &self.run {
                    run.update(
                        step + 1,
                        self.steps,
                        &format!("loss {task_loss:.3} (total {total_loss:.3})"),
                    );
                }
            }
            CgtEvent::CurvePoint {
                variant,
                seed,
                point,
            } => {
                let line = format!(
                    "{} seed {seed} after {} steps: held-out accuracy {:.1} %, no-example {:.1} %, \
                     in-context gain {:.1} points",
                    variant.slug(),
                    point.step,
                    100.0 * point.dynamic_accuracy,
                    100.0 * point.no_example_accuracy,
                    100.0 * point.gain()
                );
                match &self.run {
                    Some(run) => run.note(&line),
                    None => eprintln!("{line}"),
                }
            }
            CgtEvent::VariantTrained {
                variant,
                logged_steps,
                steps,
                ..
            } => {
                if let Some(run) = self.run.take() {
                    run.finish();
                }
                if logged_steps != steps {
                    eprintln!(
                        "{}: warning: the log holds {logged_steps} of {steps} steps; the loss curve \
                         and training time cover those",
                        variant.slug()
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: CgtArgs,
    }

    #[test]
    fn eval_cgt_flags_become_the_library_settings() {
        let args = Cli::parse_from([
            "cgt",
            "--preset",
            "linreg-cpu",
            "--steps",
            "40",
            "--variants",
            "baseline,cgt",
            "--seeds",
            "1,2",
            "--only-finished",
        ])
        .args;
        let settings = args.settings();
        assert_eq!(settings.variants, ["baseline", "cgt"]);
        assert_eq!(settings.seeds, [1, 2]);
        assert_eq!(settings.plots, PathBuf::from("docs/cgt"));
        // The default report, experiments/cgt-icl-small/README.md, links them from its folder.
        assert_eq!(settings.plots_link, PathBuf::from("../../docs/cgt"));
        assert_eq!(
            settings.command_line(),
            if BACKEND_NAME == "flex" {
                "cargo xtask eval cgt --preset linreg-cpu --steps 40 --variants baseline,cgt \
                 --only-finished --seeds 1,2"
                    .to_string()
            } else {
                format!(
                    "cargo run -p xtask --features {BACKEND_NAME} -- eval cgt --preset linreg-cpu \
                     --steps 40 --variants baseline,cgt --only-finished --seeds 1,2"
                )
            }
        );
    }
}
