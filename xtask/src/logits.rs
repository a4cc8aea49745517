//! `cargo xtask logits`: dump an auxiliary model's logits for given token ids, for cross-checking against
//! other implementations (HF transformers, the authors' TinT code).

use anyhow::{bail, Result};
use tint_eval::logits::{
    write_logits, LogitsArgs, LogitsEvent, LogitsRequest, LogitsWritten, TintLogits,
};

use crate::backend::{device, B};
use crate::model_arg::load_aux;

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
        execution: args.execution,
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

    fn temp(name: &str) -> std::path::PathBuf {
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
