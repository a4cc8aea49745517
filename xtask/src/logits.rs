//! `cargo xtask logits`: dump an auxiliary model's logits for given token ids, for cross-checking against
//! other implementations (HF transformers, the authors' TinT code).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use burn::tensor::{Int, Tensor, TensorData};

use crate::backend::{device, B};
use crate::model_arg::{load_aux, ModelArg};

/// Arguments of `cargo xtask logits`.
#[derive(clap::Args, Debug)]
pub(crate) struct LogitsArgs {
    /// Model: a directory (config.json + model.safetensors), a .gguf file, or a fetched asset name
    /// (`smollm2`).
    #[arg(long)]
    pub model: ModelArg,
    /// JSON file `{"input_ids": [[...], ...]}` (all rows of equal length).
    #[arg(long)]
    pub ids: PathBuf,
    /// Output safetensors file; holds `logits` `[batch, seq, vocab]` (f32; f64 with `--f64`), or with `--tint`
    /// `first_logits` and `final_logits`.
    #[arg(long)]
    pub out: PathBuf,
    /// Run the TinT simulator instead of the plain model; the ids file must hold `train_mask`.
    #[arg(long)]
    pub tint: bool,
    /// TinT inner learning rate `eta` (on the summed loss).
    #[arg(long, default_value_t = 1e-6)]
    pub inner_lr: f64,
    /// Simulated SGD steps.
    #[arg(long, default_value_t = 1)]
    pub steps: usize,
    /// Run the simulator in float64.
    #[arg(long)]
    pub f64: bool,
    /// Time the simulated step: one warm-up step, then `--repeat` timed steps, one
    /// `step_seconds <value>` line each (loading and construction excluded).
    #[arg(long)]
    pub timing: bool,
    /// Number of timed steps with `--timing`.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// How the simulator is evaluated with `--tint`: `constructed` (every module from its stored
    /// weights) or `structured` (the proven-equal shortcut that reads `W, b` out of the prefix rows).
    #[arg(long, value_enum, default_value_t = ExecutionArg::Constructed)]
    pub execution: ExecutionArg,
    /// Evaluate the stored gates in their official `tanh(g10 · …)` form instead of its 0/1 limit.
    #[arg(long)]
    pub tanh_gates: bool,
    /// Write logits that hold NaN or infinite values instead of failing (the failure names where the
    /// first non-finite value appeared: a weight, or the simulated update).
    #[arg(long)]
    pub allow_non_finite: bool,
    /// The most memory the request may need, in GiB (default: three quarters of the machine's
    /// memory). Before any tensor is made, the logits, one block's activations and its attention
    /// scores are estimated from the ids' shape and the model's sizes; a request over the limit is
    /// refused with the estimate. With --tint this counts the auxiliary model's part (both sets
    /// of logits), not the simulator's own state.
    #[arg(long)]
    pub max_memory_gib: Option<f64>,
    /// TinT hyper-parameters.
    #[command(flatten)]
    pub tint_flags: crate::eval::TintFlags,
}

/// Refuses a request whose estimated memory ([`tint_aux::ForwardMemory`]) is over the limit of
/// `--max-memory-gib` (or [`tint_aux::default_memory_limit`]); `logit_sets` is how many sets of
/// logits the request writes.
fn admit_memory(
    args: &LogitsArgs,
    ids: &IdsFile,
    model: &tint_aux::AuxModel<B>,
    logit_sets: u64,
) -> Result<()> {
    let limit = crate::memory_limit(args.max_memory_gib)?;
    let (batch, seq) = (ids.input_ids.len(), ids.input_ids[0].len());
    let value_bytes = if args.f64 { 8 } else { 4 };
    let mut memory = tint_aux::ForwardMemory::of_model(model, batch, seq, value_bytes);
    memory.logits = memory.logits.saturating_mul(logit_sets);
    memory.admit(
        &format!(
            "{}: logits of {batch} x {seq} token ids ({} vocabulary entries each)",
            args.ids.display(),
            model.vocab_size()
        ),
        limit,
        "--max-memory-gib",
    )?;
    Ok(())
}

/// Fails on non-finite `logits` unless `--allow-non-finite`; `cause` says where they came from.
fn check_logits<const D: usize>(
    args: &LogitsArgs,
    logits: &Tensor<B, D>,
    what: &str,
    cause: impl FnOnce() -> Option<String>,
) -> Result<()> {
    if args.allow_non_finite {
        return Ok(());
    }
    tint_aux::check_finite(logits, what, cause)
        .with_context(|| format!("{} (pass --allow-non-finite to write them anyway)", what))
}

/// `--execution` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutionArg {
    /// Every module computes its output from its own stored weights.
    Constructed,
    /// The structured shortcut (proven equal to the constructed execution).
    Structured,
}

impl From<ExecutionArg> for tint_sim::Execution {
    fn from(arg: ExecutionArg) -> Self {
        match arg {
            ExecutionArg::Constructed => tint_sim::Execution::Constructed,
            ExecutionArg::Structured => tint_sim::Execution::Structured,
        }
    }
}

/// The `{"input_ids": …}` file (parsed and checked by [`tint_aux::TokenIds`]).
pub(crate) type IdsFile = tint_aux::TokenIds;

/// Reads and checks an ids file: at least one row, rows non-empty and of equal length, integer ids ≥ 0,
/// a `train_mask` of 0/1 of the same shape (see [`tint_aux::ids`]).
pub(crate) fn read_ids(path: &Path) -> Result<IdsFile> {
    Ok(tint_aux::TokenIds::read(path)?)
}

/// Token ids as a `[batch, seq]` Int tensor.
pub(crate) fn ids_tensor(rows: &[Vec<i64>]) -> Tensor<B, 2, Int> {
    let flat: Vec<i64> = rows.iter().flatten().copied().collect();
    Tensor::from_data(
        TensorData::new(flat, [rows.len(), rows[0].len()]),
        &device(),
    )
}

/// Writes named float tensors to a safetensors file, as F64 when the tensor is f64 and F32 otherwise.
pub(crate) fn write_safetensors(path: &Path, tensors: Vec<(&str, Tensor<B, 3>)>) -> Result<()> {
    let owned: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, t)| {
            let shape = t.dims().to_vec();
            let (dtype, bytes) = if t.dtype() == burn::tensor::DType::F64 {
                let values = t
                    .into_data()
                    .convert::<f64>()
                    .to_vec::<f64>()
                    .expect("converted to f64");
                (
                    safetensors::Dtype::F64,
                    values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                )
            } else {
                let values = t
                    .into_data()
                    .convert::<f32>()
                    .to_vec::<f32>()
                    .expect("converted to f32");
                (
                    safetensors::Dtype::F32,
                    values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                )
            };
            (name.to_string(), dtype, shape, bytes)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = owned
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes)
                .expect("shape and byte length agree");
            (name.clone(), view)
        })
        .collect();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating directory {}", dir.display()))?;
    }
    let bytes = safetensors::serialize(views, None)
        .with_context(|| format!("serialising tensors for {}", path.display()))?;
    tint_eval::write_atomic(path, &bytes)?;
    Ok(())
}

/// Refuses `--f64` (`requested`) on a backend without f64 matrix products (`supported` false),
/// naming the backend and why, before any model is loaded.
fn refuse_f64_without_matmul(
    requested: bool,
    supported: bool,
    backend: &str,
    why: &str,
) -> Result<()> {
    if requested && !supported {
        bail!(
            "--f64 needs f64 matrix products, which the {backend} backend does not have ({why}); \
             run --f64 with the default flex build"
        );
    }
    Ok(())
}

/// Runs `cargo xtask logits`.
pub(crate) fn run(args: &LogitsArgs) -> Result<()> {
    refuse_f64_without_matmul(
        args.f64,
        crate::backend::F64_MATMUL,
        crate::backend::BACKEND_NAME,
        crate::backend::F64_MATMUL_NOTE,
    )?;
    let ids = read_ids(&args.ids)?;
    let model = load_aux::<B>(&args.model, &device())?;
    // Before any tensor: an id that does not fit the backend's integer type would panic in the cast.
    ids.check_vocab(model.vocab_size())?;
    admit_memory(args, &ids, &model, if args.tint { 2 } else { 1 })?;
    if args.tint {
        return run_tint(args, &ids, &model);
    }
    let logits = model.forward(ids_tensor(&ids.input_ids))?;
    check_logits(args, &logits, "logits", || {
        tint_aux::first_non_finite_weight(&model).or_else(|| {
            Some(
                "every weight is finite and the config is validated: the forward overflowed".into(),
            )
        })
    })?;
    let dims = logits.dims();
    write_safetensors(&args.out, vec![("logits", logits)])?;
    println!("wrote logits {:?} to {}", dims, args.out.display());
    Ok(())
}

/// `logits --tint`: first-pass and final logits of the simulator.
fn run_tint(args: &LogitsArgs, ids: &IdsFile, model: &tint_aux::AuxModel<B>) -> Result<()> {
    ids.check_train_mask(&args.ids)
        .context("--tint needs a useful \"train_mask\" next to \"input_ids\"")?;
    let Some(mask) = &ids.train_mask else {
        bail!(
            "{}: --tint needs \"train_mask\" next to \"input_ids\"",
            args.ids.display()
        );
    };
    // The same rules as `eval lm` / `eval icl`: a finite, non-negative step, at least one step.
    tint_eval::run_settings::check_steps("--inner-lr", &[args.inner_lr])?;
    tint_eval::run_settings::check_step_count(args.steps)?;
    let mut config = args.tint_flags.config(model, args.inner_lr, args.steps)?;
    config.execution = args.execution.into();
    if args.tanh_gates {
        config.gate_mode = tint_sim::GateMode::Tanh;
    }
    let dtype = args.f64.then_some(burn::tensor::DType::F64);
    let simulator = tint_sim::ModelSimulator::new(model, config.clone(), dtype)?;
    let (hidden_size, num_prefixes, num_heads) = simulator.sizes();
    let flat: Vec<bool> = mask.iter().flatten().map(|&m| m == 1).collect();
    let train_mask = Tensor::<B, 2, burn::tensor::Bool>::from_data(
        TensorData::new(flat, [mask.len(), mask[0].len()]),
        &device(),
    );
    let input = tint_sim::SimInput::new(ids_tensor(&ids.input_ids), train_mask);
    eprintln!(
        "TinT ({:?} execution, {:?} gates): Ds {} P {} Hs {} sim layers {:?} steps {} eta {} ({} \
         parameters, official count; {} read by the constructed execution)",
        config.execution,
        config.gate_mode,
        hidden_size,
        num_prefixes,
        num_heads,
        config.step.n_simulation_layers,
        config.step.n_forward_backward,
        config.step.inner_lr,
        simulator.num_params(),
        simulator.num_params_read()
    );
    let mut output = simulator.forward(&input)?;
    if args.timing {
        // The warm-up step above is not timed; each timed step ends with a host read so that
        // asynchronous backends have finished.
        for _ in 0..args.repeat {
            let start = std::time::Instant::now();
            output = simulator.forward(&input)?;
            let _ = output.final_logits.clone().sum().into_data();
            println!("step_seconds {:.6}", start.elapsed().as_secs_f64());
        }
    }
    check_logits(args, &output.first_logits, "first_logits", || {
        tint_aux::first_non_finite_weight(model).or_else(|| {
            Some("every weight is finite: the simulator's first pass overflowed".into())
        })
    })?;
    check_logits(args, &output.final_logits, "final_logits", || {
        Some(format!(
            "first_logits are finite, so the simulated update made them non-finite (inner_lr {:e}, {} \
             step(s))",
            args.inner_lr, args.steps
        ))
    })?;
    let dims = output.final_logits.dims();
    write_safetensors(
        &args.out,
        vec![
            ("first_logits", output.first_logits),
            ("final_logits", output.final_logits),
        ],
    )?;
    println!(
        "wrote first_logits and final_logits {:?} to {} (loss {:.4} -> {:.4})",
        dims,
        args.out.display(),
        output.first_loss.mean(),
        output.final_loss.mean()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LogitsArgs,
    }

    #[test]
    fn f64_is_refused_only_where_the_backend_has_no_f64_matmul() {
        let err = refuse_f64_without_matmul(true, false, "cuda", "no f64 kernels").unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("the cuda backend does not have (no f64 kernels)")
                && message.contains("default flex build"),
            "{message}"
        );
        refuse_f64_without_matmul(true, true, "flex", "").unwrap();
        refuse_f64_without_matmul(false, false, "cuda", "no f64 kernels").unwrap();
    }

    fn read_f32(path: &Path, name: &str) -> (Vec<usize>, Vec<f32>) {
        let bytes = std::fs::read(path).unwrap();
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let t = file.tensor(name).unwrap();
        let values = match t.dtype() {
            safetensors::Dtype::F32 => t
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            safetensors::Dtype::I64 => t
                .data()
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f32)
                .collect(),
            other => panic!("unexpected dtype {other:?}"),
        };
        (t.shape().to_vec(), values)
    }

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("tint-xtask-{}-{name}", std::process::id()))
    }

    /// Official-code tolerance of docs/construction.md §13: finite differences at s = 1000 in f32 leave
    /// ~2e-3 between the official simulator and any re-implementation; the issue allows 5e-3.
    const OFFICIAL_F32_TOL: f32 = 5e-3;

    /// `logits --tint` end to end on the authors' golden micro_s4 case (first 64 vocabulary columns).
    #[test]
    fn logits_tint_reproduces_the_official_golden() {
        let root = crate::eval::project_root();
        let golden = root.join("crates/tint-sim/tests/fixtures/micro_s4_golden.safetensors");
        let (shape, ids) = read_f32(&golden, "input_ids");
        let (_, mask) = read_f32(&golden, "bidirection_mask");
        let rows = |v: &[f32]| -> Vec<Vec<i64>> {
            v.chunks(shape[1])
                .map(|r| r.iter().map(|&x| x as i64).collect())
                .collect()
        };
        let ids_path = temp("ids.json");
        let json = serde_json::json!({"input_ids": rows(&ids), "train_mask": rows(&mask)});
        std::fs::write(&ids_path, json.to_string()).unwrap();
        let out = temp("out.safetensors");
        let model = root.join("fixtures/official-tint/micro-gpt2-random");
        let cli = Cli::try_parse_from([
            "logits",
            "--model",
            model.to_str().unwrap(),
            "--ids",
            ids_path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--tint",
            "--inner-lr",
            "0.01",
            "--official-compat",
            "--tint-hidden-size",
            "160",
            "--tint-prefixes",
            "8",
            "--tint-heads",
            "20",
        ])
        .unwrap();
        // The unoptimised test binary needs more than the 2 MiB default test-thread stack for the
        // simulator's module structs (the release/xtask main thread has 8 MiB).
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || run(&cli.args).unwrap())
            .unwrap()
            .join()
            .unwrap();
        let (out_shape, final_logits) = read_f32(&out, "final_logits");
        let (_, expected) = read_f32(&golden, "tint_final_logits_f32");
        let vocab = out_shape[2];
        let cols = expected.len() / (shape[0] * shape[1]);
        let mut max_diff = 0f32;
        for row in 0..shape[0] * shape[1] {
            for c in 0..cols {
                max_diff =
                    max_diff.max((final_logits[row * vocab + c] - expected[row * cols + c]).abs());
            }
        }
        assert!(max_diff <= OFFICIAL_F32_TOL, "max |diff| {max_diff}");
        std::fs::remove_file(ids_path).ok();
        std::fs::remove_file(out).ok();
    }

    /// Memory admission (issue 66 item 2): a request over `--max-memory-gib` is refused before any
    /// tensor is made, with the file, the shape, the estimate and the flag; the same request
    /// under the default limit runs; a limit that is not a positive number is refused.
    #[test]
    fn a_request_over_the_memory_limit_is_refused_before_it_allocates() {
        let root = crate::eval::project_root();
        let model = root.join("fixtures/llama/tiny");
        let ids_path = temp("admission-ids.json");
        std::fs::write(&ids_path, r#"{"input_ids": [[1, 2, 3, 4], [5, 6, 7, 8]]}"#).unwrap();
        let out = temp("admission-out.safetensors");
        let args = |limit: Option<&str>| {
            let mut argv = vec![
                "logits".to_string(),
                "--model".into(),
                model.display().to_string(),
                "--ids".into(),
                ids_path.display().to_string(),
                "--out".into(),
                out.display().to_string(),
            ];
            if let Some(limit) = limit {
                argv.push(format!("--max-memory-gib={limit}"));
            }
            Cli::try_parse_from(argv).unwrap().args
        };
        let message = format!("{:#}", run(&args(Some("1e-9"))).unwrap_err());
        assert!(
            message.contains("logits of 2 x 4 token ids (97 vocabulary entries each)")
                && message.contains("over the limit")
                && message.contains("--max-memory-gib"),
            "{message}"
        );
        assert!(!out.exists(), "a refused request wrote {}", out.display());
        for bad in ["0", "-1", "NaN"] {
            let message = format!("{:#}", run(&args(Some(bad))).unwrap_err());
            assert!(
                message.contains("--max-memory-gib must be a positive number of GiB"),
                "{bad}: {message}"
            );
        }
        run(&args(None)).unwrap();
        assert!(out.exists());
        std::fs::remove_file(ids_path).ok();
        std::fs::remove_file(out).ok();
    }

    #[test]
    fn ids_files_are_checked() {
        let cases = [
            (r#"{"input_ids": []}"#, "empty"),
            (r#"{"input_ids": [[1, 2], [3]]}"#, "same length"),
            (r#"{"input_ids": [[1, -2]]}"#, "negative"),
            (
                r#"{"input_ids": [[1, 2]], "train_mask": [[1]]}"#,
                "shape of input_ids",
            ),
            (
                r#"{"input_ids": [[1, 2]], "train_mask": [[1, 2]]}"#,
                "0 or 1",
            ),
            (r#"{"ids": [[1]]}"#, "expected"),
        ];
        for (i, (text, expected)) in cases.iter().enumerate() {
            let path = temp(&format!("bad{i}.json"));
            std::fs::write(&path, text).unwrap();
            let err = format!("{:#}", read_ids(&path).err().unwrap());
            assert!(err.contains(expected), "{text}: {err}");
            std::fs::remove_file(path).ok();
        }
    }
}
