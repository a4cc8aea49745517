//! `cargo xtask logits`: dump an auxiliary model's logits for given token ids, for cross-checking against
//! other implementations (HF transformers, the authors' TinT code).

use std::path::PathBuf;

use anyhow::{bail, Result};
use tint_eval::logits::{write_logits, LogitsEvent, LogitsRequest, LogitsWritten, TintLogits};

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

/// Runs `cargo xtask logits`: one call of [`tint_eval::logits::write_logits`].
pub(crate) fn run(args: &LogitsArgs) -> Result<()> {
    refuse_f64_without_matmul(
        args.f64,
        crate::backend::F64_MATMUL,
        crate::backend::BACKEND_NAME,
        crate::backend::F64_MATMUL_NOTE,
    )?;
    let ids = tint_aux::TokenIds::read(&args.ids)?;
    let model = load_aux::<B>(&args.model, &device())?;
    let request = LogitsRequest {
        ids_path: &args.ids,
        ids: &ids,
        out: &args.out,
        f64: args.f64,
        allow_non_finite: args.allow_non_finite,
        memory_limit: crate::memory_limit(args.max_memory_gib)?,
    };
    let tint = args.tint.then(|| TintLogits {
        flags: args.tint_flags.clone(),
        inner_lr: args.inner_lr,
        steps: args.steps,
        execution: args.execution.into(),
        tanh_gates: args.tanh_gates,
        timed_steps: args.timing.then_some(args.repeat),
    });
    let written = write_logits(
        &model,
        &device(),
        &request,
        tint.as_ref(),
        &mut |event| match event {
            LogitsEvent::SimulatorBuilt(line) => eprintln!("{line}"),
            LogitsEvent::TimedStep(seconds) => println!("step_seconds {seconds:.6}"),
        },
    )?;
    match written {
        LogitsWritten::Model { dims } => {
            println!("wrote logits {:?} to {}", dims, args.out.display())
        }
        LogitsWritten::Tint {
            dims,
            first_loss,
            final_loss,
        } => println!(
            "wrote first_logits and final_logits {:?} to {} (loss {:.4} -> {:.4})",
            dims,
            args.out.display(),
            first_loss,
            final_loss
        ),
    }
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

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("tint-xtask-{}-{name}", std::process::id()))
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
}
