//! The settings of an in-context classification run (`cargo xtask eval icl`), with the default
//! suite's values, the command line that reproduces them, and the text their resume fingerprint
//! records. With the `clap` feature they are the command's flags; their documentation is the help
//! text.

use std::path::{Path, PathBuf};

use crate::method::Method;
use crate::model_source::ModelSource;
#[cfg(feature = "clap")]
use crate::run_settings::parse_tune;
use crate::run_settings::{TintFlags, TuneGrid};
use tint_sim::Engine;

/// Default dynamic-evaluation grid (lr on the MEAN loss over the targets).
pub const DEFAULT_ICL_LR_GRID: [f64; 4] = [1e-4, 3e-4, 1e-3, 3e-3];
/// Default TinT grid (eta on the SUMMED loss over the targets).
pub const DEFAULT_ICL_ETA_GRID: [f64; 4] = [1e-4, 3e-4, 1e-3, 3e-3];
/// Shots of the default suite's ICL run.
pub const DEFAULT_SUITE_SHOTS: [usize; 2] = [0, 4];
/// Held-out examples of the default suite's ICL run.
pub const DEFAULT_SUITE_TEST: usize = 48;
/// Dev examples of the default suite's ICL run.
pub const DEFAULT_SUITE_DEV: usize = 16;
/// The default suite's dynamic-evaluation grid: three values, as many as its 20 minutes allow. It
/// was `3e-4, 1e-3, 3e-3` until 2026-11-26, when the dev set chose its top value (the optimum may
/// lie above), so it moved up by one step.
pub const DEFAULT_SUITE_LR_GRID: [f64; 3] = [1e-3, 3e-3, 1e-2];

/// Tasks of the full protocol: every offline task (the paper's Table 1 columns need `--data`).
pub const FULL_PROTOCOL_TASKS: [&str; 4] = [
    "mr-snippets",
    "cr-snippets",
    "bbc-topics",
    "amazon-fine-food",
];
/// Shots of the full protocol (the paper's; contexts keep the last demonstrations that fit the
/// model's positions, and every cell records how many it kept).
pub const FULL_PROTOCOL_SHOTS: [usize; 2] = [0, 32];
/// Held-out examples per task of the full protocol.
pub const FULL_PROTOCOL_TEST: usize = 100;
/// Dev examples per task of the full protocol (carved from the demonstration pool; every
/// (format, loss, seed) tunes on them, so this sets most of the protocol's time).
pub const FULL_PROTOCOL_DEV: usize = 16;
/// Layers TinT updates in the full protocol: all (the paper's Table 4 budget, all layers × 1
/// step). The functional reference runs them; the constructed network runs beside it on a few
/// queries (`scripts/table1_paper.sh constructed`).
pub const FULL_PROTOCOL_SIM_LAYERS: &str = "all";
/// Full-protocol TinT grid: `eta` on the SUMMED loss, whose size grows with the targets (32
/// label words or a whole 32-shot context), so the grid is wider than the default and every
/// (format, loss, seed) is bracketed on its own.
pub const FULL_PROTOCOL_ETA_GRID: [f64; 4] = [1e-5, 1e-4, 1e-3, 1e-2];

/// Settings of an in-context classification run.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct IclRunSettings {
    /// Auxiliary model: a directory, a .gguf file or `smollm2` (fetched on demand).
    #[cfg_attr(feature = "clap", arg(long, default_value = "smollm2"))]
    pub model: ModelSource,
    /// Tasks, comma-separated: mr-snippets, cr-snippets, bbc-topics, amazon-fine-food (offline
    /// data, fetched on demand), or sst2, mr, cr, mpqa, subj, agnews, amazon (need --data).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "mr-snippets")
    )]
    pub task: Vec<String>,
    /// Data location, one per task in order (a task directory in the standard layout; the snippet
    /// file, the BBC `data` directory, or the fine-food directory / `.rda` file). Default for the
    /// offline tasks: their asset (fetched on demand).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub data: Vec<PathBuf>,
    /// Methods, comma-separated: icl, dyn-eval, tint (the constructed simulator), tint-structured
    /// (its structured execution), tint-ref (the functional reference).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "icl,dyn-eval")
    )]
    pub methods: Vec<Method>,
    /// Numbers of demonstrations, comma-separated (0 = zero-shot).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "0,32")
    )]
    pub shots: Vec<usize>,
    /// Seeds of the demonstration draws (one run each for k > 0).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "0,1,2")
    )]
    pub seeds: Vec<u64>,
    /// Training formats for training methods, comma-separated: single, multi.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "single")
    )]
    pub formats: Vec<String>,
    /// Training losses for training methods, comma-separated: label, full-context.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "label")
    )]
    pub losses: Vec<String>,
    /// Evaluation examples per task (offline tasks: held out of the file; standard tasks: a seeded
    /// subsample of the test file).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 200))]
    pub n_test: usize,
    /// Development examples per task, carved from the demonstration pool (never evaluated), on
    /// which step sizes are tuned.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 32))]
    pub n_dev: usize,
    /// Seed of the held-out split, the dev split and the evaluation subsample.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0))]
    pub split_seed: u64,
    /// Inputs are cut to this many tokens.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 96))]
    pub max_input_tokens: usize,
    /// Draw k / n_classes demonstrations per class.
    #[cfg_attr(feature = "clap", arg(long))]
    pub balanced: bool,
    /// Choose the `--n-test` evaluation examples balanced by class (each class `n_test /
    /// classes`; an error names a class with too few) instead of a plain random draw.
    #[cfg_attr(feature = "clap", arg(long))]
    pub balanced_test: bool,
    /// Calibration prior: `prompt` (the paper's, appendix L: the plain model on the prompt template
    /// alone, the same for every row) or `demos` (each method on the calibration prompt with the
    /// cell's demonstrations in its context).
    #[cfg_attr(feature = "clap", arg(long, default_value = "prompt"))]
    pub calibration: String,
    /// Dynamic-evaluation learning rates (on the MEAN loss over the targets), comma-separated, not
    /// tuned; each is its own row. Default: tuned on the dev set (`--tune lr=…`).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub lr: Option<Vec<f64>>,
    /// TinT inner learning rate `eta` (on the SUMMED loss), not tuned. Default: tuned on the dev
    /// set (`--tune eta=…`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub inner_lr: Option<f64>,
    /// Grids tuned on the dev set: `lr=…` (dynamic evaluation; default 1e-4,3e-4,1e-3,3e-3) and
    /// `eta=…` (TinT; default 1e-4,3e-4,1e-3,3e-3). Repeat the flag for both.
    #[cfg_attr(feature = "clap", arg(long = "tune", value_parser = parse_tune))]
    pub tune: Vec<TuneGrid>,
    /// Values a tuned grid may be extended by past an edge when its best value is there; a best
    /// value still on an edge after them stops the run with an error (an edge value is not a
    /// choice).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = crate::lm_tune::DEFAULT_MAX_EXTENSIONS))]
    pub tune_extend: usize,
    /// Tune every step size once per demonstration seed (on that seed's draw from the dev pool)
    /// and run each seed with its own; default: tuned on the first seed's draw, used for all.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tune_per_seed: bool,
    /// SGD steps of dynamic evaluation (simulated steps of TinT).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub steps: usize,
    /// Dynamic evaluation trains the top N blocks (and the final norm), or `all`.
    #[cfg_attr(feature = "clap", arg(long, default_value = "all"))]
    pub train_layers: String,
    /// TinT hyper-parameters.
    #[cfg_attr(feature = "clap", command(flatten))]
    pub tint: TintFlags,
    /// Output JSON file (must end in `.json`); markdown and SVG plots are written next to it.
    #[cfg_attr(feature = "clap", arg(long, default_value = "results/icl.json"))]
    pub out: PathBuf,
    /// Keep the finished cells of an existing OUT.json made with the same settings, checkpoint,
    /// data and code (cells whose numbers fail validation are recomputed) and run only the rest.
    #[cfg_attr(feature = "clap", arg(long))]
    pub resume: bool,
    /// Take finished cells from another report (repeatable) instead of computing them: a cell of
    /// FILE is reused where this run has the same cell (method with its step, task, shots, format,
    /// loss) with the same seeds, examples, method settings and digest of its inputs, and FILE
    /// was made from the same checkpoint, task data and backend (else an error) by the same code
    /// (else its cells are not reused, with a note). E.g. a control run that repeats rows of a
    /// larger run beside a new one. Not part of the resume fingerprint: it changes no number.
    #[cfg_attr(feature = "clap", arg(long = "cells-from", value_name = "FILE"))]
    pub cells_from: Vec<PathBuf>,
    /// Record non-finite label-word scores and training losses in the report (a prediction from
    /// non-finite scores counts as class 0; `--resume` recomputes such cells) instead of failing;
    /// the failure names the method, the example and seed, and where the value first appeared
    /// (a weight, the forward pass, the update).
    #[cfg_attr(feature = "clap", arg(long))]
    pub allow_non_finite: bool,
    /// Run nothing: rebuild OUT.md, the SVG charts and the paired differences from the cells of an
    /// existing OUT.json (a report written before a change of the report's layout or of its
    /// paired comparisons). Every other setting is ignored.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "resume"))]
    pub render_only: bool,
}

impl Default for IclRunSettings {
    /// The command-line defaults.
    fn default() -> Self {
        Self {
            model: ModelSource::SmolLm2,
            task: vec!["mr-snippets".into()],
            data: Vec::new(),
            methods: vec![Method::Vanilla, Method::DynEval],
            shots: vec![0, 32],
            seeds: vec![0, 1, 2],
            formats: vec!["single".into()],
            losses: vec!["label".into()],
            n_test: 200,
            n_dev: 32,
            split_seed: 0,
            max_input_tokens: 96,
            balanced: false,
            balanced_test: false,
            calibration: "prompt".into(),
            lr: None,
            inner_lr: None,
            tune: Vec::new(),
            tune_extend: crate::lm_tune::DEFAULT_MAX_EXTENSIONS,
            tune_per_seed: false,
            steps: 1,
            train_layers: "all".into(),
            tint: TintFlags::default(),
            out: PathBuf::from("results/icl.json"),
            resume: false,
            cells_from: Vec::new(),
            allow_non_finite: false,
            render_only: false,
        }
    }
}

impl IclRunSettings {
    /// The default suite's run: SmolLM2 on the movie-review snippets, plain ICL vs dynamic
    /// evaluation (lr tuned on a dev set), 0 and 4 shots, three seeds, the paper's calibration,
    /// written to `out_dir/icl-smollm2-mr.json`.
    pub fn default_suite(out_dir: &Path, resume: bool) -> Self {
        Self {
            shots: DEFAULT_SUITE_SHOTS.to_vec(),
            n_test: DEFAULT_SUITE_TEST,
            n_dev: DEFAULT_SUITE_DEV,
            tune: vec![TuneGrid::new("lr", &DEFAULT_SUITE_LR_GRID)],
            out: out_dir.join("icl-smollm2-mr.json"),
            resume,
            ..Default::default()
        }
    }

    /// The full protocol's run (paper Table 1 on SmolLM2-135M-Instruct at the paper's budget):
    /// every offline task ([`FULL_PROTOCOL_TASKS`]), 0 and 32 shots, three seeds, label and
    /// full-context loss, single and multi format, calibrated and not, [`FULL_PROTOCOL_TEST`]
    /// evaluation examples balanced by class; ICL, dynamic evaluation and the functional reference
    /// of TinT updating every layer for one step, each step size tuned per (format, loss) and per
    /// seed on the dev examples and bracketed; written to `out_dir/icl-smollm2-full.json`.
    pub fn full_protocol(out_dir: &Path, resume: bool) -> Self {
        Self {
            task: FULL_PROTOCOL_TASKS.iter().map(|t| t.to_string()).collect(),
            methods: vec![
                Method::Vanilla,
                Method::DynEval,
                Method::Tint(Engine::Reference),
            ],
            shots: FULL_PROTOCOL_SHOTS.to_vec(),
            formats: vec!["single".into(), "multi".into()],
            losses: vec!["label".into(), "full-context".into()],
            n_test: FULL_PROTOCOL_TEST,
            n_dev: FULL_PROTOCOL_DEV,
            balanced_test: true,
            tune: vec![
                TuneGrid::new("lr", &DEFAULT_ICL_LR_GRID),
                TuneGrid::new("eta", &FULL_PROTOCOL_ETA_GRID),
            ],
            tune_per_seed: true,
            tint: TintFlags {
                sim_layers: FULL_PROTOCOL_SIM_LAYERS.to_string(),
                ..TintFlags::default()
            },
            out: out_dir.join("icl-smollm2-full.json"),
            resume,
            ..Default::default()
        }
    }

    /// The `tune` grid of `parameter`, or its default.
    pub fn grid(&self, parameter: &str) -> Vec<f64> {
        TuneGrid::find(&self.tune, parameter).unwrap_or_else(|| {
            if parameter == "lr" {
                DEFAULT_ICL_LR_GRID.to_vec()
            } else {
                DEFAULT_ICL_ETA_GRID.to_vec()
            }
        })
    }

    /// The settings as the resume fingerprint records them: every setting but the method list,
    /// the output path, `resume` and `allow_non_finite` (a cell holding a non-finite value never
    /// validates, so recording them changes no stored cell), in the text the reports have always
    /// held (`IclArgs { model: SmolLm2, task: [...], ... }`).
    pub fn fingerprint_text(&self) -> String {
        /// The layout of the recorded text (the command-line struct it was first printed from).
        #[derive(Debug)]
        #[allow(dead_code)] // read through `Debug` only
        struct IclArgs<'a> {
            model: &'a ModelSource,
            task: &'a [String],
            data: &'a [PathBuf],
            methods: [(); 0],
            shots: &'a [usize],
            seeds: &'a [u64],
            formats: &'a [String],
            losses: &'a [String],
            n_test: usize,
            n_dev: usize,
            split_seed: u64,
            max_input_tokens: usize,
            balanced: bool,
            calibration: &'a str,
            lr: &'a Option<Vec<f64>>,
            inner_lr: Option<f64>,
            tune: &'a [TuneGrid],
            steps: usize,
            train_layers: &'a str,
            tint: &'a TintFlags,
            out: &'a Path,
            resume: bool,
            allow_non_finite: bool,
        }
        let text = format!(
            "{:?}",
            IclArgs {
                model: &self.model,
                task: &self.task,
                data: &self.data,
                methods: [],
                shots: &self.shots,
                seeds: &self.seeds,
                formats: &self.formats,
                losses: &self.losses,
                n_test: self.n_test,
                n_dev: self.n_dev,
                split_seed: self.split_seed,
                max_input_tokens: self.max_input_tokens,
                balanced: self.balanced,
                calibration: &self.calibration,
                lr: &self.lr,
                inner_lr: self.inner_lr,
                tune: &self.tune,
                steps: self.steps,
                train_layers: &self.train_layers,
                tint: &self.tint,
                out: Path::new(""),
                resume: false,
                allow_non_finite: false,
            }
        );
        // Added later: named only when not at their defaults, so recorded texts keep their form.
        let mut later = String::new();
        if self.tune_extend != crate::lm_tune::DEFAULT_MAX_EXTENSIONS {
            later += &format!(", tune_extend: {}", self.tune_extend);
        }
        if self.tune_per_seed {
            later += ", tune_per_seed: true";
        }
        if self.balanced_test {
            later += ", balanced_test: true";
        }
        match text.strip_suffix(" }") {
            Some(head) if !later.is_empty() => format!("{head}{later} }}"),
            _ => text,
        }
    }

    /// The command line that runs the same cells.
    pub fn command_line(&self) -> String {
        let join = |v: &[String]| v.join(",");
        let nums = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:e}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let methods: Vec<String> = self.methods.iter().map(|m| m.icl_name().into()).collect();
        let mut cmd = format!(
            "cargo xtask eval icl --task {} --methods {} --shots {} --seeds {} --formats {} \
             --losses {} --n-test {} --n-dev {} --calibration {}",
            join(&self.task),
            join(&methods),
            self.shots
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(","),
            self.seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            join(&self.formats),
            join(&self.losses),
            self.n_test,
            self.n_dev,
            self.calibration
        );
        for g in &self.tune {
            cmd += &format!(" --tune {}={}", g.parameter, nums(&g.values));
        }
        if self.tune_extend != crate::lm_tune::DEFAULT_MAX_EXTENSIONS {
            cmd += &format!(" --tune-extend {}", self.tune_extend);
        }
        if self.tune_per_seed {
            cmd += " --tune-per-seed";
        }
        if self.balanced_test {
            cmd += " --balanced-test";
        }
        if let Some(lr) = &self.lr {
            cmd += &format!(" --lr {}", nums(lr));
        }
        if let Some(eta) = self.inner_lr {
            cmd += &format!(" --inner-lr {eta:e}");
        }
        if self.tint.sim_layers != "all" {
            cmd += &format!(" --sim-layers {}", self.tint.sim_layers);
        }
        cmd
    }

    /// The paragraph under an ICL table (`json_name`: the JSON's name under `docs/data/`).
    pub fn describe(&self, json_name: &str) -> String {
        format!(
            "Seeds {:?}, {} held-out test examples per task; step sizes tuned on {} dev examples \
             carved from the demonstration pool (never the test examples; the grid, the dev \
             objective and the choice are listed under the tables). Calibration: {}. Paired \
             differences are per (seed, example) pair of the same demonstrations and query; their \
             bootstrap intervals resample the test queries, each keeping its seeds together. JSON \
             with every prediction and score: `docs/data/{json_name}`.",
            self.seeds,
            self.n_test,
            self.n_dev,
            if self.calibration == "prompt" {
                "the paper's (appendix L): the prior of each label word given the prompt template \
                 alone, scored by the plain model, the same for every row"
            } else {
                "the demonstration-conditioned prior (each method with the cell's demonstrations \
                 in context)"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fingerprint text of the default suite is the one docs/data/icl-smollm2-mr.json holds
    /// (recorded before `allow_non_finite` was added to the settings), so resume fingerprints keep
    /// their form.
    #[test]
    fn the_fingerprint_text_keeps_the_recorded_form() {
        let committed = r#"IclArgs { model: SmolLm2, task: ["mr-snippets"], data: [], methods: [], shots: [0, 4], seeds: [0, 1, 2], formats: ["single"], losses: ["label"], n_test: 48, n_dev: 16, split_seed: 0, max_input_tokens: 96, balanced: false, calibration: "prompt", lr: None, inner_lr: None, tune: [TuneGrid { parameter: "lr", values: [0.001, 0.003, 0.01] }], steps: 1, train_layers: "all", tint: TintFlags { tint_hidden_size: None, tint_prefixes: None, tint_heads: None, sim_layers: "all", official_compat: false, exact_derivatives: false, no_reuse: false }, out: "", resume: false"#;
        let mut settings = IclRunSettings::default_suite(Path::new("results"), true);
        settings.allow_non_finite = true;
        assert_eq!(
            settings.fingerprint_text(),
            format!("{committed}, allow_non_finite: false }}")
        );
        // The methods and the output do not enter it; every other setting does.
        settings.methods.clear();
        settings.out = "elsewhere.json".into();
        assert_eq!(
            settings.fingerprint_text(),
            format!("{committed}, allow_non_finite: false }}")
        );
        settings.n_test += 1;
        assert!(!settings.fingerprint_text().contains("n_test: 48"));
        assert!(!settings.fingerprint_text().contains("tune_extend"));
        settings.tune_extend += 1;
        assert!(settings
            .fingerprint_text()
            .ends_with(", allow_non_finite: false, tune_extend: 4 }"));
        settings.tune_per_seed = true;
        assert!(settings
            .fingerprint_text()
            .ends_with(", tune_extend: 4, tune_per_seed: true }"));
    }

    #[test]
    fn the_command_line_names_the_cells() {
        let settings = IclRunSettings::default_suite(Path::new("results"), false);
        assert_eq!(
            settings.command_line(),
            "cargo xtask eval icl --task mr-snippets --methods icl,dyn-eval --shots 0,4 --seeds \
             0,1,2 --formats single --losses label --n-test 48 --n-dev 16 --calibration prompt \
             --tune lr=1e-3,3e-3,1e-2"
        );
        assert_eq!(settings.grid("eta"), DEFAULT_ICL_ETA_GRID.to_vec());
        assert_eq!(settings.grid("lr"), DEFAULT_SUITE_LR_GRID.to_vec());
    }
}
