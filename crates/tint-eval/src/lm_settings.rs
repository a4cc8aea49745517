//! The settings of a language-modelling run (`cargo xtask eval lm`), with the default suite's and
//! the smoke suite's values. With the `clap` feature they are the command's flags; their
//! documentation is the help text. Serialised into the report (`settings.run.args`) and, without
//! `methods`, `out`, `resume`, `cells_from` and `allow_non_finite`, into its resume fingerprint.

use std::path::{Path, PathBuf};

#[cfg(feature = "clap")]
use crate::lm_grid::parse_budget;
use crate::lm_grid::Budget;
use crate::method::Method;
use crate::model_source::ModelSource;
#[cfg(feature = "clap")]
use crate::run_settings::parse_tune;
use crate::run_settings::{TintFlags, TuneGrid};
use tint_sim::Engine;

/// The default step-size grid (`eta` on the summed loss).
pub const DEFAULT_ETA_GRID: [f64; 4] = [1e-5, 3e-5, 1e-4, 3e-4];
/// The step-size grid of the paper-budget runs (every layer updated): three values a factor of
/// about 3 apart around the steps chosen at that budget, extended by the tuner when the best is on
/// an edge ([`crate::lm_tune::bracket`]).
pub const PAPER_BUDGET_ETA_GRID: [f64; 3] = [3e-5, 1e-4, 3e-4];
/// Tuning blocks of the paper-budget runs (cut from the tuning documents only; issue 62 asks for
/// at least 8).
pub const PAPER_BUDGET_TUNE_BLOCKS: usize = 8;
/// Evaluation blocks of the default suite's language-modelling run (every method sees the same
/// blocks): as many as fit the suite's 20 minutes on 2 cores with every layer updated
/// (experiments/default-suite/README.md, "Time of the default suite").
pub const DEFAULT_SUITE_BLOCKS: usize = 32;
/// Blocks on which the default suite runs the constructed network (all 30 layers) beside the
/// reference, at the reference's tuned step.
pub const DEFAULT_SUITE_CONSTRUCTED_BLOCKS: usize = 2;
/// Train fractions of the default suite's language-modelling run.
pub const DEFAULT_SUITE_FRACTIONS: [f64; 1] = [0.5];
/// Evaluation blocks of the full protocol's language-modelling run (`cargo xtask eval --protocol
/// full`): at least the 128 of issue 62.
pub const FULL_PROTOCOL_BLOCKS: usize = 128;
/// Train fractions of the full protocol (the paper's Table 2).
pub const FULL_PROTOCOL_FRACTIONS: [f64; 4] = [0.3, 0.5, 0.7, 0.9];
/// Blocks on which the full protocol runs the constructed network beside the reference.
pub const FULL_PROTOCOL_CONSTRUCTED_BLOCKS: usize = 16;

/// Settings of a language-modelling run.
#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LmRunSettings {
    /// Auxiliary model: a directory, a .gguf file or `smollm2` (fetched on demand).
    #[cfg_attr(feature = "clap", arg(long, default_value = "smollm2"))]
    pub model: ModelSource,
    /// Text corpus: a file (one document, cut into `--tune-every` parts for the split) or a
    /// directory of `.txt` documents; default: the State of the Union addresses, one document each
    /// (fetched on demand).
    #[cfg_attr(feature = "clap", arg(long))]
    pub text: Option<PathBuf>,
    /// Tokens per block.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 256))]
    pub block_size: usize,
    /// Fractions of each block used for training, comma-separated.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "0.3,0.5,0.7,0.9")
    )]
    pub train_fraction: Vec<f64>,
    /// At most this many evaluation blocks, evenly spaced over the evaluation documents.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 8))]
    pub max_blocks: usize,
    /// Methods, comma-separated: vanilla, dyn-eval, tint (the constructed simulator),
    /// tint-structured (its structured execution), tint-ref (the functional reference).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "vanilla,dyn-eval")
    )]
    pub methods: Vec<Method>,
    /// Dynamic-evaluation learning rate on the MEAN loss (not tuned). Default: tuned (see `--tune`),
    /// or matched to `--inner-lr`: `inner_lr × (train tokens − 1)` (TinT's step is on the summed
    /// loss).
    #[cfg_attr(feature = "clap", arg(long))]
    pub lr: Option<f64>,
    /// TinT inner learning rate `eta` on the SUMMED loss, not tuned; a comma-separated list is a grid
    /// (every adaptive method runs once per value, named `<method> eta=<value>`). Default: tuned.
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub inner_lr: Option<Vec<f64>>,
    /// Step-size grids chosen on the tuning split, per method: `eta=1e-5,3e-5,1e-4,3e-4` (TinT's
    /// step, and dynamic evaluation's matched step; this grid is the default) and optionally `lr=…`
    /// (dynamic evaluation's own step on the mean loss). Repeat the flag for both. Not used for what
    /// `--inner-lr` / `--lr` give.
    #[cfg_attr(feature = "clap", arg(long = "tune", value_parser = parse_tune))]
    pub tune: Vec<TuneGrid>,
    /// Tuning blocks (cut from the tuning documents, never evaluated).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 2))]
    pub tune_blocks: usize,
    /// Train fraction at which step sizes are tuned (unless `--tune-per-fraction`).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.5))]
    pub tune_fraction: f64,
    /// Tune every step size at every evaluated train fraction (on the same tuning blocks), so each
    /// fraction is scored with the step chosen for it; replaces `--tune-fraction`.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tune_per_fraction: bool,
    /// How many values a tuning grid may be extended past its edge when its best value is the
    /// smallest or largest (each extension multiplies or divides by the grid's ratio there); a best
    /// value still on an edge after them stops the run with an error (an edge value is not a
    /// choice).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = crate::lm_tune::DEFAULT_MAX_EXTENSIONS))]
    pub tune_extend: usize,
    /// Every k-th document is a tuning document; the others are evaluated.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 4))]
    pub tune_every: usize,
    /// `tint` and `tint-structured` take the step tuned for `tint-ref` (which computes the same
    /// update with plain tensor ops; the three are tested equal in tint-sim) instead of being tuned
    /// themselves: the constructed execution is the slowest method by far on a CPU. Needs
    /// `tint-ref` among the methods; recorded as such in the report.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tune_tint_via_ref: bool,
    /// SGD steps of dynamic evaluation (and simulated steps of TinT).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub steps: usize,
    /// Compute budgets `LAYERSxSTEPS`, comma-separated (the paper's `12x1,6x2,3x4`; `allx1`): the top
    /// LAYERS blocks are updated (TinT's n_simulation_layers; dynamic evaluation trains only those
    /// blocks and the final norm) for STEPS steps. Replaces `--sim-layers`/`--steps` for the adaptive
    /// methods; several budgets name the methods `<method> <budget>`.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', value_parser = parse_budget)
    )]
    pub budget: Vec<Budget>,
    /// Run only shard `I` of `N` of the protocol (`--shard 0/4` … `3/4`): the train fractions whose
    /// position in `--train-fraction` is `I` modulo `N`, each with its own tuning. The shards'
    /// reports merge into one with `cargo xtask eval lm-merge` (which refuses parts of other
    /// settings). `N` is at most the number of fractions; split further by `--methods`.
    #[cfg_attr(feature = "clap", arg(long, value_parser = Shard::parse))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Keep the finished (method, train fraction) cells of an existing `--out` made with the same
    /// settings, checkpoint, text and code, and compute only the missing or invalid ones (the JSON is
    /// rewritten atomically after every cell; cells of methods not requested are kept).
    #[cfg_attr(feature = "clap", arg(long))]
    pub resume: bool,
    /// Take finished cells and tunings from another report (repeatable) instead of computing
    /// them: a (method, train fraction) cell of FILE is taken where it has this run's method
    /// settings, fraction, blocks and block size (the digest of its inputs) and its numbers
    /// validate; a tuning where the digest of its inputs (row, grid, tuning blocks, fraction) is
    /// this run's. FILE must be made from the same checkpoint and text, on the same backend, with
    /// the same bootstrap (else an error), by the same code (else nothing is taken, with a note).
    /// E.g. a run that repeats one row of a larger run beside new rows. Not part of the resume
    /// fingerprint: it changes no number.
    #[cfg_attr(feature = "clap", arg(long = "cells-from", value_name = "FILE"))]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cells_from: Vec<PathBuf>,
    /// Record a non-finite block NLL in the report (the cell's perplexity is then NaN, `null` in
    /// the JSON, and `--resume` recomputes it) instead of failing; the failure names the method,
    /// the block and where the value first appeared (a weight, the forward pass, the update).
    #[cfg_attr(feature = "clap", arg(long))]
    pub allow_non_finite: bool,
    /// `vanilla` reads each block's NLLs from the first pass of `tint-ref` on the same block (the
    /// unadapted model's forward, computed by the reference's own code; equal to the auxiliary
    /// forward to float32 rounding) instead of running a forward pass of its own: the paired
    /// difference TinT − vanilla then compares two passes of one code, and the run is one forward
    /// per block shorter. Needs `tint-ref` among the methods.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub vanilla_from_ref: bool,
    /// Threads that score blocks at the same time (each method's blocks are independent).
    /// Default: every core on the CPU backend, 1 on a GPU backend. The NLLs do not depend on it,
    /// so it is not part of the settings a report is resumed from.
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(skip)]
    pub workers: Option<usize>,
    /// TinT hyper-parameters (`--tint-hidden-size`, `--tint-prefixes`, `--tint-heads`, `--sim-layers`, …).
    #[cfg_attr(feature = "clap", command(flatten))]
    pub tint: TintFlags,
    /// Output JSON file (must end in `.json`; the markdown table, the `.svg` perplexity chart and
    /// the `-paired.svg` difference chart are written next to it).
    #[cfg_attr(feature = "clap", arg(long, default_value = "results/lm.json"))]
    pub out: PathBuf,
}

/// Shard `index` of `count` of a protocol's train fractions (`--shard I/N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, from 0.
    pub index: usize,
    /// Shards in all.
    pub count: usize,
}

impl Shard {
    /// Parses `I/N` with `I < N`.
    ///
    /// # Errors
    ///
    /// A message naming the text and the rule.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("--shard {text:?}: expected I/N with 0 <= I < N, e.g. 0/4");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The fractions of this shard: those at positions `index`, `index + count`, ….
    ///
    /// # Errors
    ///
    /// [`crate::EvalError::InvalidSetting`] when there are fewer fractions than shards (a shard would
    /// be empty).
    pub fn fractions(&self, fractions: &[f64]) -> Result<Vec<f64>, crate::EvalError> {
        if self.count > fractions.len() {
            return Err(crate::EvalError::InvalidSetting {
                name: "--shard",
                value: format!("{self} of {} train fraction(s)", fractions.len()),
                rule: "shards split the train fractions: N is at most their number (split \
                       further with --methods)"
                    .into(),
            });
        }
        Ok(fractions
            .iter()
            .copied()
            .skip(self.index)
            .step_by(self.count)
            .collect())
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl serde::Serialize for Shard {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl LmRunSettings {
    /// The `tune` grid of `parameter` (`eta` defaults to [`DEFAULT_ETA_GRID`]).
    pub fn grid(&self, parameter: &str) -> Option<Vec<f64>> {
        TuneGrid::find(&self.tune, parameter)
            .or_else(|| (parameter == "eta").then(|| DEFAULT_ETA_GRID.to_vec()))
    }

    /// The default suite's run, paper Table 2 at the paper's budget at one fraction:
    /// SmolLM2-135M-Instruct on [`DEFAULT_SUITE_BLOCKS`] SOTU blocks at 50 %, every layer updated
    /// for one step, `vanilla` (read from `tint-ref`'s first pass), `dyn-eval` (every parameter)
    /// and `tint-ref`, steps tuned on [`PAPER_BUDGET_TUNE_BLOCKS`] blocks of held-out documents
    /// over [`PAPER_BUDGET_ETA_GRID`] (bracketed), written to `out_dir/lm-smollm2-sotu.json`.
    pub fn default_suite(out_dir: &Path, resume: bool) -> Self {
        Self {
            model: ModelSource::SmolLm2,
            text: None,
            block_size: 256,
            train_fraction: DEFAULT_SUITE_FRACTIONS.to_vec(),
            max_blocks: DEFAULT_SUITE_BLOCKS,
            methods: vec![
                Method::Vanilla,
                Method::DynEval,
                Method::Tint(Engine::Reference),
            ],
            lr: None,
            inner_lr: None,
            tune: vec![TuneGrid::new("eta", &PAPER_BUDGET_ETA_GRID)],
            tune_blocks: PAPER_BUDGET_TUNE_BLOCKS,
            tune_fraction: 0.5,
            tune_per_fraction: false,
            tune_extend: crate::lm_tune::DEFAULT_MAX_EXTENSIONS,
            tune_every: 4,
            tune_tint_via_ref: false,
            steps: 1,
            budget: Vec::new(),
            shard: None,
            resume,
            cells_from: Vec::new(),
            allow_non_finite: false,
            vanilla_from_ref: true,
            workers: None,
            tint: TintFlags {
                sim_layers: "all".into(),
                ..TintFlags::default()
            },
            out: out_dir.join("lm-smollm2-sotu.json"),
        }
    }

    /// The constructed network beside the reference on `blocks` blocks at the fraction(s) of
    /// `first` (a default-suite or full-protocol run), both at the step `eta` tuned for
    /// `tint-ref` in that run, every layer updated, one block at a time (its wall time is
    /// recorded), written next to `first`'s report with the suffix `-constructed`.
    pub fn constructed_beside(first: &Self, blocks: usize, eta: f64) -> Self {
        let stem = first.out.with_extension("");
        Self {
            train_fraction: vec![first.train_fraction[0]],
            max_blocks: blocks,
            methods: vec![
                Method::Tint(Engine::CONSTRUCTED),
                Method::Tint(Engine::Reference),
            ],
            inner_lr: Some(vec![eta]),
            tune: Vec::new(),
            tune_per_fraction: false,
            vanilla_from_ref: false,
            budget: Vec::new(),
            workers: Some(1),
            out: std::path::PathBuf::from(format!("{}-constructed.json", stem.display())),
            ..first.clone()
        }
    }

    /// The full protocol's run (paper Table 2 at the paper's budget on SmolLM2-135M-Instruct):
    /// [`FULL_PROTOCOL_BLOCKS`] SOTU blocks at the train fractions [`FULL_PROTOCOL_FRACTIONS`],
    /// `vanilla`, `dyn-eval`, `dyn-eval-matched` and `tint-ref`, every layer for one step, each
    /// step tuned per fraction as in the default suite, written to
    /// `out_dir/lm-smollm2-sotu-full.json`.
    pub fn full_protocol(out_dir: &Path, resume: bool) -> Self {
        Self {
            train_fraction: FULL_PROTOCOL_FRACTIONS.to_vec(),
            max_blocks: FULL_PROTOCOL_BLOCKS,
            methods: vec![
                Method::Vanilla,
                Method::DynEval,
                Method::DynEvalMatched,
                Method::Tint(Engine::Reference),
            ],
            tune_per_fraction: true,
            out: out_dir.join("lm-smollm2-sotu-full.json"),
            ..Self::default_suite(out_dir, resume)
        }
    }

    /// The smoke suite's run: the committed micro GPT-2 (under `root`) on a committed
    /// public-domain text, written to `out_dir/lm-quick.json`.
    pub fn quick(root: &Path, out_dir: &Path) -> Self {
        Self {
            model: ModelSource::Dir(root.join("fixtures/official-tint/micro-gpt2-random")),
            text: Some(root.join("fixtures/text/sotu-1790-washington.txt")),
            block_size: 64,
            train_fraction: vec![0.5],
            max_blocks: 4,
            methods: Method::ALL.to_vec(),
            tune: vec![TuneGrid::new("eta", &[1e-4, 1e-3, 1e-2, 1e-1])],
            tune_blocks: 1,
            tune_tint_via_ref: false,
            vanilla_from_ref: false,
            resume: false,
            tint: TintFlags::default(),
            out: out_dir.join("lm-quick.json"),
            ..Self::default_suite(out_dir, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eta_grid_has_a_default_and_lr_does_not() {
        let mut s = LmRunSettings::default_suite(Path::new("r"), false);
        s.tune.clear();
        assert_eq!(s.grid("eta"), Some(DEFAULT_ETA_GRID.to_vec()));
        assert_eq!(s.grid("lr"), None);
        s.tune.push(TuneGrid::new("lr", &[1e-3]));
        assert_eq!(s.grid("lr"), Some(vec![1e-3]));
    }

    /// The serialised settings are the fingerprint's `args`: the field names of the committed
    /// reports (docs/data/lm-smollm2-sotu.json) must not change.
    #[test]
    fn serialised_settings_keep_the_committed_field_names() {
        let s = LmRunSettings::default_suite(Path::new("r"), false);
        let value = serde_json::to_value(&s).unwrap();
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "allow_non_finite",
                "block_size",
                "budget",
                "inner_lr",
                "lr",
                "max_blocks",
                "methods",
                "model",
                "out",
                "resume",
                "steps",
                "text",
                "tint",
                "train_fraction",
                "tune",
                "tune_blocks",
                "tune_every",
                "tune_extend",
                "tune_fraction",
                "tune_tint_via_ref",
                "vanilla_from_ref"
            ]
        );
        assert_eq!(value["model"], "smollm2");
        assert_eq!(value["methods"][1], "dyn-eval");
        assert_eq!(value["tint"]["sim_layers"], "all");
        assert_eq!(value["tune"][0]["parameter"], "eta");
    }

    #[test]
    fn shards_split_the_fractions_and_refuse_empty_shards() {
        let fractions = [0.3, 0.5, 0.7, 0.9];
        let two = Shard::parse("1/2").unwrap();
        assert_eq!(two.fractions(&fractions).unwrap(), vec![0.5, 0.9]);
        assert_eq!(
            Shard::parse("3/4").unwrap().fractions(&fractions).unwrap(),
            vec![0.9]
        );
        assert_eq!(two.to_string(), "1/2");
        for bad in ["2/2", "1", "a/2", "0/0", "-1/2"] {
            assert!(Shard::parse(bad).is_err(), "{bad:?} must be refused");
        }
        let err = Shard::parse("0/5")
            .unwrap()
            .fractions(&fractions)
            .unwrap_err()
            .to_string();
        assert!(err.contains("0/5 of 4"), "{err}");
    }
}
