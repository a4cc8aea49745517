//! `cargo xtask eval icl`: in-context classification (paper Table 1, appendix L) — tasks × methods ×
//! shots × formats × losses, seeds per cell, with and without calibration. Writes `OUT.json` (every
//! setting, seed and prediction; `--resume` skips its finished cells), `OUT.md` (the paper's layout)
//! and `OUT-accuracy.svg` / `OUT-accuracy-calibrated.svg`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use burn::module::AutodiffModule;
use sha2::{Digest, Sha256};
use tint_aux::{AuxModel, DynEvalConfig, ParamSelection};
use tint_eval::icl::loaders::{load_offline_task, load_task_dir};
use tint_eval::icl::{
    accuracy_bars_svg, calibration_prior, cell_key, run_icl_cell, tune_icl, DemoFormat, DynEvalIcl,
    IclMethod, IclReport, IclSettings, PlainIcl, PromptEncoder, TaskData, TaskKind, Template,
    TintIcl, TrainLoss,
};
use tint_eval::lm_tune::TuneRecord;
use tint_eval::methods::{Tint, TintMethod};
use tint_eval::paired::PairedSettings;

use crate::backend::{device, AB, B, BACKEND_NAME};
use crate::eval::{parse_tune, Progress, TuneGrid};
use crate::model_arg::{load_aux, load_tokenizer, ModelArg};

/// Default dynamic-evaluation grid (lr on the MEAN loss over the targets).
pub(crate) const DEFAULT_ICL_LR_GRID: [f64; 4] = [1e-4, 3e-4, 1e-3, 3e-3];
/// Default TinT grid (eta on the SUMMED loss over the targets).
pub(crate) const DEFAULT_ICL_ETA_GRID: [f64; 4] = [1e-4, 3e-4, 1e-3, 3e-3];

/// Arguments of `cargo xtask eval icl`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct IclArgs {
    /// Auxiliary model: a directory, a .gguf file or `smollm2` (fetched on demand).
    #[arg(long, default_value = "smollm2")]
    pub model: ModelArg,
    /// Tasks, comma-separated: mr-snippets, cr-snippets, bbc-topics, amazon-fine-food (offline
    /// data, fetched on demand), or sst2, mr, cr, mpqa, subj, agnews, amazon (need --data).
    #[arg(long, value_delimiter = ',', default_value = "mr-snippets")]
    pub task: Vec<String>,
    /// Data location, one per task in order (a task directory in the standard layout; the snippet
    /// file, the BBC `data` directory, or the fine-food directory / `.rda` file). Default for the
    /// offline tasks: their asset (fetched on demand).
    #[arg(long, value_delimiter = ',')]
    pub data: Vec<PathBuf>,
    /// Methods, comma-separated: icl, dyn-eval, tint (the constructed simulator), tint-structured
    /// (its structured execution), tint-ref (the functional reference).
    #[arg(long, value_delimiter = ',', default_value = "icl,dyn-eval")]
    pub methods: Vec<String>,
    /// Numbers of demonstrations, comma-separated (0 = zero-shot).
    #[arg(long, value_delimiter = ',', default_value = "0,32")]
    pub shots: Vec<usize>,
    /// Seeds of the demonstration draws (one run each for k > 0).
    #[arg(long, value_delimiter = ',', default_value = "0,1,2")]
    pub seeds: Vec<u64>,
    /// Training formats for training methods, comma-separated: single, multi.
    #[arg(long, value_delimiter = ',', default_value = "single")]
    pub formats: Vec<String>,
    /// Training losses for training methods, comma-separated: label, full-context.
    #[arg(long, value_delimiter = ',', default_value = "label")]
    pub losses: Vec<String>,
    /// Evaluation examples per task (offline tasks: held out of the file; standard tasks: a seeded
    /// subsample of the test file).
    #[arg(long, default_value_t = 200)]
    pub n_test: usize,
    /// Development examples per task, carved from the demonstration pool (never evaluated), on
    /// which step sizes are tuned.
    #[arg(long, default_value_t = 32)]
    pub n_dev: usize,
    /// Seed of the held-out split, the dev split and the evaluation subsample.
    #[arg(long, default_value_t = 0)]
    pub split_seed: u64,
    /// Inputs are cut to this many tokens.
    #[arg(long, default_value_t = 96)]
    pub max_input_tokens: usize,
    /// Draw k / n_classes demonstrations per class.
    #[arg(long)]
    pub balanced: bool,
    /// Calibration prior: `prompt` (the paper's, appendix L: the plain model on the prompt template
    /// alone, the same for every row) or `demos` (each method on the calibration prompt with the
    /// cell's demonstrations in its context).
    #[arg(long, default_value = "prompt")]
    pub calibration: String,
    /// Dynamic-evaluation learning rates (on the MEAN loss over the targets), comma-separated, not
    /// tuned; each is its own row. Default: tuned on the dev set (`--tune lr=…`).
    #[arg(long, value_delimiter = ',')]
    pub lr: Option<Vec<f64>>,
    /// TinT inner learning rate `eta` (on the SUMMED loss), not tuned. Default: tuned on the dev
    /// set (`--tune eta=…`).
    #[arg(long)]
    pub inner_lr: Option<f64>,
    /// Grids tuned on the dev set: `lr=…` (dynamic evaluation; default 1e-4,3e-4,1e-3,3e-3) and
    /// `eta=…` (TinT; default 1e-4,3e-4,1e-3,3e-3). Repeat the flag for both.
    #[arg(long = "tune", value_parser = parse_tune)]
    pub tune: Vec<TuneGrid>,
    /// SGD steps of dynamic evaluation (simulated steps of TinT).
    #[arg(long, default_value_t = 1)]
    pub steps: usize,
    /// Dynamic evaluation trains the top N blocks (and the final norm), or `all`.
    #[arg(long, default_value = "all")]
    pub train_layers: String,
    /// TinT hyper-parameters.
    #[command(flatten)]
    pub tint: crate::eval::TintFlags,
    /// Output JSON file (must end in `.json`); markdown and SVG plots are written next to it.
    #[arg(long, default_value = "results/icl.json")]
    pub out: PathBuf,
    /// Keep the finished cells of an existing OUT.json made with the same settings, checkpoint,
    /// data and code (cells whose numbers fail validation are recomputed) and run only the rest.
    #[arg(long)]
    pub resume: bool,
    /// Record non-finite label-word scores and training losses in the report (a prediction from
    /// non-finite scores counts as class 0; `--resume` recomputes such cells) instead of failing;
    /// the failure names the method, the example and seed, and where the value first appeared
    /// (a weight, the forward pass, the update).
    #[arg(long)]
    pub allow_non_finite: bool,
}

impl Default for IclArgs {
    /// The command-line defaults (for suites that build the arguments in code).
    fn default() -> Self {
        Self {
            model: ModelArg::SmolLm2,
            task: vec!["mr-snippets".into()],
            data: Vec::new(),
            methods: vec!["icl".into(), "dyn-eval".into()],
            shots: vec![0, 32],
            seeds: vec![0, 1, 2],
            formats: vec!["single".into()],
            losses: vec!["label".into()],
            n_test: 200,
            n_dev: 32,
            split_seed: 0,
            max_input_tokens: 96,
            balanced: false,
            calibration: "prompt".into(),
            lr: None,
            inner_lr: None,
            tune: Vec::new(),
            steps: 1,
            train_layers: "all".into(),
            tint: crate::eval::TintFlags::default(),
            out: PathBuf::from("results/icl.json"),
            resume: false,
            allow_non_finite: false,
        }
    }
}

impl IclArgs {
    /// The `--tune` grid of `parameter`, or its default.
    fn grid(&self, parameter: &str) -> Vec<f64> {
        self.tune
            .iter()
            .rev()
            .find(|g| g.parameter == parameter)
            .map(|g| g.values.clone())
            .unwrap_or_else(|| {
                if parameter == "lr" {
                    DEFAULT_ICL_LR_GRID.to_vec()
                } else {
                    DEFAULT_ICL_ETA_GRID.to_vec()
                }
            })
    }
}

/// Shots of the default suite's ICL run.
const DEFAULT_SUITE_SHOTS: [usize; 2] = [0, 4];
/// Held-out examples of the default suite's ICL run.
const DEFAULT_SUITE_TEST: usize = 48;
/// Dev examples of the default suite's ICL run.
const DEFAULT_SUITE_DEV: usize = 16;

/// The default suite's in-context classification run: SmolLM2 on the movie-review snippets, plain
/// ICL vs dynamic evaluation (lr tuned on a dev set), 0 and 4 shots, three seeds, the paper's
/// calibration.
pub(crate) fn default_suite_args(out: PathBuf, resume: bool) -> IclArgs {
    IclArgs {
        shots: DEFAULT_SUITE_SHOTS.to_vec(),
        n_test: DEFAULT_SUITE_TEST,
        n_dev: DEFAULT_SUITE_DEV,
        tune: vec![TuneGrid {
            parameter: "lr".into(),
            values: vec![3e-4, 1e-3, 3e-3],
        }],
        out,
        resume,
        ..Default::default()
    }
}

/// The command line that runs the same cells as `args`.
pub(crate) fn command_line(args: &IclArgs) -> String {
    let join = |v: &[String]| v.join(",");
    let nums = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:e}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut cmd = format!(
        "cargo xtask eval icl --task {} --methods {} --shots {} --seeds {} --formats {} --losses {} \
         --n-test {} --n-dev {} --calibration {}",
        join(&args.task),
        join(&args.methods),
        args.shots.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        args.seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        join(&args.formats),
        join(&args.losses),
        args.n_test,
        args.n_dev,
        args.calibration
    );
    for g in &args.tune {
        cmd += &format!(" --tune {}={}", g.parameter, nums(&g.values));
    }
    if let Some(lr) = &args.lr {
        cmd += &format!(" --lr {}", nums(lr));
    }
    if let Some(eta) = args.inner_lr {
        cmd += &format!(" --inner-lr {eta:e}");
    }
    if args.tint.sim_layers != "all" {
        cmd += &format!(" --sim-layers {}", args.tint.sim_layers);
    }
    cmd
}

/// The paragraph under an ICL table.
pub(crate) fn describe(args: &IclArgs, json_name: &str) -> String {
    format!(
        "Seeds {:?}, {} held-out test examples per task; step sizes tuned on {} dev examples carved \
         from the demonstration pool (never the test examples; the grid, the dev objective and the \
         choice are listed under the tables). Calibration: {}. Paired differences are per (seed, \
         example) pair of the same demonstrations and query. JSON with every prediction and score: \
         `docs/data/{json_name}`.",
        args.seeds,
        args.n_test,
        args.n_dev,
        if args.calibration == "prompt" {
            "the paper's (appendix L): the prior of each label word given the prompt template \
             alone, scored by the plain model, the same for every row"
        } else {
            "the demonstration-conditioned prior (each method with the cell's demonstrations in \
             context)"
        }
    )
}

fn parse_format(name: &str) -> Result<DemoFormat> {
    Ok(match name {
        "single" => DemoFormat::Single,
        "multi" => DemoFormat::Multi,
        _ => bail!("unknown format {name:?}: expected single or multi"),
    })
}

fn parse_loss(name: &str) -> Result<TrainLoss> {
    Ok(match name {
        "label" | "label-only" => TrainLoss::LabelOnly,
        "full" | "full-context" => TrainLoss::FullContext,
        _ => bail!("unknown loss {name:?}: expected label or full-context"),
    })
}

/// Loads a task from `data` or, for the offline tasks, from the fetched asset (`sentiment-snippets`,
/// `bbc-topics`, `amazon-fine-food`, downloaded into the cache on first use).
fn load_task(task: TaskKind, data: Option<&Path>, args: &IclArgs) -> Result<TaskData> {
    let asset = |name: &str| crate::fetch::ensure_asset(name, &crate::fetch::cache_dir());
    let path = match (data, task) {
        (Some(path), _) => path.to_path_buf(),
        (None, TaskKind::MrSnippets) => {
            asset("sentiment-snippets")?.join("movieReviewSnippets_GroundTruth.txt")
        }
        (None, TaskKind::CrSnippets) => {
            asset("sentiment-snippets")?.join("amazonReviewSnippets_GroundTruth.txt")
        }
        (None, TaskKind::BbcTopics) => asset("bbc-topics")?,
        (None, TaskKind::AmazonFineFood) => asset("amazon-fine-food")?,
        (None, _) => bail!("task {task} needs --data (its directory or file)"),
    };
    let mut data = if matches!(
        task,
        TaskKind::MrSnippets
            | TaskKind::CrSnippets
            | TaskKind::BbcTopics
            | TaskKind::AmazonFineFood
    ) {
        load_offline_task(task, &path, args.n_test, args.split_seed)?
    } else {
        load_task_dir(task, &path)?
    };
    data.subsample_test(args.n_test, args.split_seed);
    Ok(data)
}

fn dyn_eval_config(args: &IclArgs, lr: f64) -> Result<DynEvalConfig> {
    let params = match args.train_layers.as_str() {
        "all" => ParamSelection::all(),
        n => ParamSelection::top_layers(
            n.parse()
                .with_context(|| format!("--train-layers {n:?}: expected a number or `all`"))?,
        ),
    };
    Ok(DynEvalConfig {
        lr,
        steps: args.steps,
        params,
        ..Default::default()
    })
}

/// Where a method's step size comes from.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// Given on the command line.
    Given(f64),
    /// Tuned on the dev set over this grid.
    Tune(Vec<f64>),
}

/// One method row (before tuning).
#[derive(Debug, Clone, PartialEq)]
enum MethodSpec {
    Icl,
    DynEval(Step),
    /// `name` is tint, tint-structured or tint-ref.
    Tint {
        name: &'static str,
        step: Step,
    },
}

impl MethodSpec {
    fn name(&self) -> &'static str {
        match self {
            MethodSpec::Icl => "icl",
            MethodSpec::DynEval(_) => "dyn-eval",
            MethodSpec::Tint { name, .. } => name,
        }
    }

    fn parameter(&self) -> &'static str {
        match self {
            MethodSpec::DynEval(_) => "lr",
            _ => "eta",
        }
    }

    fn step(&self) -> Option<&Step> {
        match self {
            MethodSpec::Icl => None,
            MethodSpec::DynEval(step) | MethodSpec::Tint { step, .. } => Some(step),
        }
    }
}

fn method_specs(args: &IclArgs) -> Result<Vec<MethodSpec>> {
    let mut specs = Vec::new();
    for name in &args.methods {
        match name.as_str() {
            "icl" | "vanilla" => specs.push(MethodSpec::Icl),
            "dyn-eval" => match &args.lr {
                Some(lrs) => {
                    if lrs.is_empty() || lrs.iter().any(|lr| !lr.is_finite() || *lr < 0.0) {
                        bail!("--lr {lrs:?}: give finite, non-negative learning rates");
                    }
                    specs.extend(lrs.iter().map(|&lr| MethodSpec::DynEval(Step::Given(lr))))
                }
                None => specs.push(MethodSpec::DynEval(Step::Tune(args.grid("lr")))),
            },
            "tint" | "tint-structured" | "tint-ref" => {
                let name = match name.as_str() {
                    "tint" => "tint",
                    "tint-structured" => "tint-structured",
                    _ => "tint-ref",
                };
                let step = match args.inner_lr {
                    Some(eta) if eta.is_finite() && eta >= 0.0 => Step::Given(eta),
                    Some(eta) => bail!("--inner-lr {eta}: give a finite, non-negative step"),
                    None => Step::Tune(args.grid("eta")),
                };
                specs.push(MethodSpec::Tint { name, step });
            }
            _ => bail!(
                "unknown method {name:?}: expected icl, dyn-eval, tint, tint-structured or tint-ref"
            ),
        }
    }
    Ok(specs)
}

fn write_outputs(report: &IclReport, out: &Path) -> Result<()> {
    report.write_json(out)?;
    let md = out.with_extension("md");
    tint_eval::write_atomic(&md, report.markdown().as_bytes())?;
    let stem = out.with_extension("");
    for (calibrated, suffix) in [(false, "accuracy"), (true, "accuracy-calibrated")] {
        let path = PathBuf::from(format!("{}-{suffix}.svg", stem.display()));
        tint_eval::write_atomic(&path, accuracy_bars_svg(report, calibrated)?.as_bytes())?;
    }
    Ok(())
}

/// The requested formats `method` trains in. A format it cannot train in is skipped with a note;
/// if that leaves none (TinT asked for the default `single`), the formats it supports are used
/// instead, so `--methods tint` alone still runs its k-shot cells.
fn training_formats(method: &dyn IclMethod, requested: &[DemoFormat]) -> Vec<DemoFormat> {
    let supported: Vec<DemoFormat> = requested
        .iter()
        .copied()
        .filter(|&f| method.supports(f))
        .collect();
    for format in requested.iter().filter(|&&f| !method.supports(f)) {
        eprintln!(
            "{} does not train in the {} format: skipped",
            method.name(),
            format.name()
        );
    }
    if !supported.is_empty() {
        return supported;
    }
    let fallback: Vec<DemoFormat> = [DemoFormat::Single, DemoFormat::Multi]
        .into_iter()
        .filter(|&f| method.supports(f))
        .collect();
    let names: Vec<&str> = fallback.iter().map(|f| f.name()).collect();
    eprintln!(
        "{}: none of the requested formats applies; using {}",
        method.name(),
        names.join(", ")
    );
    fallback
}

/// Runs `cargo xtask eval icl`; returns the report it wrote.
pub(crate) fn run(args: &IclArgs) -> Result<()> {
    run_report(args, &Progress::new("icl")).map(|_| ())
}

/// SHA-256 of a task's examples (pool and test, texts and labels), for the resume fingerprint.
fn sha256_task(data: &TaskData) -> String {
    let mut hasher = Sha256::new();
    for e in data.train.iter().chain(&data.test) {
        hasher.update((e.text.len() as u64).to_le_bytes());
        hasher.update(e.text.as_bytes());
        hasher.update((e.label as u64).to_le_bytes());
    }
    format!("{:x}", hasher.finalize())
}

/// Builds the method of `spec` with step `value` (ignored for `icl`); returns it, its settings
/// string and its row name.
fn build_method<'a>(
    spec: &MethodSpec,
    value: f64,
    args: &IclArgs,
    model: &'a AuxModel<AB>,
    inference: &'a AuxModel<B>,
) -> Result<(Box<dyn IclMethod + 'a>, String)> {
    Ok(match spec {
        MethodSpec::Icl => (Box::new(PlainIcl { model: inference }), String::new()),
        MethodSpec::DynEval(_) => {
            let config = dyn_eval_config(args, value)?;
            let settings = format!("{config:?}");
            (Box::new(DynEvalIcl::new(model, config)), settings)
        }
        MethodSpec::Tint { name, .. } => {
            let config = args.tint.config(inference, value, args.steps)?;
            let method = TintMethod::parse(name)?;
            let settings = format!("{config:?} {}", method.name());
            let tint = Tint::for_method(inference, config, method)?;
            let label = format!("{name}(eta={value:e},steps={})", args.steps);
            (Box::new(TintIcl::new(tint, label, &device())), settings)
        }
    })
}

/// The (format, loss) variants a method runs at `k` shots.
fn variants(
    method: &dyn IclMethod,
    k: usize,
    formats: &[DemoFormat],
    losses: &[TrainLoss],
) -> Vec<(DemoFormat, TrainLoss)> {
    // Formats and losses matter only when the method trains on demonstrations.
    if method.trains() && k > 0 {
        training_formats(method, formats)
            .into_iter()
            .flat_map(|f| losses.iter().map(move |&l| (f, l)))
            .collect()
    } else {
        vec![(DemoFormat::Single, TrainLoss::LabelOnly)]
    }
}

/// As [`run`], returning the report (for suites that embed it in a document); `progress` shows
/// the whole run with an ETA.
pub(crate) fn run_report(args: &IclArgs, progress: &Progress) -> Result<IclReport> {
    crate::eval::check_out_extension(&args.out, "json", "`eval icl`")?;
    let tasks: Vec<TaskKind> = args
        .task
        .iter()
        .map(|t| TaskKind::parse(t))
        .collect::<Result<_, _>>()?;
    if !args.data.is_empty() && args.data.len() != tasks.len() {
        bail!(
            "--data takes one path per task ({} tasks, {} paths)",
            tasks.len(),
            args.data.len()
        );
    }
    if args.calibration != "prompt" && args.calibration != "demos" {
        bail!(
            "--calibration {:?}: expected prompt (the paper's) or demos",
            args.calibration
        );
    }
    let formats: Vec<DemoFormat> = args
        .formats
        .iter()
        .map(|f| parse_format(f))
        .collect::<Result<_>>()?;
    let losses: Vec<TrainLoss> = args
        .losses
        .iter()
        .map(|l| parse_loss(l))
        .collect::<Result<_>>()?;
    let specs = method_specs(args)?;
    if let Some(parent) = args.out.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }

    let device = device();
    let tokenizer = load_tokenizer(&args.model)?;
    let model: AuxModel<AB> = load_aux(&args.model, &device)?;
    let inference: AuxModel<B> = model.valid();

    // Load every task first: the fingerprint covers their examples.
    let mut loaded = Vec::new();
    for (t, &task) in tasks.iter().enumerate() {
        let data = load_task(task, args.data.get(t).map(PathBuf::as_path), args)
            .with_context(|| format!("loading task {task}"))?;
        let (eval, dev) = data
            .carve_dev(args.n_dev, args.split_seed)
            .with_context(|| format!("carving the dev set of {task}"))?;
        loaded.push((task, eval, dev));
    }
    let mut normalised = args.clone();
    normalised.methods.clear();
    normalised.out = PathBuf::new();
    normalised.resume = false;
    // A cell holding a non-finite value never validates, so recording them changes no stored cell.
    normalised.allow_non_finite = false;
    let fingerprint = serde_json::json!({
        "settings": format!("{normalised:?}"),
        "checkpoint_sha256": crate::eval::sha256_files(&crate::eval::checkpoint_files(&args.model)?)?,
        "data_sha256": loaded.iter().map(|(t, e, _)| format!("{t}: {}", sha256_task(e))).collect::<Vec<_>>(),
        "code_version": crate::eval::code_version(),
    });
    let mut report = if args.resume && args.out.is_file() {
        let report = IclReport::read_json(&args.out)?;
        if report.fingerprint.as_ref() != Some(&fingerprint) {
            bail!(
                "--resume: {} was made with other settings, checkpoint, data or code (or by an \
                 older version without a fingerprint); use another --out or drop --resume",
                args.out.display()
            );
        }
        report
    } else {
        IclReport::new(args.model.to_string(), BACKEND_NAME)
    };
    report.fingerprint = Some(fingerprint);
    let stored_tuning = std::mem::take(&mut report.tuning);

    // Units for the ETA: dev examples per grid value, then test examples per cell and seed.
    let k_max = args.shots.iter().copied().max().unwrap_or(0);
    let tune_seeds = vec![args.seeds.first().copied().unwrap_or(0)];
    let mut total = 0usize;
    for (_, eval, dev) in &loaded {
        for spec in &specs {
            if let Some(Step::Tune(grid)) = spec.step() {
                total += grid.len() * dev.test.len();
            }
            for &k in &args.shots {
                let n_variants = if spec.name() == "icl" || k == 0 {
                    1
                } else if spec.name().starts_with("tint") {
                    losses.len()
                } else {
                    formats.len() * losses.len()
                };
                let seeds = if k == 0 { 1 } else { args.seeds.len() };
                total += n_variants * seeds * eval.test.len();
            }
        }
    }
    let mut done = 0usize;

    for (task, eval, dev) in &loaded {
        let task = *task;
        let template = Template::for_task(task);
        let encoder = PromptEncoder::new(
            &tokenizer,
            &template,
            args.max_input_tokens,
            inference.max_positions(),
        )?;
        let prior = if args.calibration == "prompt" {
            Some(
                calibration_prior(
                    &mut PlainIcl { model: &inference },
                    &encoder,
                    args.allow_non_finite,
                )
                .map_err(crate::eval::non_finite_hint(crate::eval::RECORD_HINT))?,
            )
        } else {
            None
        };
        for spec in &specs {
            let value = match spec.step() {
                None => 0.0,
                Some(Step::Given(v)) => {
                    report.tuning.push(TuneRecord::given(
                        &format!("{} on {task}", spec.name()),
                        spec.parameter(),
                        *v,
                        if spec.parameter() == "lr" {
                            "--lr"
                        } else {
                            "--inner-lr"
                        },
                    ));
                    *v
                }
                Some(Step::Tune(grid)) => {
                    let label = format!("{} on {task}", spec.name());
                    let reused = stored_tuning
                        .iter()
                        .find(|t| t.tuned && t.method == label && &t.grid == grid)
                        .cloned();
                    let record = match reused {
                        Some(r) => {
                            done += grid.len() * dev.test.len();
                            r
                        }
                        None => {
                            // Tune where the method trains on demonstrations (the largest k),
                            // in the first format it trains in and the first loss.
                            let probe = build_method(spec, grid[0], args, &model, &inference)?.0;
                            let (format, loss) =
                                variants(probe.as_ref(), k_max, &formats, &losses)[0];
                            drop(probe);
                            let settings = IclSettings {
                                k: k_max,
                                seeds: tune_seeds.clone(),
                                format,
                                loss,
                                balanced: args.balanced,
                                demos_in_context: None,
                                method_settings: String::new(),
                                prior: prior.clone(),
                                // Tuning treats a diverging value as a grid outcome.
                                allow_non_finite: false,
                            };
                            let before = done;
                            let record = tune_icl(
                                &label,
                                spec.parameter(),
                                grid,
                                &encoder,
                                dev,
                                &settings,
                                &mut |v| {
                                    build_method(spec, v, args, &model, &inference)
                                        .map(|m| m.0)
                                        .map_err(|e| tint_eval::icl::IclError::InvalidSetting {
                                            name: "method",
                                            value: spec.name().into(),
                                            rule: e.to_string(),
                                        })
                                },
                                &mut |d, _| {
                                    done = before + d;
                                    progress.update(done, total, &format!("tuning {label}"));
                                },
                            )
                            .map_err(crate::eval::non_finite_hint(crate::eval::TUNING_HINT))?;
                            progress.note(&record.summary());
                            record
                        }
                    };
                    let choice = record.choice;
                    report.tuning.push(record);
                    write_outputs(&report, &args.out)?;
                    choice
                }
            };
            let (mut method, method_settings) =
                build_method(spec, value, args, &model, &inference)?;
            for &k in &args.shots {
                for (format, loss) in variants(method.as_ref(), k, &formats, &losses) {
                    let settings = IclSettings {
                        k,
                        seeds: args.seeds.clone(),
                        format,
                        loss,
                        balanced: args.balanced,
                        demos_in_context: None,
                        method_settings: method_settings.clone(),
                        prior: prior.clone(),
                        allow_non_finite: args.allow_non_finite,
                    };
                    let key = cell_key(task, method.as_ref(), &settings);
                    let cell_units = if k == 0 { 1 } else { args.seeds.len() } * eval.test.len();
                    if let Some(stored) = report.cell(&key) {
                        let same = (k == 0 || stored.settings.seeds == settings.seeds)
                            && stored.settings.n_test == eval.test.len()
                            && stored.settings.method_settings == settings.method_settings;
                        match stored.validate() {
                            Ok(()) if same => {
                                done += cell_units;
                                progress.note(&format!(
                                    "stored cell {} k={k} on {task} reused",
                                    key.row_label()
                                ));
                                continue;
                            }
                            Ok(()) => progress.note(&format!(
                                "recomputing cell {} k={k} on {task}: its seeds, examples or \
                                 method settings differ from this run's",
                                key.row_label()
                            )),
                            Err(why) => progress.note(&format!(
                                "recomputing cell {} k={k} on {task}: stored numbers invalid ({why})",
                                key.row_label()
                            )),
                        }
                    }
                    let before = done;
                    let message = format!("{task} {} k={k}", key.row_label());
                    let cell = run_icl_cell(method.as_mut(), &encoder, eval, &settings, &mut |p| {
                        done = before + p.done;
                        progress.update(done, total, &message);
                    })
                    .map_err(crate::eval::non_finite_hint(crate::eval::RECORD_HINT))
                    .with_context(|| message.clone())?;
                    let non_finite = cell.non_finite_predictions();
                    if non_finite > 0 {
                        progress.note(&format!(
                            "{message}: {non_finite} prediction(s) from non-finite scores recorded \
                             as class 0 (--allow-non-finite)"
                        ));
                    }
                    done = before + cell_units;
                    let seconds: f64 = cell.runs.iter().map(|r| r.seconds).sum();
                    progress.note(&format!(
                        "{message}: {:.1}% / calibrated {:.1}% ({seconds:.0} s)",
                        100.0 * cell.accuracy_mean,
                        100.0 * cell.calibrated_mean
                    ));
                    report.upsert(cell);
                    write_outputs(&report, &args.out)?;
                }
            }
        }
    }
    progress.finish();
    // Tuning records of methods not run this time are kept, as their cells are.
    for t in stored_tuning {
        if !report.tuning.iter().any(|r| r.method == t.method) {
            report.tuning.push(t);
        }
    }
    report.compute_paired(&PairedSettings::default());
    write_outputs(&report, &args.out)?;
    println!("{}", report.markdown());
    println!("report: {}", args.out.display());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Wrapper {
        #[command(flatten)]
        icl: IclArgs,
    }

    #[test]
    fn default_matches_the_command_line_defaults() {
        let parsed = Wrapper::try_parse_from(["icl"]).unwrap().icl;
        assert_eq!(format!("{parsed:?}"), format!("{:?}", IclArgs::default()));
    }

    /// A method that trains only in the Multi format (as TinT does).
    struct MultiOnly;

    impl IclMethod for MultiOnly {
        fn name(&self) -> String {
            "multi-only".into()
        }
        fn trains(&self) -> bool {
            true
        }
        fn adapt(
            &mut self,
            _: &tint_eval::icl::TrainingSequences,
        ) -> Result<(), tint_eval::icl::IclError> {
            Ok(())
        }
        fn score(
            &mut self,
            _: &tint_eval::icl::ScoreRequest<'_>,
        ) -> Result<Vec<f64>, tint_eval::icl::IclError> {
            Ok(Vec::new())
        }
        fn supports(&self, format: DemoFormat) -> bool {
            format == DemoFormat::Multi
        }
    }

    #[test]
    fn unsupported_formats_fall_back_to_the_supported_ones() {
        let method = MultiOnly;
        assert_eq!(
            training_formats(&method, &[DemoFormat::Single]),
            vec![DemoFormat::Multi]
        );
        assert_eq!(
            training_formats(&method, &[DemoFormat::Single, DemoFormat::Multi]),
            vec![DemoFormat::Multi]
        );
    }

    #[test]
    fn formats_losses_and_methods_parse() {
        assert_eq!(parse_format("multi").unwrap(), DemoFormat::Multi);
        assert!(parse_format("pairs").is_err());
        assert_eq!(parse_loss("full-context").unwrap(), TrainLoss::FullContext);
        assert!(parse_loss("sum").is_err());
        let args = IclArgs {
            methods: vec!["icl".into(), "dyn-eval".into(), "tint".into()],
            lr: Some(vec![1e-3, 1e-4]),
            ..Default::default()
        };
        assert_eq!(method_specs(&args).unwrap().len(), 4);
        // Without --lr / --inner-lr every adaptive method is tuned over its grid.
        let tuned = method_specs(&IclArgs {
            methods: vec!["dyn-eval".into(), "tint-structured".into()],
            tune: vec![parse_tune("eta=1e-3,1e-2").unwrap()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            tuned[0],
            MethodSpec::DynEval(Step::Tune(DEFAULT_ICL_LR_GRID.to_vec()))
        );
        assert_eq!(
            tuned[1],
            MethodSpec::Tint {
                name: "tint-structured",
                step: Step::Tune(vec![1e-3, 1e-2])
            }
        );
        let given = method_specs(&IclArgs {
            methods: vec!["tint".into()],
            inner_lr: Some(1e-4),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(given[0].step(), Some(&Step::Given(1e-4)));
        let bad = IclArgs {
            methods: vec!["gpt4".into()],
            ..Default::default()
        };
        assert!(method_specs(&bad).is_err());
    }
}
