//! `cargo xtask eval`: the experiments. With no subcommand, the default suite; `--quick` for a smoke run.
//!
//! `eval lm` chooses step sizes on tuning blocks cut from documents that are never evaluated
//! (`tint_eval::lm_split`), evaluates every method on the same evaluation blocks, and reports
//! perplexities and paired per-block differences from vanilla and dynamic evaluation
//! (`tint_eval::paired`). Reports are written atomically; `--resume` reuses only cells whose
//! fingerprint (settings, checkpoint and text SHA-256, code version) matches and whose numbers
//! validate (`tint_eval::resume`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sha2::{Digest, Sha256};
use tint_aux::AuxModel;
use tint_eval::lm_grid::{adapts, build_lm_method, Budget, LmMethodSpec, LM_METHODS};
use tint_eval::lm_split::{Document, LmSplit, SplitSpec};
use tint_eval::lm_tune::{tune_lm, TuneRecord};
use tint_eval::methods::default_tint_config;
use tint_eval::resume::{merge, Fingerprint};
use tint_eval::{run_lm_eval, LmEvalConfig, LmReport};
use tint_sim::TintConfig;

pub(crate) use tint_eval::lm_grid::parse_budget;

use crate::backend::{device, AB, B, BACKEND_NAME};
use crate::model_arg::{load_aux, load_tokenizer, ModelArg};

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
}

#[derive(clap::Subcommand, Debug)]
enum EvalWhat {
    /// Language-modelling perplexity per method (paper Table 2).
    Lm(LmArgs),
    /// Contextually Guided Transformer: reduced-scale Table 1 (see `--preset`).
    Cgt(crate::eval_cgt::CgtArgs),
    /// In-context classification (paper Table 1): ICL, dynamic evaluation, TinT.
    Icl(crate::eval_icl::IclArgs),
}

/// Arguments of `cargo xtask eval lm`.
#[derive(clap::Args, Debug, Clone, serde::Serialize)]
pub(crate) struct LmArgs {
    /// Auxiliary model: a directory, a .gguf file or `smollm2` (fetched on demand).
    #[arg(long, default_value = "smollm2")]
    #[serde(serialize_with = "display")]
    pub model: ModelArg,
    /// Text corpus: a file (one document, cut into `--tune-every` parts for the split) or a
    /// directory of `.txt` documents; default: the State of the Union addresses, one document each
    /// (fetched on demand).
    #[arg(long)]
    pub text: Option<PathBuf>,
    /// Tokens per block.
    #[arg(long, default_value_t = 256)]
    pub block_size: usize,
    /// Fractions of each block used for training, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.3,0.5,0.7,0.9")]
    pub train_fraction: Vec<f64>,
    /// At most this many evaluation blocks, evenly spaced over the evaluation documents.
    #[arg(long, default_value_t = 8)]
    pub max_blocks: usize,
    /// Methods, comma-separated: vanilla, dyn-eval, tint (the constructed simulator),
    /// tint-structured (its structured execution), tint-ref (the functional reference).
    #[arg(long, value_delimiter = ',', default_value = "vanilla,dyn-eval")]
    pub methods: Vec<String>,
    /// Dynamic-evaluation learning rate on the MEAN loss (not tuned). Default: tuned (see `--tune`),
    /// or matched to `--inner-lr`: `inner_lr × (train tokens − 1)` (TinT's step is on the summed
    /// loss).
    #[arg(long)]
    pub lr: Option<f64>,
    /// TinT inner learning rate `eta` on the SUMMED loss, not tuned; a comma-separated list is a grid
    /// (every adaptive method runs once per value, named `<method> eta=<value>`). Default: tuned.
    #[arg(long, value_delimiter = ',')]
    pub inner_lr: Option<Vec<f64>>,
    /// Step-size grids chosen on the tuning split, per method: `eta=1e-5,3e-5,1e-4,3e-4` (TinT's
    /// step, and dynamic evaluation's matched step; this grid is the default) and optionally `lr=…`
    /// (dynamic evaluation's own step on the mean loss). Repeat the flag for both. Not used for what
    /// `--inner-lr` / `--lr` give.
    #[arg(long = "tune", value_parser = parse_tune)]
    pub tune: Vec<TuneGrid>,
    /// Tuning blocks (cut from the tuning documents, never evaluated).
    #[arg(long, default_value_t = 2)]
    pub tune_blocks: usize,
    /// Train fraction at which step sizes are tuned.
    #[arg(long, default_value_t = 0.5)]
    pub tune_fraction: f64,
    /// Every k-th document is a tuning document; the others are evaluated.
    #[arg(long, default_value_t = 4)]
    pub tune_every: usize,
    /// `tint` and `tint-structured` take the step tuned for `tint-ref` (which computes the same
    /// update with plain tensor ops; the three are tested equal in tint-sim) instead of being tuned
    /// themselves: the constructed execution is the slowest method by far on a CPU. Needs
    /// `tint-ref` among the methods; recorded as such in the report.
    #[arg(long)]
    pub tune_tint_via_ref: bool,
    /// SGD steps of dynamic evaluation (and simulated steps of TinT).
    #[arg(long, default_value_t = 1)]
    pub steps: usize,
    /// Compute budgets `LAYERSxSTEPS`, comma-separated (the paper's `12x1,6x2,3x4`; `allx1`): the top
    /// LAYERS blocks are updated (TinT's n_simulation_layers; dynamic evaluation trains only those
    /// blocks and the final norm) for STEPS steps. Replaces `--sim-layers`/`--steps` for the adaptive
    /// methods; several budgets name the methods `<method> <budget>`.
    #[arg(long, value_delimiter = ',', value_parser = parse_budget)]
    pub budget: Vec<Budget>,
    /// Keep the finished (method, train fraction) cells of an existing `--out` made with the same
    /// settings, checkpoint, text and code, and compute only the missing or invalid ones (the JSON is
    /// rewritten atomically after every cell; cells of methods not requested are kept).
    #[arg(long)]
    pub resume: bool,
    /// Record a non-finite block NLL in the report (the cell's perplexity is then NaN, `null` in
    /// the JSON, and `--resume` recomputes it) instead of failing; the failure names the method,
    /// the block and where the value first appeared (a weight, the forward pass, the update).
    #[arg(long)]
    pub allow_non_finite: bool,
    /// TinT hyper-parameters (`--tint-hidden-size`, `--tint-prefixes`, `--tint-heads`, `--sim-layers`, …).
    #[command(flatten)]
    pub tint: TintFlags,
    /// Output JSON file (must end in `.json`; the markdown table, the `.svg` perplexity chart and
    /// the `-paired.svg` difference chart are written next to it).
    #[arg(long, default_value = "results/lm.json")]
    pub out: PathBuf,
}

/// The default step-size grid (`eta` on the summed loss).
pub(crate) const DEFAULT_ETA_GRID: [f64; 4] = [1e-5, 3e-5, 1e-4, 3e-4];

/// A `--tune NAME=V1,V2,…` grid.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct TuneGrid {
    /// `eta` or `lr`.
    pub parameter: String,
    /// The values.
    pub values: Vec<f64>,
}

/// Parses `eta=1e-5,3e-5` or `lr=1e-3,1e-2`.
pub(crate) fn parse_tune(text: &str) -> Result<TuneGrid, String> {
    let bad = |why: &str| format!("--tune {text:?}: {why}; expected e.g. eta=1e-5,3e-5,1e-4,3e-4");
    let (name, list) = text.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let parameter = name.trim().to_string();
    if parameter != "eta" && parameter != "lr" {
        return Err(bad("the parameter is `eta` or `lr`"));
    }
    let values = list
        .split(',')
        .map(|v| v.trim().parse::<f64>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad("a value is not a number"))?;
    if values.is_empty() || values.iter().any(|v| !v.is_finite() || *v <= 0.0) {
        return Err(bad("give positive, finite values"));
    }
    Ok(TuneGrid { parameter, values })
}

impl LmArgs {
    /// The `--tune` grid of `parameter` (`eta` defaults to [`DEFAULT_ETA_GRID`]).
    pub(crate) fn grid(&self, parameter: &str) -> Option<Vec<f64>> {
        self.tune
            .iter()
            .rev()
            .find(|g| g.parameter == parameter)
            .map(|g| g.values.clone())
            .or_else(|| (parameter == "eta").then(|| DEFAULT_ETA_GRID.to_vec()))
    }
}

/// TinT hyper-parameters on the command line (shared by `eval lm` and `logits --tint`).
#[derive(clap::Args, Debug, Clone, serde::Serialize)]
pub(crate) struct TintFlags {
    /// TinT width `Ds`. Default: `D (S + 1)` with `S = D / P`.
    #[arg(long)]
    pub tint_hidden_size: Option<usize>,
    /// Number of prefix tokens `P`. Default: `D / 4` (or `D / 3`).
    #[arg(long)]
    pub tint_prefixes: Option<usize>,
    /// Number of TinT softmax heads `Hs`. Default: `Ds / (D / H)`.
    #[arg(long)]
    pub tint_heads: Option<usize>,
    /// Number of top auxiliary layers that TinT updates: a number or `all`.
    #[arg(long, default_value = "all")]
    pub sim_layers: String,
    /// Reproduce the official code's quirks (MLP output-bias step ×4, unmasked last position).
    #[arg(long)]
    pub official_compat: bool,
    /// Exact LayerNorm/activation derivatives instead of finite differences (tint-ref only).
    #[arg(long)]
    pub exact_derivatives: bool,
    /// Build separate modules for the final forward pass and for every step (the official
    /// `reuse_*_blocks False`): more parameters, same result.
    #[arg(long)]
    pub no_reuse: bool,
}

impl Default for TintFlags {
    fn default() -> Self {
        Self {
            tint_hidden_size: None,
            tint_prefixes: None,
            tint_heads: None,
            sim_layers: "all".into(),
            official_compat: false,
            exact_derivatives: false,
            no_reuse: false,
        }
    }
}

impl TintFlags {
    /// `--sim-layers` as a count (`None` = all).
    pub(crate) fn sim_layer_count(&self) -> Result<Option<usize>> {
        Ok(match self.sim_layers.as_str() {
            "all" => None,
            n => Some(
                n.parse()
                    .with_context(|| format!("--sim-layers {n:?}: expected a number or `all`"))?,
            ),
        })
    }

    /// The simulator configuration for `model` with step `inner_lr` and `steps` simulated steps.
    pub(crate) fn config<Bk: burn::tensor::backend::Backend>(
        &self,
        model: &AuxModel<Bk>,
        inner_lr: f64,
        steps: usize,
    ) -> Result<TintConfig> {
        let n_heads = match model {
            // The LLaMA reference does not use the simulator widths; the head count only sizes them.
            AuxModel::Llama(llama) => llama.blocks[0].attention.n_heads,
            _ => tint_sim::AuxParams::from_aux(model)?.dims().n_heads,
        };
        let mut config = default_tint_config(
            model.hidden_size(),
            n_heads,
            self.tint_hidden_size,
            self.tint_prefixes,
            self.tint_heads,
        );
        config.inner_lr = inner_lr;
        config.n_forward_backward = steps;
        config.official_compat = self.official_compat;
        config.reuse_forward_blocks = !self.no_reuse;
        config.reuse_backward_blocks = !self.no_reuse;
        config.restrict_prefixes = true;
        config.n_simulation_layers = self.sim_layer_count()?;
        if self.exact_derivatives {
            config.derivatives = tint_sim::DerivativeMode::Exact;
        }
        Ok(config)
    }
}

fn display<S: serde::Serializer, T: std::fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Runs `cargo xtask eval …`.
pub(crate) fn run(args: &EvalArgs) -> Result<()> {
    match &args.what {
        Some(EvalWhat::Lm(lm)) => run_lm(lm, &Progress::new("lm")).map(|_| ()),
        Some(EvalWhat::Cgt(cgt)) => crate::eval_cgt::run(cgt),
        Some(EvalWhat::Icl(icl)) => crate::eval_icl::run(icl),
        None if args.quick => run_quick(&args.out),
        None => run_default(&args.out, args.resume),
    }
}

/// Progress of one section of work: a bar with an ETA on a terminal, and a line every
/// [`Progress::LINE_EVERY`] (and at the end) when stderr is not a terminal (piped or logged).
pub(crate) struct Progress {
    name: String,
    bar: ProgressBar,
    start: Instant,
    last_line: std::cell::Cell<Option<Instant>>,
}

impl Progress {
    /// Seconds between lines when the output is piped.
    pub(crate) const LINE_EVERY: Duration = Duration::from_secs(20);

    /// A section named `name` (shown in front of every line).
    pub(crate) fn new(name: &str) -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr()).with_style(
            ProgressStyle::with_template(
                "{prefix} {bar:30} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}",
            )
            .expect("valid template"),
        );
        bar.set_prefix(name.to_string());
        Self {
            name: name.to_string(),
            bar,
            start: Instant::now(),
            last_line: std::cell::Cell::new(None),
        }
    }

    /// `done` of `total` units finished; `message` says what.
    pub(crate) fn update(&self, done: usize, total: usize, message: &str) {
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
        self.bar.set_message(message.to_string());
        if !self.bar.is_hidden() {
            return;
        }
        let due = self
            .last_line
            .get()
            .is_none_or(|t| t.elapsed() >= Self::LINE_EVERY);
        if due || done == total {
            self.last_line.set(Some(Instant::now()));
            let elapsed = self.start.elapsed().as_secs_f64();
            let eta = if done > 0 {
                format!("{:.0} s", elapsed / done as f64 * (total - done) as f64)
            } else {
                "?".into()
            };
            eprintln!(
                "[{}] {done}/{total} ({:.0} %), {elapsed:.0} s elapsed, ETA {eta}: {message}",
                self.name,
                100.0 * done as f64 / total.max(1) as f64
            );
        }
    }

    /// A line that stays (printed above the bar, or as is when piped).
    pub(crate) fn note(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("[{}] {line}", self.name);
        } else {
            self.bar.println(format!("[{}] {line}", self.name));
        }
    }

    /// Removes the bar.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// Seconds since the section started.
    pub(crate) fn seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

/// Evaluation blocks of the default suite's language-modelling run (every method sees the same
/// blocks; chosen so that the suite fits its 20 minutes on 2 cores, see docs/results.md).
const DEFAULT_LM_BLOCKS: usize = 8;
/// Train fractions of the default suite's language-modelling run.
const DEFAULT_LM_FRACTIONS: [f64; 1] = [0.5];
/// Top layers simulated by `tint` / `tint-structured` / `tint-ref` in the default suite.
const DEFAULT_SIM_LAYERS: usize = 2;

/// The default suite's language-modelling arguments.
fn default_lm_args(out: &Path, resume: bool) -> LmArgs {
    LmArgs {
        model: ModelArg::SmolLm2,
        text: None,
        block_size: 256,
        train_fraction: DEFAULT_LM_FRACTIONS.to_vec(),
        max_blocks: DEFAULT_LM_BLOCKS,
        methods: LM_METHODS.map(String::from).to_vec(),
        lr: None,
        inner_lr: None,
        tune: vec![TuneGrid {
            parameter: "eta".into(),
            values: DEFAULT_ETA_GRID.to_vec(),
        }],
        tune_blocks: 2,
        tune_fraction: 0.5,
        tune_every: 4,
        tune_tint_via_ref: true,
        steps: 1,
        budget: Vec::new(),
        resume,
        allow_non_finite: false,
        tint: TintFlags {
            sim_layers: DEFAULT_SIM_LAYERS.to_string(),
            ..TintFlags::default()
        },
        out: out.join("lm-smollm2-sotu.json"),
    }
}

/// The default suite (designed for ≤ 20 minutes on an idle 2-core CPU): SmolLM2-135M on SOTU
/// blocks, vanilla vs dynamic evaluation vs TinT (constructed, structured, reference; top layers)
/// with step sizes tuned on held-out addresses and paired differences; then in-context
/// classification on the offline movie-review snippets. Rewrites the `lm:default` and
/// `icl:default` sections of `docs/results.md` and copies the JSON and SVG charts to `docs/data/`.
fn run_default(out: &Path, resume: bool) -> Result<()> {
    let suite_start = Instant::now();
    let lm = default_lm_args(out, resume);
    let progress = Progress::new("suite 1/2: lm");
    let report = run_lm(&lm, &progress)?;
    let lm_seconds = progress.seconds();
    let data_dir = project_root().join("docs/data");
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let lm_json = copy_into(&lm.out, &data_dir)?;
    let lm_svg = copy_into(&paired_svg_path(&lm.out), &data_dir)?;
    copy_into(&lm.out.with_extension("svg"), &data_dir)?;
    let section = format!(
        "## Language modelling: SmolLM2-135M on State-of-the-Union blocks\n\n\
         Command: `cargo xtask eval` (backend {BACKEND_NAME}; {lm_seconds:.0} s for this part, \
         date {date}). {}\n\n{}\n![paired differences from vanilla](data/{lm_svg})\n",
        lm_description(&lm, &report, &lm_json),
        report.markdown_table() + &report.paired_markdown(),
        date = today(),
    );
    let doc = project_root().join("docs/results.md");
    crate::report_doc::write_marked_section(&doc, "lm:default", &section, RESULTS_HEADER)?;

    let icl = default_icl_args(out, resume);
    let progress = Progress::new("suite 2/2: icl");
    let icl_report = crate::eval_icl::run_report(&icl, &progress)?;
    let icl_seconds = progress.seconds();
    let icl_json = copy_into(&icl.out, &data_dir)?;
    let stem = icl.out.with_extension("");
    let bars = copy_into(
        Path::new(&format!("{}-accuracy.svg", stem.display())),
        &data_dir,
    )?;
    let section = format!(
        "## In-context classification: SmolLM2-135M on movie-review snippets\n\n\
         Command: `cargo xtask eval` (backend {BACKEND_NAME}; {icl_seconds:.0} s for this part, \
         date {date}); the same cells as `{command}`. {}\n\n{}\n![accuracy](data/{bars})\n",
        crate::eval_icl::describe(&icl, &icl_json),
        icl_report.markdown(),
        command = crate::eval_icl::command_line(&icl),
        date = today(),
    );
    crate::report_doc::write_marked_section(&doc, "icl:default", &section, RESULTS_HEADER)?;
    println!(
        "updated {} ({:.0} s in all)",
        doc.display(),
        suite_start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Today's date (UTC) as `YYYY-MM-DD`, from the system clock.
pub(crate) fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The paragraph under an LM table: blocks, split, step sizes, methods, JSON.
pub(crate) fn lm_description(args: &LmArgs, report: &LmReport, json_name: &str) -> String {
    let split = &report.settings["run"]["split"];
    let layers = match args.budget.first().map(|b| b.layers) {
        Some(Some(l)) => format!("the top {l} of the model's layers"),
        Some(None) => "all layers".into(),
        None => match args.tint.sim_layer_count() {
            Ok(Some(l)) => format!("the top {l} of the model's layers"),
            _ => "all layers".into(),
        },
    };
    format!(
        "Perplexity of the evaluated part of {} blocks of {} tokens (95 % bootstrap intervals over \
         blocks), and the paired difference of every method from `vanilla` and from `dyn-eval` per \
         block (mean NLL per evaluated token; 95 % paired bootstrap interval; wins = blocks where \
         the method is lower). Evaluation and tuning blocks come from disjoint documents: {}; \
         evaluation blocks from {} documents, tuning blocks from {}. One step on the training part: \
         `tint` is the constructed LLaMA simulator (Execution::Constructed), `tint-structured` the \
         same simulator in its structured execution, `tint-ref` the functional reference, all \
         updating {layers} with eta on the SUMMED loss; `dyn-eval` is plain SGD on the MEAN loss of \
         all parameters with the matched lr = eta x (train tokens - 1). Step sizes:\n\n{}\n\
         JSON with every setting, the split, the tuning grid and per-block losses: \
         `docs/data/{json_name}`.",
        report.settings["blocks"],
        args.block_size,
        split["rule"].as_str().unwrap_or("?"),
        split["eval_documents_used"]
            .as_array()
            .map_or(0, Vec::len),
        list_names(&split["tune_documents_used"]),
        report.tuning_markdown(),
    )
}

/// `a, b and c` from a JSON array of strings.
fn list_names(value: &serde_json::Value) -> String {
    let names: Vec<&str> = value
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    if names.is_empty() {
        "none (nothing tuned)".into()
    } else {
        names.join(", ")
    }
}

/// The default suite's in-context classification run.
fn default_icl_args(out: &Path, resume: bool) -> crate::eval_icl::IclArgs {
    crate::eval_icl::default_suite_args(out.join("icl-smollm2-mr.json"), resume)
}

/// Copies `file` into `dir` (atomically); returns its file name.
fn copy_into(file: &Path, dir: &Path) -> Result<String> {
    let name = file
        .file_name()
        .with_context(|| format!("{} has no file name", file.display()))?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    tint_eval::write_atomic(dir.join(name), &bytes)?;
    Ok(name.to_string_lossy().into_owned())
}

/// First lines of a fresh `docs/results.md`.
const RESULTS_HEADER: &str = "# Results\n\nEach section is regenerated by the command it names.\n";

/// The smoke suite: the committed micro GPT-2 on a committed public-domain text.
fn run_quick(out: &Path) -> Result<()> {
    let root = project_root();
    let lm = LmArgs {
        model: ModelArg::Dir(root.join("fixtures/official-tint/micro-gpt2-random")),
        text: Some(root.join("fixtures/text/sotu-1790-washington.txt")),
        block_size: 64,
        train_fraction: vec![0.5],
        max_blocks: 4,
        methods: LM_METHODS.map(String::from).to_vec(),
        lr: None,
        inner_lr: None,
        tune: vec![TuneGrid {
            parameter: "eta".into(),
            values: vec![1e-3, 1e-2],
        }],
        tune_blocks: 1,
        tune_fraction: 0.5,
        tune_every: 4,
        tune_tint_via_ref: false,
        steps: 1,
        budget: Vec::new(),
        resume: false,
        allow_non_finite: false,
        tint: TintFlags::default(),
        out: out.join("lm-quick.json"),
    };
    run_lm(&lm, &Progress::new("quick"))?;
    Ok(())
}

/// The repository root (xtask lives one level below it).
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent")
        .to_path_buf()
}

/// Refuses an output path whose extension is not `ext` (so `--out x.md` never receives JSON and a
/// markdown file is never overwritten by a report).
pub(crate) fn check_out_extension(out: &Path, ext: &str, what: &str) -> Result<()> {
    if out.extension().and_then(|e| e.to_str()) != Some(ext) {
        bail!(
            "--out {}: the {what} report is written as .{ext} (markdown and charts go next to it); \
             give a path ending in .{ext}",
            out.display()
        );
    }
    Ok(())
}

/// The documents of the corpus: `text` (a file = one document; a directory = its `.txt` files in
/// name order) or the State of the Union addresses (one per file, chronological).
fn load_documents(text: Option<&Path>) -> Result<(PathBuf, Vec<(String, String)>)> {
    let path = match text {
        Some(p) => p.to_path_buf(),
        None => crate::fetch::ensure_asset("sotu", &crate::fetch::cache_dir())?,
    };
    if !path.is_dir() {
        let content = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        return Ok((path.clone(), vec![(file_label(&path), content)]));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
        .with_context(|| format!("listing {}", path.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("listing {}", path.display()))?;
    files.retain(|p| p.extension().is_some_and(|e| e == "txt"));
    files.sort();
    if files.is_empty() {
        bail!("{} holds no .txt document", path.display());
    }
    let docs = files
        .iter()
        .map(|f| {
            let content =
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            Ok((file_label(f), content.trim().to_string()))
        })
        .collect::<Result<_>>()?;
    Ok((path, docs))
}

/// SHA-256 (hex) of `files`' contents in order (each preceded by its length).
pub(crate) fn sha256_files(files: &[PathBuf]) -> Result<String> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    for f in files {
        let mut file = std::fs::File::open(f)
            .with_context(|| format!("opening {} to hash it", f.display()))?;
        let len = file
            .metadata()
            .with_context(|| format!("reading the size of {}", f.display()))?
            .len();
        hasher.update(len.to_le_bytes());
        loop {
            let n = file
                .read(&mut buffer)
                .with_context(|| format!("reading {} to hash it", f.display()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
        }
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// The files that hold the weights of `model` (for its content hash).
pub(crate) fn checkpoint_files(model: &ModelArg) -> Result<Vec<PathBuf>> {
    Ok(match model {
        ModelArg::Gguf(p) => vec![p.clone()],
        ModelArg::SmolLm2 => vec![crate::fetch::smollm2_gguf()?],
        ModelArg::Dir(dir) => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .with_context(|| format!("listing {}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            files
        }
    })
}

/// SHA-256 of the documents (names and contents).
fn sha256_documents(docs: &[(String, String)]) -> String {
    let mut hasher = Sha256::new();
    for (name, content) in docs {
        for part in [name.as_bytes(), content.as_bytes()] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
    }
    format!("{:x}", hasher.finalize())
}

/// The version of the code: the crate version and the git commit of the working tree (with
/// `+changes` when tracked files differ from it), or `unknown` outside a git checkout.
pub(crate) fn code_version() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(project_root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    format!("{} git {commit}", env!("CARGO_PKG_VERSION"))
}

/// `OUT-paired.svg` next to `OUT.json`.
fn paired_svg_path(out: &Path) -> PathBuf {
    let stem = out.with_extension("");
    PathBuf::from(format!("{}-paired.svg", stem.display()))
}

/// A row of the run before its step size is known: the method, its budget and label, and where its
/// step comes from.
struct PendingRow {
    spec: LmMethodSpec,
    step: StepSource,
}

/// Where a row's step size comes from.
enum StepSource {
    /// Not an adaptive method.
    None,
    /// Given on the command line.
    Given(TuneRecord),
    /// Tuned over this grid of this parameter.
    Tune {
        parameter: &'static str,
        grid: Vec<f64>,
    },
    /// The choice of the row with this label (`tint-ref` for `tint` / `tint-structured`).
    Shared(String),
}

/// The rows of `args`: every method × budget (× given `--inner-lr` value).
fn pending_rows(args: &LmArgs) -> Result<Vec<PendingRow>> {
    for m in &args.methods {
        if !LM_METHODS.contains(&m.as_str()) {
            bail!("unknown method {m:?}; available: {}", LM_METHODS.join(", "));
        }
    }
    if let Some(etas) = &args.inner_lr {
        if etas.is_empty() || etas.iter().any(|eta| !eta.is_finite() || *eta < 0.0) {
            bail!("--inner-lr {etas:?}: give one or more finite, non-negative learning rates");
        }
    }
    if let Some(lr) = args.lr {
        if !lr.is_finite() || lr < 0.0 {
            bail!("--lr {lr}: give a finite, non-negative learning rate");
        }
    }
    let budgets = if args.budget.is_empty() {
        vec![Budget {
            layers: args.tint.sim_layer_count()?,
            steps: args.steps,
        }]
    } else {
        args.budget.clone()
    };
    let mut rows = Vec::new();
    for m in &args.methods {
        let base = LmMethodSpec {
            method: m.clone(),
            label: m.clone(),
            eta: 0.0,
            lr: None,
            budget: budgets[0],
            // Without --budget the baseline trains every parameter (the paper's).
            dyn_eval_top_layers_only: !args.budget.is_empty(),
        };
        if !adapts(m) {
            rows.push(PendingRow {
                spec: base,
                step: StepSource::None,
            });
            continue;
        }
        for budget in &budgets {
            let mut spec = base.clone();
            spec.budget = *budget;
            if budgets.len() > 1 {
                spec.label += &format!(" {budget}");
            }
            if let (true, Some(lr)) = (m == "dyn-eval", args.lr) {
                spec.lr = Some(lr);
                rows.push(PendingRow {
                    step: StepSource::Given(TuneRecord::given(&spec.label, "lr", lr, "--lr")),
                    spec,
                });
            } else if let Some(etas) = &args.inner_lr {
                for &eta in etas {
                    let mut spec = spec.clone();
                    spec.eta = eta;
                    if etas.len() > 1 {
                        spec.label += &format!(" eta={eta:e}");
                    }
                    rows.push(PendingRow {
                        step: StepSource::Given(TuneRecord::given(
                            &spec.label,
                            "eta",
                            eta,
                            "--inner-lr",
                        )),
                        spec,
                    });
                }
            } else {
                let parameter = if m == "dyn-eval" && args.grid("lr").is_some() {
                    "lr"
                } else {
                    "eta"
                };
                let grid = args.grid(parameter).expect("eta has a default grid");
                if args.tune_tint_via_ref && (m == "tint" || m == "tint-structured") {
                    if !args.methods.iter().any(|x| x == "tint-ref") {
                        bail!("--tune-tint-via-ref needs tint-ref among the --methods");
                    }
                    let from = spec.label.replacen(m.as_str(), "tint-ref", 1);
                    rows.push(PendingRow {
                        spec,
                        step: StepSource::Shared(from),
                    });
                    continue;
                }
                rows.push(PendingRow {
                    spec,
                    step: StepSource::Tune { parameter, grid },
                });
            }
        }
    }
    Ok(rows)
}

/// Runs `cargo xtask eval lm` and writes `<out>.json`, `<out>.md`, `<out>.svg` and
/// `<out>-paired.svg`.
pub(crate) fn run_lm(args: &LmArgs, progress: &Progress) -> Result<LmReport> {
    check_out_extension(&args.out, "json", "`eval lm`")?;
    let rows = pending_rows(args)?;
    let tuning_needed = rows
        .iter()
        .any(|r| matches!(r.step, StepSource::Tune { .. }));
    let (text_path, raw_docs) = load_documents(args.text.as_deref())?;
    let tokenizer = load_tokenizer(&args.model)?;
    let documents: Vec<Document> = raw_docs
        .iter()
        .map(|(name, content)| {
            Ok(Document {
                name: name.clone(),
                tokens: tokenizer.encode(content)?,
            })
        })
        .collect::<Result<_>>()?;
    let split = LmSplit::new(
        &documents,
        SplitSpec {
            block_size: args.block_size,
            eval_blocks: args.max_blocks,
            tune_blocks: if tuning_needed { args.tune_blocks } else { 0 },
            tune_every: args.tune_every,
        },
    )?;
    let (eval_docs, tune_docs) = split.used_documents();
    progress.note(&format!(
        "model {} | text {} ({} documents) | backend {BACKEND_NAME} | {} evaluation blocks, {} \
         tuning blocks ({})",
        args.model,
        text_path.display(),
        documents.len(),
        split.eval.len(),
        split.tune.len(),
        split.rule
    ));
    let model: AuxModel<AB> = load_aux::<AB>(&args.model, &device())?;
    if args.block_size > model.max_positions() {
        bail!(
            "--block-size {} exceeds the model's position table ({})",
            args.block_size,
            model.max_positions()
        );
    }
    let inference: AuxModel<B> = burn::module::AutodiffModule::valid(&model);
    let tint_config = args.tint.config(&inference, 0.0, args.steps)?;
    let config = LmEvalConfig {
        block_size: args.block_size,
        train_fractions: args.train_fraction.clone(),
        allow_non_finite: args.allow_non_finite,
        ..Default::default()
    };
    let settings = serde_json::json!({
        "args": args,
        "text": text_path,
        "documents": documents.len(),
        "text_tokens": documents.iter().map(|d| d.tokens.len()).sum::<usize>(),
        "backend": BACKEND_NAME,
        "lr_rule": "dyn-eval lr = --lr if given, else its tuned lr, else eta * (train tokens - 1) \
                    (matched step) with eta given or tuned",
        "split": {
            "rule": split.rule,
            "tune_fraction": args.tune_fraction,
            "eval_documents_used": eval_docs,
            "tune_documents_used": tune_docs,
            "eval_blocks": split.eval.len(),
            "tune_blocks": split.tune.len(),
        },
    });
    let fingerprint = Fingerprint::new(
        &settings,
        sha256_files(&checkpoint_files(&args.model)?)?,
        sha256_documents(&raw_docs),
        code_version(),
    );
    let stored = if args.resume {
        previous_report(&args.out, &fingerprint)?
    } else {
        None
    };
    let stored_cells = stored
        .as_ref()
        .map(|r| r.results.clone())
        .unwrap_or_default();
    let stored_tuning = stored
        .as_ref()
        .map(|r| r.tuning.clone())
        .unwrap_or_default();
    if !stored_cells.is_empty() {
        progress.note(&format!(
            "resuming: {} stored cells in {}",
            stored_cells.len(),
            args.out.display()
        ));
    }
    let write_partial = |results: Vec<tint_eval::MethodResult>, tuning: &[TuneRecord]| {
        LmReport {
            settings: serde_json::json!({
                "eval": &config, "run": &settings, "partial": true, "fingerprint": &fingerprint,
            }),
            results: merge(results, &stored_cells),
            paired: Vec::new(),
            tuning: tuning.to_vec(),
        }
        .write_json(&args.out)
    };

    // Units for the ETA: tuning blocks, then evaluated blocks.
    let tune_units: usize = rows
        .iter()
        .map(|r| match &r.step {
            StepSource::Tune { grid, .. } => grid.len() * split.tune.len(),
            _ => 0,
        })
        .sum();
    let eval_units = rows.len() * args.train_fraction.len() * split.eval.len();
    let total = tune_units + eval_units;
    let mut tuning: Vec<TuneRecord> = Vec::new();
    let mut specs: Vec<LmMethodSpec> = Vec::new();
    let tune_tokens = split.tune_tokens();
    let tune_split = format!("documents {}", tune_docs.join(", "));
    let mut done = 0;
    // Rows that share another row's choice go last, once it is known.
    let (shared_rows, own_rows): (Vec<PendingRow>, Vec<PendingRow>) = rows
        .into_iter()
        .partition(|r| matches!(r.step, StepSource::Shared(_)));
    let mut shared_specs = Vec::new();
    for row in own_rows.into_iter().chain(shared_rows) {
        let mut spec = row.spec;
        match row.step {
            StepSource::None => {}
            StepSource::Shared(from) => {
                let source = tuning.iter().find(|t| t.method == from).with_context(|| {
                    format!("{} takes the step of {from}, which did not run", spec.label)
                })?;
                let mut record = source.clone();
                record.method = spec.label.clone();
                record.source = format!(
                    "the choice of `{from}` (same update; the executions are tested equal), \
                     which was tuned on {}",
                    source.source
                );
                spec.eta = record.choice;
                tuning.push(record);
                shared_specs.push(spec);
                continue;
            }
            StepSource::Given(record) => tuning.push(record),
            StepSource::Tune { parameter, grid } => {
                let reused = stored_tuning.iter().find(|t| {
                    t.tuned && t.method == spec.label && t.parameter == parameter && t.grid == grid
                });
                let record = match reused {
                    Some(r) => {
                        done += grid.len() * tune_tokens.len();
                        progress.note(&format!("{}: stored tuning reused", spec.label));
                        r.clone()
                    }
                    None => {
                        let before = done;
                        let record = tune_lm(
                            &spec.label,
                            parameter,
                            &grid,
                            &tune_tokens,
                            args.tune_fraction,
                            &tune_split,
                            &mut |value| {
                                let mut s = spec.clone();
                                if parameter == "lr" {
                                    s.lr = Some(value);
                                } else {
                                    s.eta = value;
                                }
                                build_lm_method(&s, &model, &inference, &tint_config)
                            },
                            &mut |d, _, message| {
                                done = before + d;
                                progress.update(done, total, &message);
                            },
                        )
                        .map_err(non_finite_hint(TUNING_HINT))?;
                        progress.note(&record.summary());
                        record
                    }
                };
                if parameter == "lr" {
                    spec.lr = Some(record.choice);
                } else {
                    spec.eta = record.choice;
                }
                tuning.push(record);
                write_partial(Vec::new(), &tuning)?;
            }
        }
        specs.push(spec);
    }
    specs.extend(shared_specs);
    // Report order: the order of --methods.
    specs.sort_by_key(|s| args.methods.iter().position(|m| *m == s.method));
    let mut methods = specs
        .iter()
        .map(|s| build_lm_method(s, &model, &inference, &tint_config))
        .collect::<Result<Vec<_>, _>>()?;
    let mut finished: Vec<tint_eval::MethodResult> = Vec::new();
    let mut checkpoint_error = None;
    let tune_done = done;
    let mut report = run_lm_eval(
        &split.eval_tokens(),
        &config,
        &mut methods,
        settings.clone(),
        &stored_cells,
        &mut |p| {
            progress.update(tune_done + p.done, total, &p.message);
            if let Some(cell) = p.cell {
                finished.push(cell);
                if let Err(e) = write_partial(finished.clone(), &tuning) {
                    checkpoint_error.get_or_insert(e);
                }
            }
        },
    )
    .map_err(non_finite_hint(RECORD_HINT))?;
    progress.finish();
    for cell in report
        .results
        .iter()
        .filter(|c| !c.perplexity.value.is_finite())
    {
        let bad = cell
            .blocks
            .iter()
            .filter(|b| !b.sum_nll.is_finite())
            .count();
        progress.note(&format!(
            "{} f={}: {bad} block(s) with a non-finite NLL recorded (--allow-non-finite)",
            cell.method, cell.train_fraction
        ));
    }
    if let Some(e) = checkpoint_error {
        return Err(e).context("writing the partial report");
    }
    report.results = merge(report.results, &stored_cells);
    report.tuning = tuning;
    report.settings["fingerprint"] = serde_json::to_value(&fingerprint)?;
    report.compute_paired(&tint_eval::paired::PairedSettings {
        level: config.ci_level,
        seed: config.seed,
        ..Default::default()
    });
    report.write_json(&args.out)?;
    let table = report.markdown_table() + &report.paired_markdown();
    let md = args.out.with_extension("md");
    tint_eval::write_atomic(
        &md,
        format!(
            "{table}\nStep sizes:\n\n{}\nSettings: see {}\n",
            report.tuning_markdown(),
            args.out.display()
        )
        .as_bytes(),
    )?;
    let title = format!("{} on {}", args.model, file_label(&text_path));
    let svg = args.out.with_extension("svg");
    let paired_svg = paired_svg_path(&args.out);
    let finite = report
        .results
        .iter()
        .all(|c| c.perplexity.value.is_finite());
    if !finite {
        progress.note("charts not drawn: the report holds non-finite perplexities");
    } else {
        tint_eval::write_atomic(
            &svg,
            tint_eval::lm_plot::perplexity_svg(&report, &title)?.as_bytes(),
        )?;
    }
    if finite && report.paired.iter().any(|p| p.diff.baseline == "vanilla") {
        tint_eval::write_atomic(
            &paired_svg,
            tint_eval::lm_plot::difference_svg(&report, "vanilla", &title)?.as_bytes(),
        )?;
    }
    println!("{table}");
    println!("{}", report.tuning_markdown());
    for r in &report.results {
        println!(
            "{:>9} f={:.1}: {:.1}s",
            r.method, r.train_fraction, r.seconds
        );
    }
    let mut written = vec![args.out.display().to_string(), md.display().to_string()];
    if finite {
        written.push(svg.display().to_string());
    }
    if finite && report.paired.iter().any(|p| p.diff.baseline == "vanilla") {
        written.push(paired_svg.display().to_string());
    }
    println!("wrote {}", written.join(", "));
    Ok(report)
}

/// The context of a non-finite value in an evaluated cell.
pub(crate) const RECORD_HINT: &str =
    "a non-finite value (pass --allow-non-finite to record such values in the report)";
/// The context of a non-finite value in every value of a tuning grid.
pub(crate) const TUNING_HINT: &str =
    "every step size of the tuning grid gave a non-finite value, so none can be chosen (give \
     --inner-lr / --lr to skip tuning; --allow-non-finite then records non-finite values)";

/// Adds `hint` ([`RECORD_HINT`], [`TUNING_HINT`]) to an error that is, or is caused by, a
/// [`tint_eval::EvalError::NonFinite`]; other errors pass through as they are.
pub(crate) fn non_finite_hint<E>(hint: &'static str) -> impl FnOnce(E) -> anyhow::Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |error| {
        let non_finite = is_non_finite(&error);
        let error = anyhow::Error::new(error);
        if non_finite {
            error.context(hint)
        } else {
            error
        }
    }
}

/// Whether `error` or one of its sources is [`tint_eval::EvalError::NonFinite`].
fn is_non_finite(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        let eval = matches!(
            e.downcast_ref::<tint_eval::EvalError>(),
            Some(tint_eval::EvalError::NonFinite { .. })
        );
        let icl = e
            .downcast_ref::<tint_eval::icl::IclError>()
            .and_then(tint_eval::icl::runner::non_finite_origin)
            .is_some();
        if eval || icl {
            return true;
        }
        next = e.source();
    }
    false
}

/// The file name of `path`, for chart titles.
fn file_label(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The stored report at `out` when it was made with the same fingerprint (settings, checkpoint,
/// text, code). No file: nothing to resume.
fn previous_report(out: &Path, fingerprint: &Fingerprint) -> Result<Option<LmReport>> {
    if !out.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(out).with_context(|| format!("reading {}", out.display()))?;
    let previous: LmReport = serde_json::from_str(&text)
        .with_context(|| format!("{} is not an `eval lm` report", out.display()))?;
    let theirs: Fingerprint = serde_json::from_value(previous.settings["fingerprint"].clone())
        .with_context(|| {
            format!(
                "--resume: {} has no fingerprint (made by an older version); use another --out \
                 or drop --resume",
                out.display()
            )
        })?;
    let differences = theirs.differences(fingerprint);
    if !differences.is_empty() {
        bail!(
            "--resume: {} was made with another {}; use another --out or drop --resume",
            out.display(),
            differences.join(", ")
        );
    }
    Ok(Some(previous))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tune_grids_parse() {
        assert_eq!(
            parse_tune("eta=1e-5,3e-5").unwrap(),
            TuneGrid {
                parameter: "eta".into(),
                values: vec![1e-5, 3e-5]
            }
        );
        for bad in ["eta", "mu=1", "eta=", "eta=a", "lr=-1", "eta=1,inf"] {
            assert!(parse_tune(bad).is_err(), "{bad:?} must be refused");
        }
    }

    fn args(methods: &[&str]) -> LmArgs {
        let mut a = default_lm_args(Path::new("/tmp"), false);
        a.methods = methods.iter().map(|m| m.to_string()).collect();
        a.budget = Vec::new();
        a.tune_tint_via_ref = false;
        a
    }

    #[test]
    fn explicit_steps_skip_tuning_and_say_so() {
        let mut a = args(&["vanilla", "dyn-eval", "tint"]);
        let rows = pending_rows(&a).unwrap();
        assert!(matches!(rows[0].step, StepSource::None));
        assert!(matches!(
            rows[1].step,
            StepSource::Tune {
                parameter: "eta",
                ..
            }
        ));
        a.inner_lr = Some(vec![1e-4]);
        a.lr = Some(1e-2);
        let rows = pending_rows(&a).unwrap();
        for row in &rows[1..] {
            match &row.step {
                StepSource::Given(record) => {
                    assert!(!record.tuned && record.source.contains("not tuned"))
                }
                _ => panic!("an explicit step must not be tuned"),
            }
        }
        assert_eq!(rows[1].spec.lr, Some(1e-2));
        assert_eq!(rows[2].spec.eta, 1e-4);
        a.inner_lr = None;
        a.lr = None;
        a.tune.push(parse_tune("lr=1e-3,1e-2").unwrap());
        let rows = pending_rows(&a).unwrap();
        assert!(matches!(
            rows[1].step,
            StepSource::Tune {
                parameter: "lr",
                ..
            }
        ));
        assert!(matches!(
            rows[2].step,
            StepSource::Tune {
                parameter: "eta",
                ..
            }
        ));
        assert!(pending_rows(&args(&["gpt4"])).is_err());
        let mut via_ref = args(&["tint", "tint-structured", "tint-ref"]);
        via_ref.tune_tint_via_ref = true;
        let rows = pending_rows(&via_ref).unwrap();
        assert!(matches!(&rows[0].step, StepSource::Shared(from) if from == "tint-ref"));
        assert!(matches!(&rows[1].step, StepSource::Shared(from) if from == "tint-ref"));
        assert!(matches!(rows[2].step, StepSource::Tune { .. }));
        via_ref.methods = vec!["tint".into()];
        assert!(pending_rows(&via_ref).is_err(), "no tint-ref to share from");
    }

    #[test]
    fn out_must_have_the_report_extension() {
        assert!(check_out_extension(Path::new("r/lm.json"), "json", "lm").is_ok());
        for bad in ["x.md", "x", "x.json.md", "x.svg"] {
            let err = check_out_extension(Path::new(bad), "json", "lm").unwrap_err();
            assert!(err.to_string().contains(".json"), "{err}");
        }
    }

    #[test]
    fn the_date_is_a_civil_date() {
        let d = today();
        assert_eq!(d.len(), 10, "{d}");
        assert!(d.starts_with("20"), "{d}");
    }

    #[test]
    fn a_report_with_another_fingerprint_is_refused() {
        let dir = std::env::temp_dir().join(format!("tint-resume-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("lm.json");
        let fp = Fingerprint::new(
            &serde_json::json!({"args": {"max_blocks": 8}}),
            "a",
            "t",
            "v",
        );
        assert!(previous_report(&out, &fp).unwrap().is_none());
        LmReport {
            settings: serde_json::json!({ "fingerprint": fp }),
            results: vec![],
            paired: vec![],
            tuning: vec![],
        }
        .write_json(&out)
        .unwrap();
        assert!(previous_report(&out, &fp).unwrap().is_some());
        let mut other = fp.clone();
        other.checkpoint_sha256 = "b".into();
        let err = previous_report(&out, &other).unwrap_err().to_string();
        assert!(err.contains("checkpoint content"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
