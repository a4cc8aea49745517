//! `cargo xtask bench`: the front end of [`tint_bench`] (docs/performance.md). Parses the
//! flags, runs each measurement as a child process of this binary (the hidden `--child MODE:B
//! --model-dir DIR` form, which docs/performance.md cites), prints progress, and rewrites the
//! report's marked sections.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};
use tint_bench::args::BenchArgs;
use tint_bench::{
    run_bench, run_measurement, BenchConfig, BenchError, BenchHost, ChildRequest, ChildShape,
    Measurement, ReportSection, REPORT_HEADER, SGEMM_SIZE_CPU, SGEMM_SIZE_GPU,
};

use tint_eval::results_doc::write_marked_section;
use tint_lab::event::{Reporter, RunEvent};

use crate::backend::{device, B, BACKEND_NAME};
use crate::terminal::Terminal;

/// Side of the sgemm that measures the machine's matmul rate (larger on a GPU).
const SGEMM_SIZE: usize = if cfg!(any(feature = "cuda", feature = "wgpu")) {
    SGEMM_SIZE_GPU
} else {
    SGEMM_SIZE_CPU
};

/// Runs `cargo xtask bench`.
pub(crate) fn run(args: &BenchArgs) -> Result<()> {
    let config = BenchConfig::for_quick(args.quick);
    if let Some(spec) = &args.child {
        return run_child(args, config, spec);
    }
    let settings = args.settings(BACKEND_NAME, SGEMM_SIZE);
    let exe = std::env::current_exe().context("locating the xtask binary")?;
    run_bench(
        &settings,
        &mut ChildProcesses {
            exe,
            out: args.out.clone(),
            terminal: Terminal::default(),
        },
    )?;
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

/// The hidden child form: one measurement in this process, printed as one JSON line.
fn run_child(args: &BenchArgs, config: BenchConfig, spec: &str) -> Result<()> {
    let config = args
        .positions
        .map_or(config, |positions| config.with_positions(positions));
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

/// Runs each measurement as a child process of this binary, writes each section into `out`, draws
/// the progress on the terminal.
struct ChildProcesses {
    exe: PathBuf,
    out: PathBuf,
    terminal: Terminal,
}

impl Reporter for ChildProcesses {
    fn event(&mut self, event: RunEvent) {
        self.terminal.event(event);
    }
}

impl BenchHost for ChildProcesses {
    fn measure(
        &mut self,
        request: &ChildRequest,
        model_dir: &std::path::Path,
    ) -> Result<Measurement, BenchError> {
        let mut command = Command::new(&self.exe);
        // Each child keeps the pages its allocator frees, as `cargo xtask` (.cargo/config.toml)
        // runs the parent, also when the parent binary was started directly.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            command.env("MIMALLOC_PURGE_DELAY", "-1");
        }
        let output = command
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
        Measurement::from_child_stdout(&request.spec(), &String::from_utf8_lossy(&output.stdout))
    }

    fn section(&mut self, section: &ReportSection) -> Result<(), BenchError> {
        // The charts go into `bench/` beside the report, where the section links them.
        let chart_dir = self
            .out
            .parent()
            .unwrap_or(std::path::Path::new(""))
            .join("bench");
        if !section.charts.is_empty() {
            std::fs::create_dir_all(&chart_dir).map_err(|e| BenchError::Host(e.into()))?;
        }
        for (file, svg) in &section.charts {
            tint_assets::write_atomic(chart_dir.join(file), svg.as_bytes())
                .map_err(|e| BenchError::Host(e.into()))?;
        }
        write_marked_section(&self.out, &section.key, &section.markdown, REPORT_HEADER)
            .map_err(|e| BenchError::Host(e.into()))
    }
}
