//! `cargo xtask eval`: the experiments. With no subcommand, the default suite; `--quick` for a smoke run.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tint_aux::AuxModel;
use tint_eval::methods::{default_tint_config, Labelled, Tint, Vanilla};
use tint_eval::{run_lm_eval, LmEvalConfig, LmMethod, LmReport};
use tint_sim::TintConfig;

use crate::backend::{device, AB, B, BACKEND_NAME};
use crate::model_arg::{load_aux, load_tokenizer, ModelArg};

/// Arguments of `cargo xtask eval`.
#[derive(clap::Args, Debug)]
pub struct EvalArgs {
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
pub struct LmArgs {
    /// Auxiliary model: a directory, a .gguf file or `smollm2` (fetched on demand).
    #[arg(long, default_value = "smollm2")]
    #[serde(serialize_with = "display")]
    pub model: ModelArg,
    /// Text corpus; default: the State of the Union addresses (fetched on demand).
    #[arg(long)]
    pub text: Option<PathBuf>,
    /// Tokens per block.
    #[arg(long, default_value_t = 256)]
    pub block_size: usize,
    /// Fractions of each block used for training, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.3,0.5,0.7,0.9")]
    pub train_fraction: Vec<f64>,
    /// At most this many blocks, evenly spaced over the text.
    #[arg(long, default_value_t = 8)]
    pub max_blocks: usize,
    /// Methods, comma-separated: vanilla, dyn-eval, tint (the simulator), tint-ref (its functional
    /// reference).
    #[arg(long, value_delimiter = ',', default_value = "vanilla,dyn-eval")]
    pub methods: Vec<String>,
    /// Dynamic-evaluation learning rate on the MEAN loss. Default: matched to TinT,
    /// `inner_lr × (train tokens − 1)` (TinT's step is on the summed loss).
    #[arg(long)]
    pub lr: Option<f64>,
    /// TinT inner learning rate `eta` on the SUMMED loss; a comma-separated list is a grid (every
    /// adaptive method runs once per value, named `<method> eta=<value>`).
    #[arg(long, value_delimiter = ',', default_value = "1e-5")]
    pub inner_lr: Vec<f64>,
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
    /// settings and compute only the missing ones (the JSON is rewritten after every cell).
    #[arg(long)]
    pub resume: bool,
    /// TinT hyper-parameters (`--tint-hidden-size`, `--tint-prefixes`, `--tint-heads`, `--sim-layers`, …).
    #[command(flatten)]
    pub tint: TintFlags,
    /// Output JSON file (a markdown table is written next to it).
    #[arg(long, default_value = "results/lm.json")]
    pub out: PathBuf,
}

/// The methods `eval lm` knows.
const METHODS: [&str; 4] = ["vanilla", "dyn-eval", "tint", "tint-ref"];

/// A compute budget of the adaptive methods: the top `layers` blocks (`None` = all) for `steps`
/// steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Budget {
    /// Updated (simulated) top layers; `None` = every layer.
    pub layers: Option<usize>,
    /// Steps on the training part.
    pub steps: usize,
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.layers {
            Some(l) => write!(f, "{l}x{}", self.steps),
            None => write!(f, "allx{}", self.steps),
        }
    }
}

/// Parses `LAYERSxSTEPS` (`12x1`, `allx2`; `×` also accepted).
pub fn parse_budget(text: &str) -> Result<Budget, String> {
    let bad = || format!("budget {text:?}: expected LAYERSxSTEPS, e.g. 12x1, 6x2 or allx1");
    let (layers, steps) = text.trim().split_once(['x', 'X', '×']).ok_or_else(bad)?;
    let layers = match layers.trim() {
        "all" => None,
        n => Some(n.parse::<usize>().map_err(|_| bad())?),
    };
    let steps: usize = steps.trim().parse().map_err(|_| bad())?;
    if steps == 0 || layers == Some(0) {
        return Err(format!(
            "budget {text:?}: layers and steps must be at least 1"
        ));
    }
    Ok(Budget { layers, steps })
}

/// TinT hyper-parameters on the command line (shared by `eval lm` and `logits --tint`).
#[derive(clap::Args, Debug, Clone, serde::Serialize)]
pub struct TintFlags {
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
    pub fn sim_layer_count(&self) -> Result<Option<usize>> {
        Ok(match self.sim_layers.as_str() {
            "all" => None,
            n => Some(
                n.parse()
                    .with_context(|| format!("--sim-layers {n:?}: expected a number or `all`"))?,
            ),
        })
    }

    /// The simulator configuration for `model` with step `inner_lr` and `steps` simulated steps.
    pub fn config<Bk: burn::tensor::backend::Backend>(
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
pub fn run(args: &EvalArgs) -> Result<()> {
    match &args.what {
        Some(EvalWhat::Lm(lm)) => run_lm(lm).map(|_| ()),
        Some(EvalWhat::Cgt(cgt)) => crate::eval_cgt::run(cgt),
        Some(EvalWhat::Icl(icl)) => crate::eval_icl::run(icl),
        None if args.quick => run_quick(&args.out),
        None => run_default(&args.out, args.resume),
    }
}

/// Blocks of the default suite's language-modelling run (every method sees the same blocks; TinT
/// simulating all 30 SmolLM2 layers takes ~40 s a block on 2 cores, which sets the suite's time).
const DEFAULT_LM_BLOCKS: usize = 4;

/// The default suite (about 30 minutes on a 2-core CPU): SmolLM2-135M on SOTU blocks, vanilla vs
/// dynamic evaluation vs TinT (the constructed LLaMA simulator) vs its functional reference at
/// 30/50/70/90 %; then in-context classification on the offline movie-review snippets (plain ICL vs
/// dynamic evaluation, 0 and 4 shots, with and without calibration). Rewrites the `lm:default` and
/// `icl:default` sections of `docs/results.md` and copies the JSON and SVG charts to `docs/data/`.
fn run_default(out: &Path, resume: bool) -> Result<()> {
    let suite_start = std::time::Instant::now();
    let lm = LmArgs {
        model: ModelArg::SmolLm2,
        text: None,
        block_size: 256,
        train_fraction: vec![0.3, 0.5, 0.7, 0.9],
        max_blocks: DEFAULT_LM_BLOCKS,
        methods: METHODS.map(String::from).to_vec(),
        lr: None,
        // eta = 1e-4 on the summed loss, i.e. lr ≈ 1.3e-2 on the mean loss at 50 %: the best of
        // {1e-5, 1e-4, 4e-4} on two SOTU blocks (docs/results.md).
        inner_lr: vec![1e-4],
        steps: 1,
        budget: Vec::new(),
        resume,
        tint: TintFlags::default(),
        out: out.join("lm-smollm2-sotu.json"),
    };
    let start = std::time::Instant::now();
    let report = run_lm(&lm)?;
    let lm_seconds = start.elapsed().as_secs_f64();
    let data_dir = project_root().join("docs/data");
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let lm_json = copy_into(&lm.out, &data_dir)?;
    let lm_svg = copy_into(&lm.out.with_extension("svg"), &data_dir)?;
    let section = format!(
        "## Language modelling: SmolLM2-135M on State-of-the-Union blocks\n\n\
         Command: `cargo xtask eval` (backend {BACKEND_NAME}; {lm_seconds:.0} s for this part). \
         Perplexity of the evaluated part of {} blocks of {} tokens, 95 % bootstrap intervals over \
         blocks. One step on the training part with eta = {} on the SUMMED loss: `tint` is the \
         constructed LLaMA simulator (all 30 layers simulated, docs/tint-llama.md), `tint-ref` its \
         functional reference, `dyn-eval` plain SGD on the MEAN loss of all parameters with the \
         matched lr = eta x (train tokens - 1). JSON with every setting and per-block losses: \
         `docs/data/{lm_json}`.\n\n{}\n![perplexity vs train fraction](data/{lm_svg})\n",
        report.settings["blocks"],
        lm.block_size,
        lm.inner_lr[0],
        report.markdown_table()
    );
    let doc = project_root().join("docs/results.md");
    crate::report_doc::write_marked_section(&doc, "lm:default", &section, RESULTS_HEADER)?;

    let icl = default_icl_args(out, resume);
    let start = std::time::Instant::now();
    let icl_report = crate::eval_icl::run_report(&icl)?;
    let icl_seconds = start.elapsed().as_secs_f64();
    let icl_json = copy_into(&icl.out, &data_dir)?;
    let stem = icl.out.with_extension("");
    let bars = copy_into(
        Path::new(&format!("{}-accuracy.svg", stem.display())),
        &data_dir,
    )?;
    let section = format!(
        "## In-context classification: SmolLM2-135M on movie-review snippets\n\n\
         Command: `cargo xtask eval` (backend {BACKEND_NAME}; {icl_seconds:.0} s for this part); the \
         same cells as `cargo xtask eval icl --shots 0,{k} --n-test {n_test}`. Seeds {seeds:?}, \
         {n_test} held-out examples. dyn-eval: one SGD step (lr {lr:e}, mean label loss, all \
         parameters) on the {k} demonstrations, each in its own sequence (`single` format); \
         zero-shot, on the query's own context. TinT on this task is the `icl:tint` section below \
         (its simulated forward of all 30 layers per query does not fit the suite's 30 minutes). \
         JSON with every prediction: `docs/data/{icl_json}`.\n\n{}\n![accuracy](data/{bars})\n",
        icl_report.markdown(),
        k = icl.shots[1],
        n_test = icl.n_test,
        seeds = icl.seeds,
        lr = icl.lr[0],
    );
    crate::report_doc::write_marked_section(&doc, "icl:default", &section, RESULTS_HEADER)?;
    println!(
        "updated {} ({:.0} s in all)",
        doc.display(),
        suite_start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The default suite's in-context classification run: SmolLM2 on the movie-review snippets, plain
/// ICL vs dynamic evaluation, 0 and 4 shots, three seeds.
fn default_icl_args(out: &Path, resume: bool) -> crate::eval_icl::IclArgs {
    crate::eval_icl::IclArgs {
        shots: vec![0, 4],
        n_test: DEFAULT_ICL_TEST_EXAMPLES,
        out: out.join("icl-smollm2-mr.json"),
        resume,
        ..Default::default()
    }
}

/// Held-out examples of the default suite's ICL run.
const DEFAULT_ICL_TEST_EXAMPLES: usize = 50;

/// Copies `file` into `dir`; returns its file name.
fn copy_into(file: &Path, dir: &Path) -> Result<String> {
    let name = file
        .file_name()
        .with_context(|| format!("{} has no file name", file.display()))?;
    std::fs::copy(file, dir.join(name))
        .with_context(|| format!("copying {} to {}", file.display(), dir.display()))?;
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
        methods: ["vanilla", "dyn-eval", "tint", "tint-ref"]
            .map(String::from)
            .to_vec(),
        lr: None,
        inner_lr: vec![1e-2],
        steps: 1,
        budget: Vec::new(),
        resume: false,
        tint: TintFlags::default(),
        out: out.join("lm-quick.json"),
    };
    run_lm(&lm)?;
    Ok(())
}

/// The repository root (xtask lives one level below it).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent")
        .to_path_buf()
}

/// Runs `cargo xtask eval lm` and writes `<out>.json` and `<out>.md`.
pub fn run_lm(args: &LmArgs) -> Result<LmReport> {
    for m in &args.methods {
        if !METHODS.contains(&m.as_str()) {
            bail!("unknown method {m:?}; available: {}", METHODS.join(", "));
        }
    }
    if args.inner_lr.is_empty()
        || args
            .inner_lr
            .iter()
            .any(|eta| !eta.is_finite() || *eta < 0.0)
    {
        bail!(
            "--inner-lr {:?}: give one or more finite, non-negative learning rates",
            args.inner_lr
        );
    }
    let text_path = match &args.text {
        Some(p) => p.clone(),
        None => crate::fetch::sotu_text()?,
    };
    let text = std::fs::read_to_string(&text_path)
        .with_context(|| format!("reading {}", text_path.display()))?;
    eprintln!(
        "model {} | text {} | backend {BACKEND_NAME}",
        args.model,
        text_path.display()
    );
    let tokenizer = load_tokenizer(&args.model)?;
    let tokens = tokenizer.encode(&text)?;
    // Only the blocks that will be used are needed; the tokenizer is fast, the models are not.
    let model: AuxModel<AB> = load_aux::<AB>(&args.model, &device())?;
    if args.block_size > model.max_positions() {
        bail!(
            "--block-size {} exceeds the model's position table ({})",
            args.block_size,
            model.max_positions()
        );
    }
    let inference: AuxModel<B> = burn::module::AutodiffModule::valid(&model);
    let config = LmEvalConfig {
        block_size: args.block_size,
        train_fractions: args.train_fraction.clone(),
        max_blocks: args.max_blocks,
        ..Default::default()
    };
    let budgets = if args.budget.is_empty() {
        vec![Budget {
            layers: args.tint.sim_layer_count()?,
            steps: args.steps,
        }]
    } else {
        args.budget.clone()
    };
    let mut methods: Vec<Box<dyn LmMethod + '_>> = Vec::new();
    for m in &args.methods {
        if m == "vanilla" {
            methods.push(Box::new(Vanilla::new(&inference)));
            continue;
        }
        for &eta in &args.inner_lr {
            for budget in &budgets {
                let mut label = m.clone();
                if args.inner_lr.len() > 1 {
                    label += &format!(" eta={eta:e}");
                }
                if budgets.len() > 1 {
                    label += &format!(" {budget}");
                }
                let method: Box<dyn LmMethod + '_> = match m.as_str() {
                    "dyn-eval" => Box::new(tint_eval::methods::DynEval {
                        model: &model,
                        lr: args.lr,
                        inner_lr: eta,
                        steps: budget.steps,
                        // Without --budget the baseline trains every parameter (the paper's).
                        top_layers: if args.budget.is_empty() {
                            None
                        } else {
                            budget.layers
                        },
                    }),
                    "tint" | "tint-ref" => {
                        let mut config = args.tint.config(&inference, eta, budget.steps)?;
                        config.n_simulation_layers = budget.layers;
                        if m == "tint" {
                            Box::new(Tint::simulator(&inference, config)?)
                        } else {
                            Box::new(Tint::reference(&inference, config)?)
                        }
                    }
                    _ => unreachable!("checked above"),
                };
                methods.push(Box::new(Labelled { label, method }));
            }
        }
    }
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template(
            "{bar:30} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}",
        )
        .expect("valid template"),
    );
    let settings = serde_json::json!({
        "args": args,
        "text": text_path,
        "text_tokens": tokens.len(),
        "backend": BACKEND_NAME,
        "lr_rule": "dyn-eval lr = --lr if given, else inner_lr * (train tokens - 1) (matched step)",
    });
    let previous = if args.resume {
        previous_cells(&args.out, &settings)?
    } else {
        Vec::new()
    };
    if !previous.is_empty() {
        eprintln!(
            "resuming: {} finished cells in {}",
            previous.len(),
            args.out.display()
        );
    }
    let mut finished: Vec<tint_eval::MethodResult> = Vec::new();
    let mut checkpoint_error = None;
    let report = run_lm_eval(
        &tokens,
        &config,
        &mut methods,
        settings.clone(),
        &previous,
        &mut |p| {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
            bar.set_message(p.message);
            if let Some(cell) = p.cell {
                finished.push(cell);
                let partial = LmReport {
                    settings: serde_json::json!({ "eval": &config, "run": &settings, "partial": true }),
                    results: finished.clone(),
                };
                if let Err(e) = partial.write_json(&args.out) {
                    checkpoint_error.get_or_insert(e);
                }
            }
        },
    )?;
    bar.finish_and_clear();
    if let Some(e) = checkpoint_error {
        return Err(e).context("writing the partial report");
    }
    report.write_json(&args.out)?;
    let table = report.markdown_table();
    let md = args.out.with_extension("md");
    std::fs::write(
        &md,
        format!("{table}\nSettings: see {}\n", args.out.display()),
    )
    .with_context(|| format!("writing {}", md.display()))?;
    let svg = args.out.with_extension("svg");
    let title = format!("{} on {}", args.model, file_label(&text_path));
    std::fs::write(&svg, tint_eval::lm_plot::perplexity_svg(&report, &title)?)
        .with_context(|| format!("writing {}", svg.display()))?;
    println!("{table}");
    for r in &report.results {
        println!(
            "{:>9} f={:.1}: {:.1}s",
            r.method, r.train_fraction, r.seconds
        );
    }
    println!(
        "wrote {}, {} and {}",
        args.out.display(),
        md.display(),
        svg.display()
    );
    Ok(report)
}

/// The file name of `path`, for chart titles.
fn file_label(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The settings that must agree for a resumed run: everything but the method list, the output
/// path and `--resume` itself (cells are keyed by method name, which carries any grid point).
fn resume_fingerprint(settings: &serde_json::Value) -> serde_json::Value {
    let mut fingerprint = settings.clone();
    if let Some(args) = fingerprint
        .get_mut("args")
        .and_then(serde_json::Value::as_object_mut)
    {
        for key in ["methods", "out", "resume"] {
            args.remove(key);
        }
    }
    fingerprint
}

/// The finished cells of an earlier (possibly interrupted) run at `out`, checked to come from the
/// same settings. No file: nothing to resume.
fn previous_cells(
    out: &Path,
    settings: &serde_json::Value,
) -> Result<Vec<tint_eval::MethodResult>> {
    if !out.exists() {
        return Ok(Vec::new());
    }
    let text =
        std::fs::read_to_string(out).with_context(|| format!("reading {}", out.display()))?;
    let previous: LmReport = serde_json::from_str(&text)
        .with_context(|| format!("{} is not an `eval lm` report", out.display()))?;
    let theirs = previous
        .settings
        .get("run")
        .map(resume_fingerprint)
        .unwrap_or_default();
    if theirs != resume_fingerprint(settings) {
        bail!(
            "--resume: {} was made with other settings (model, text, blocks, grid, TinT flags); \
             use another --out or drop --resume",
            out.display()
        );
    }
    Ok(previous.results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_and_print() {
        assert_eq!(
            parse_budget("12x1").unwrap(),
            Budget {
                layers: Some(12),
                steps: 1
            }
        );
        assert_eq!(
            parse_budget("all×2").unwrap(),
            Budget {
                layers: None,
                steps: 2
            }
        );
        assert_eq!(parse_budget(" 3X4 ").unwrap().to_string(), "3x4");
        for bad in ["12", "x1", "ax1", "0x1", "3x0", "3x-1"] {
            assert!(parse_budget(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn resume_ignores_methods_and_output_but_not_settings() {
        let settings = |methods: &str, out: &str, blocks: usize| {
            serde_json::json!({
                "args": { "methods": [methods], "out": out, "resume": false, "max_blocks": blocks },
                "text": "sotu.txt",
            })
        };
        assert_eq!(
            resume_fingerprint(&settings("vanilla", "a.json", 8)),
            resume_fingerprint(&settings("tint", "b.json", 8))
        );
        assert_ne!(
            resume_fingerprint(&settings("vanilla", "a.json", 8)),
            resume_fingerprint(&settings("vanilla", "a.json", 4))
        );
    }

    #[test]
    fn resume_refuses_a_report_with_other_settings() {
        let dir = std::env::temp_dir().join(format!("tint-resume-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("lm.json");
        assert!(previous_cells(&out, &serde_json::json!({}))
            .unwrap()
            .is_empty());
        let run = serde_json::json!({ "args": { "max_blocks": 8 } });
        LmReport {
            settings: serde_json::json!({ "run": run }),
            results: vec![],
        }
        .write_json(&out)
        .unwrap();
        assert!(previous_cells(&out, &run).is_ok());
        let other = serde_json::json!({ "args": { "max_blocks": 2 } });
        let err = previous_cells(&out, &other).unwrap_err().to_string();
        assert!(err.contains("other settings"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
