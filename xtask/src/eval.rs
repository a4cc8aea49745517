//! `cargo xtask eval`: the experiments. With no subcommand, the default suite; `--quick` for a smoke run.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tint_aux::AuxModel;
use tint_eval::methods::Vanilla;
use tint_eval::{run_lm_eval, LmEvalConfig, LmMethod, LmReport};

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
}

#[derive(clap::Subcommand, Debug)]
enum EvalWhat {
    /// Language-modelling perplexity per method (paper Table 2).
    Lm(LmArgs),
    /// Contextually Guided Transformer: reduced-scale Table 1 (see `--preset`).
    Cgt(crate::eval_cgt::CgtArgs),
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
    /// Methods, comma-separated: vanilla, dyn-eval.
    #[arg(long, value_delimiter = ',', default_value = "vanilla,dyn-eval")]
    pub methods: Vec<String>,
    /// Dynamic-evaluation learning rate on the MEAN loss. Default: matched to TinT,
    /// `inner_lr × (train tokens − 1)` (TinT's step is on the summed loss).
    #[arg(long)]
    pub lr: Option<f64>,
    /// TinT inner learning rate `eta` on the SUMMED loss.
    #[arg(long, default_value_t = 1e-5)]
    pub inner_lr: f64,
    /// SGD steps of dynamic evaluation (and simulated steps of TinT).
    #[arg(long, default_value_t = 1)]
    pub steps: usize,
    /// Output JSON file (a markdown table is written next to it).
    #[arg(long, default_value = "results/lm.json")]
    pub out: PathBuf,
}

fn display<S: serde::Serializer, T: std::fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Runs `cargo xtask eval …`.
pub fn run(args: &EvalArgs) -> Result<()> {
    match &args.what {
        Some(EvalWhat::Lm(lm)) => run_lm(lm).map(|_| ()),
        Some(EvalWhat::Cgt(cgt)) => crate::eval_cgt::run(cgt),
        None if args.quick => run_quick(&args.out),
        None => run_default(&args.out),
    }
}

/// The default suite: SmolLM2-135M on SOTU, vanilla vs dynamic evaluation at 30/50/70/90 %.
fn run_default(out: &Path) -> Result<()> {
    let lm = LmArgs {
        model: ModelArg::SmolLm2,
        text: None,
        block_size: 256,
        train_fraction: vec![0.3, 0.5, 0.7, 0.9],
        max_blocks: 8,
        methods: vec!["vanilla".into(), "dyn-eval".into()],
        lr: None,
        inner_lr: 1e-5,
        steps: 1,
        out: out.join("lm-smollm2-sotu.json"),
    };
    run_lm(&lm)?;
    Ok(())
}

/// The smoke suite: the committed micro GPT-2 on a committed public-domain text.
fn run_quick(out: &Path) -> Result<()> {
    let root = project_root();
    let lm = LmArgs {
        model: ModelArg::Dir(root.join("fixtures/official-tint/micro-gpt2-random")),
        text: Some(root.join("fixtures/text/sotu-1790-washington.txt")),
        block_size: 64,
        train_fraction: vec![0.5],
        max_blocks: 4,
        methods: vec!["vanilla".into(), "dyn-eval".into()],
        lr: None,
        inner_lr: 1e-2,
        steps: 1,
        out: out.join("lm-quick.json"),
    };
    run_lm(&lm)?;
    Ok(())
}

/// The repository root (xtask lives one level below it).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent").to_path_buf()
}

/// Runs `cargo xtask eval lm` and writes `<out>.json` and `<out>.md`.
pub fn run_lm(args: &LmArgs) -> Result<LmReport> {
    for m in &args.methods {
        if !["vanilla", "dyn-eval"].contains(&m.as_str()) {
            bail!("unknown method {m:?}; available: vanilla, dyn-eval");
        }
    }
    let text_path = match &args.text {
        Some(p) => p.clone(),
        None => crate::fetch::sotu_text()?,
    };
    let text = std::fs::read_to_string(&text_path).with_context(|| format!("reading {}", text_path.display()))?;
    eprintln!("model {} | text {} | backend {BACKEND_NAME}", args.model, text_path.display());
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
    let mut methods: Vec<Box<dyn LmMethod + '_>> = Vec::new();
    for m in &args.methods {
        match m.as_str() {
            "vanilla" => methods.push(Box::new(Vanilla { model: &inference })),
            "dyn-eval" => methods.push(Box::new(tint_eval::methods::DynEval {
                model: &model,
                lr: args.lr,
                inner_lr: args.inner_lr,
                steps: args.steps,
            })),
            _ => unreachable!("checked above"),
        }
    }
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}")
            .expect("valid template"),
    );
    let settings = serde_json::json!({
        "args": args,
        "text": text_path,
        "text_tokens": tokens.len(),
        "backend": BACKEND_NAME,
        "lr_rule": "dyn-eval lr = --lr if given, else inner_lr * (train tokens - 1) (matched step)",
    });
    let report = run_lm_eval(&tokens, &config, &mut methods, settings, &mut |p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(p.message);
    })?;
    bar.finish_and_clear();
    report.write_json(&args.out)?;
    let table = report.markdown_table();
    let md = args.out.with_extension("md");
    std::fs::write(&md, format!("{table}\nSettings: see {}\n", args.out.display()))
        .with_context(|| format!("writing {}", md.display()))?;
    println!("{table}");
    for r in &report.results {
        println!("{:>9} f={:.1}: {:.1}s", r.method, r.train_fraction, r.seconds);
    }
    println!("wrote {} and {}", args.out.display(), md.display());
    Ok(report)
}
