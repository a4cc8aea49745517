//! `cargo xtask bench`: the front end of [`tint_bench`] (docs/performance.md). Parses the
//! flags, runs each measurement as a child process of this binary (the hidden `--child MODE:B
//! --model-dir DIR` form, which docs/performance.md cites), prints progress, and rewrites the
//! report's marked sections.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};
use tint_bench::{
    run_bench, run_measurement, BenchConfig, BenchError, BenchHost, BenchSettings, ChildRequest,
    ChildShape, Measurement, ReportSection, REPORT_HEADER, SGEMM_SIZE_CPU, SGEMM_SIZE_GPU,
};

use crate::backend::{device, B, BACKEND_NAME};
use tint_eval::results_doc::write_marked_section;

/// Side of the sgemm that measures the machine's matmul rate (larger on a GPU).
const SGEMM_SIZE: usize = if cfg!(any(feature = "cuda", feature = "wgpu")) {
    SGEMM_SIZE_GPU
} else {
    SGEMM_SIZE_CPU
};

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args, Debug)]
pub(crate) struct BenchArgs {
    /// Micro config (D = 32, 2 layers, T = 64) for a smoke test; writes its own report section.
    #[arg(long)]
    pub quick: bool,
    /// Report file (a marked section is rewritten; the rest of the file is kept). `--doc` is an
    /// alias (e.g. `--doc /tmp/perf.md` for a scratch run).
    #[arg(long, visible_alias = "doc", default_value = "docs/performance.md")]
    pub out: PathBuf,
    /// Timed runs per measurement (after one warm-up run).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Batch sizes of the simulator / reference / dyn-eval / aux measurements.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub batch_sizes: Vec<usize>,
    /// Measurements to run (structured, constructed, ref, dyn, aux, sgemm).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "structured,constructed,ref,dyn,aux,sgemm"
    )]
    pub modes: Vec<String>,
    /// Also time the structured execution, the constructed execution and the reference against
    /// B (1, 2, 4), T (64, 128, 256, half of it training tokens) and the number of simulated top
    /// layers (1, 2, all), into the `bench-<config>-scaling` section.
    #[arg(long)]
    pub scaling: bool,
    /// Executions and reference the scaling table times.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "structured,constructed,ref"
    )]
    pub scaling_modes: Vec<String>,
    /// Also time SmolLM2-135M (`cargo xtask fetch smollm2` first), T = 256, top `--smollm2-layers`
    /// layers updated: the LLaMA simulator (constructed and structured executions), the LLaMA
    /// functional reference, dynamic evaluation and a plain forward (`--smollm2-modes`), at
    /// `--smollm2-batch-sizes`.
    #[arg(long)]
    pub smollm2: bool,
    /// Only the SmolLM2 section (implies `--smollm2`): skip the tiny/micro measurements except the
    /// sgemm bound (when `--modes` names `sgemm`).
    #[arg(long)]
    pub smollm2_only: bool,
    /// Layers the SmolLM2 simulator, reference and dynamic evaluation update (the top ones).
    #[arg(long, default_value_t = 2)]
    pub smollm2_layers: usize,
    /// Batch sizes of the SmolLM2 measurements.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub smollm2_batch_sizes: Vec<usize>,
    /// SmolLM2 measurements to run (sim = the simulator's constructed execution, structured = its
    /// structured execution, ref, dyn, aux).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sim,structured,ref,dyn,aux"
    )]
    pub smollm2_modes: Vec<String>,
    /// Internal: run one measurement `MODE:BATCH` in this process and print it as JSON.
    #[arg(long, hide = true)]
    pub child: Option<String>,
    /// Internal: the checkpoint directory a child loads.
    #[arg(long, hide = true)]
    pub model_dir: Option<PathBuf>,
    /// Internal: the child's sequence length (default: the config's).
    #[arg(long, hide = true)]
    pub seq_length: Option<usize>,
    /// Internal: the child's number of simulated top layers (default: all).
    #[arg(long, hide = true)]
    pub sim_layers: Option<usize>,
}

/// Runs `cargo xtask bench`.
pub(crate) fn run(args: &BenchArgs) -> Result<()> {
    let config = BenchConfig::for_quick(args.quick);
    if let Some(spec) = &args.child {
        return run_child(args, config, spec);
    }
    let settings = BenchSettings {
        quick: args.quick,
        repeat: args.repeat,
        batch_sizes: args.batch_sizes.clone(),
        modes: args.modes.clone(),
        scaling: args.scaling,
        scaling_modes: args.scaling_modes.clone(),
        smollm2: args.smollm2,
        smollm2_only: args.smollm2_only,
        smollm2_layers: args.smollm2_layers,
        smollm2_batch_sizes: args.smollm2_batch_sizes.clone(),
        smollm2_modes: args.smollm2_modes.clone(),
        backend: BACKEND_NAME.to_string(),
        sgemm_size: SGEMM_SIZE,
    };
    let exe = std::env::current_exe().context("locating the xtask binary")?;
    run_bench(
        &settings,
        &mut ChildProcesses {
            exe,
            out: args.out.clone(),
        },
    )?;
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

/// The hidden child form: one measurement in this process, printed as one JSON line.
fn run_child(args: &BenchArgs, config: BenchConfig, spec: &str) -> Result<()> {
    let dir = args
        .model_dir
        .as_deref()
        .context("--child needs --model-dir")?;
    let (mode, batch_size) = ChildRequest::parse_spec(spec)?;
    let smollm2_gguf = if mode.starts_with("smollm2-") {
        Some(crate::fetch::smollm2_gguf()?)
    } else {
        None
    };
    let request = ChildRequest {
        config,
        mode,
        batch_size,
        shape: ChildShape {
            seq_length: args.seq_length.unwrap_or(config.seq_length),
            sim_layers: args.sim_layers,
        },
        repeat: args.repeat,
        smollm2_layers: args.smollm2_layers,
        sgemm_size: SGEMM_SIZE,
        query_gpu_memory: BACKEND_NAME != "flex",
    };
    let measurement = run_measurement::<B>(&request, dir, smollm2_gguf.as_deref(), &device())?;
    println!("{}", serde_json::to_string(&measurement)?);
    Ok(())
}

/// Runs each measurement as a child process of this binary and writes each section into `out`.
struct ChildProcesses {
    exe: PathBuf,
    out: PathBuf,
}

impl BenchHost for ChildProcesses {
    fn measure(
        &mut self,
        request: &ChildRequest,
        model_dir: &std::path::Path,
    ) -> Result<Measurement, BenchError> {
        eprintln!("{} ...", request.describe());
        let output = Command::new(&self.exe)
            .args(request.child_args(model_dir))
            .output()
            .map_err(|e| BenchError::Child {
                spec: request.spec(),
                reason: format!("cannot start {}: {e}", self.exe.display()),
            })?;
        if !output.status.success() {
            return Err(BenchError::Child {
                spec: request.spec(),
                reason: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
        let measurement = Measurement::from_child_stdout(
            &request.spec(),
            &String::from_utf8_lossy(&output.stdout),
        )?;
        eprintln!(
            "  min {:.4} s (cpu {:.2} s), peak RSS {:.0} MB",
            measurement.min_seconds(),
            tint_bench::measure::min(&measurement.cpu_seconds),
            measurement.peak_rss_kb as f64 / 1024.0
        );
        Ok(measurement)
    }

    fn section(&mut self, section: &ReportSection) -> Result<(), BenchError> {
        write_marked_section(&self.out, &section.key, &section.markdown, REPORT_HEADER)
            .map_err(|e| BenchError::Host(e.into()))
    }
}
