//! The command line of `cargo xtask bench` ([`BenchArgs`], `clap::Args` with the `clap` feature)
//! and the [`BenchSettings`] it makes.

use std::path::PathBuf;

use crate::BenchSettings;

/// Arguments of `cargo xtask bench`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct BenchArgs {
    /// Micro config (D = 32, 2 layers, T = 64) for a smoke test; writes its own report section.
    #[cfg_attr(feature = "clap", arg(long))]
    pub quick: bool,
    /// Report file (a marked section is rewritten; the rest of the file is kept). `--doc` is an
    /// alias (e.g. `--doc /tmp/perf.md` for a scratch run).
    #[cfg_attr(
        feature = "clap",
        arg(long, visible_alias = "doc", default_value = "docs/performance.md")
    )]
    pub out: PathBuf,
    /// Timed runs per measurement (after one warm-up run).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3))]
    pub repeat: usize,
    /// Batch sizes of the simulator / reference / dyn-eval / aux measurements.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "1,2")
    )]
    pub batch_sizes: Vec<usize>,
    /// Measurements to run (structured, constructed, ref, dyn, aux, sgemm).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_delimiter = ',',
            default_value = "structured,constructed,ref,dyn,aux,sgemm"
        )
    )]
    pub modes: Vec<String>,
    /// Also time the structured execution, the constructed execution and the reference against
    /// B (1, 2, 4), T (64, 128, 256, half of it training tokens) and the number of simulated top
    /// layers (1, 2, all), into the `bench-<config>-scaling` section.
    #[cfg_attr(feature = "clap", arg(long))]
    pub scaling: bool,
    /// Executions and reference the scaling table times.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_delimiter = ',',
            default_value = "structured,constructed,ref"
        )
    )]
    pub scaling_modes: Vec<String>,
    /// Also time SmolLM2-135M (`cargo xtask fetch smollm2` first), T = 256, top `--smollm2-layers`
    /// layers updated: the LLaMA simulator (constructed and structured executions), the LLaMA
    /// functional reference, dynamic evaluation and a plain forward (`--smollm2-modes`), at
    /// `--smollm2-batch-sizes`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub smollm2: bool,
    /// Only the SmolLM2 section (implies `--smollm2`): skip the tiny/micro measurements except the
    /// sgemm bound (when `--modes` names `sgemm`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub smollm2_only: bool,
    /// Layers the SmolLM2 simulator, reference and dynamic evaluation update (the top ones).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 2))]
    pub smollm2_layers: usize,
    /// Batch sizes of the SmolLM2 measurements.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "1,4")
    )]
    pub smollm2_batch_sizes: Vec<usize>,
    /// SmolLM2 measurements to run (sim = the simulator's constructed execution, structured = its
    /// structured execution, ref, dyn, aux).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_delimiter = ',',
            default_value = "sim,structured,ref,dyn,aux"
        )
    )]
    pub smollm2_modes: Vec<String>,
    /// Internal: run one measurement `MODE:BATCH` in this process and print it as JSON.
    #[cfg_attr(feature = "clap", arg(long, hide = true))]
    pub child: Option<String>,
    /// Internal: the checkpoint directory a child loads.
    #[cfg_attr(feature = "clap", arg(long, hide = true))]
    pub model_dir: Option<PathBuf>,
    /// Internal: the child's sequence length (default: the config's).
    #[cfg_attr(feature = "clap", arg(long, hide = true))]
    pub seq_length: Option<usize>,
    /// Internal: the child's number of simulated top layers (default: all).
    #[cfg_attr(feature = "clap", arg(long, hide = true))]
    pub sim_layers: Option<usize>,
    /// Internal: the positions of the child's checkpoint (default: the config's `T`).
    #[cfg_attr(feature = "clap", arg(long, hide = true))]
    pub positions: Option<usize>,
}

impl BenchArgs {
    /// The library's settings for these flags on `backend` (the name the report gives), the
    /// machine's matmul rate measured by an sgemm of side `sgemm_size`.
    pub fn settings(&self, backend: &str, sgemm_size: usize) -> BenchSettings {
        BenchSettings {
            quick: self.quick,
            repeat: self.repeat,
            batch_sizes: self.batch_sizes.clone(),
            modes: self.modes.clone(),
            scaling: self.scaling,
            scaling_modes: self.scaling_modes.clone(),
            smollm2: self.smollm2,
            smollm2_only: self.smollm2_only,
            smollm2_layers: self.smollm2_layers,
            smollm2_batch_sizes: self.smollm2_batch_sizes.clone(),
            smollm2_modes: self.smollm2_modes.clone(),
            backend: backend.to_string(),
            sgemm_size,
        }
    }
}
