//! `cargo xtask bench`: times one simulated TinT step in both executions (constructed: every module
//! from its stored weights; structured: the proven-equal shortcut) against the functional
//! reference, dynamic evaluation, a plain auxiliary forward and the machine's sgemm rate, prints
//! each against the authors' figures measured side by side (issue 17), and writes
//! `docs/performance.md`. `--scaling` adds the step time against B, T and the number of simulated
//! layers.
//!
//! The parent process writes a seeded random GPT-2 checkpoint (the tiny model of issue #9, or a
//! micro one with `--quick`) and runs every measurement in a child process (this binary with the
//! hidden `--child` option), so each measurement's peak RSS (`VmHWM`) is its own. A child loads the
//! model, builds what it times, runs one warm-up and `--repeat` timed runs, and prints one JSON
//! line. Only the step itself is timed (no loading, construction or report writing).
//!
//! With `--smollm2`, the same four measurements run on SmolLM2-135M (the fetched Q4_1 GGUF,
//! dequantised to f32) with the top `--smollm2-layers` layers updated: the constructed LLaMA
//! simulator, the LLaMA functional reference, dynamic evaluation of the same layers and a plain
//! forward, at `--smollm2-batch-sizes` (default 1 and 4), into their own report section.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use burn::tensor::{Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use tint_aux::{dynamic_eval, load_model, AuxModel, DynEvalConfig, ParamSelection};
use tint_sim::llama::param_count::LlamaSizes;
use tint_sim::llama::{
    LlamaParams, LlamaReference, LlamaSimulator, LlamaSimulatorConfig, LlamaTintConfig,
};
use tint_sim::{AuxParams, Execution, FunctionalReference, SimInput, TintConfig, TintSimulator};

use crate::backend::{device, AB, B, BACKEND_NAME};
use crate::model_arg::{load_aux, ModelArg};
use crate::report_doc::write_marked_section;

/// Where the official figures come from: the authors' PyTorch TinT (torch 2.3.1, 2 threads,
/// `torch.no_grad`) on a trained tiny GPT-2 (the `tiny` sizes below), measured side by side with
/// this code on the same idle 2-core CPU machine, 2026-11-23 (issue 17).
const OFFICIAL_SOURCE: &str = "the authors' PyTorch TinT (torch 2.3.1, 2 threads, `torch.no_grad`), \
     measured side by side with this code on the same idle 2-core CPU machine, 2026-11-23 (issue 17)";
/// The authors' TinT step, seconds (lowest, highest of their runs), by batch size.
const OFFICIAL_STEP_SECONDS: [(usize, (f64, f64)); 2] = [(1, (1.39, 1.61)), (2, (2.59, 2.89))];
/// Peak RSS of the authors' whole process, GB, by batch size.
const OFFICIAL_PEAK_GB: [(usize, f64); 2] = [(1, 1.12), (2, 1.39)];
/// The authors' plain-tensor version of the same update, one sequence.
const OFFICIAL_REF_SECONDS: f64 = 0.18;
/// An HF `transformers` forward of the same model, one sequence.
const OFFICIAL_AUX_SECONDS: f64 = 0.02;
/// Goals of issue 17, seconds by batch size: the structured execution (≥ 15× the official step)...
const GOAL_STRUCTURED_SECONDS: [(usize, f64); 2] = [(1, 0.09), (2, 0.18)];
/// ... and the constructed execution (≥ 5×).
const GOAL_CONSTRUCTED_SECONDS: [(usize, f64); 2] = [(1, 0.28), (2, 0.54)];
/// Goal of issue 17 for the functional reference, B = 1 (faster than PyTorch's 0.18 s).
const GOAL_REF_SECONDS: f64 = 0.15;
/// Goal of issue 17 for the auxiliary forward, B = 1 (HF's figure).
const GOAL_AUX_SECONDS: f64 = 0.02;
/// The two executions of the simulator, as bench modes.
const EXECUTION_MODES: [&str; 2] = ["structured", "constructed"];
/// Sequence length of the SmolLM2 measurements.
const SMOLLM2_SEQ_LENGTH: usize = 256;
/// Side of the square sgemm that measures the machine's matmul rate: 1024 on the CPU, 8192 on a
/// GPU (a 1024³ product takes microseconds there, so launch and read-back would be measured).
const SGEMM_SIZE: usize = if cfg!(any(feature = "cuda", feature = "wgpu")) {
    8192
} else {
    1024
};
/// Inner learning rate of the timed step (any finite value times the same work).
const INNER_LR: f64 = 1e-3;

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
    /// layers updated: the LLaMA simulator, the LLaMA functional reference, dynamic evaluation and
    /// a plain forward (`--smollm2-modes`), at `--smollm2-batch-sizes`.
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
    /// SmolLM2 measurements to run (sim, ref, dyn, aux).
    #[arg(long, value_delimiter = ',', default_value = "sim,ref,dyn,aux")]
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

/// Sizes of a benchmark configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct BenchConfig {
    /// Name in the report (`tiny`, `micro`).
    pub name: &'static str,
    /// `D`.
    pub d_model: usize,
    /// Auxiliary layers (all simulated).
    pub n_layers: usize,
    /// Auxiliary heads.
    pub n_heads: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// `T` (also `n_positions`).
    pub seq_length: usize,
    /// Training tokens per sequence.
    pub train_length: usize,
    /// TinT prefixes `P`.
    pub n_prefixes: usize,
    /// TinT softmax head size (`Hs = Ds / head_size`).
    pub sim_head_size: usize,
}

impl BenchConfig {
    /// The tiny GPT-2 of issue #9: D = 128, 4 layers, 4 heads, vocabulary 4096, T = 256 (128 train);
    /// TinT Ds = 640, P = 32, Hs = 20.
    pub(crate) const TINY: Self = Self {
        name: "tiny",
        d_model: 128,
        n_layers: 4,
        n_heads: 4,
        vocab_size: 4096,
        seq_length: 256,
        train_length: 128,
        n_prefixes: 32,
        sim_head_size: 32,
    };
    /// A micro GPT-2 for smoke tests: D = 32, 2 layers, T = 64; Ds = 160, P = 8, Hs = 20.
    pub(crate) const MICRO: Self = Self {
        name: "micro",
        d_model: 32,
        n_layers: 2,
        n_heads: 4,
        vocab_size: 512,
        seq_length: 64,
        train_length: 32,
        n_prefixes: 8,
        sim_head_size: 8,
    };

    fn d_inner(&self) -> usize {
        4 * self.d_model
    }

    /// The TinT configuration of the step (one step, reuse on), in `execution`, with the top
    /// `sim_layers` layers simulated (`None`: all).
    pub(crate) fn tint_config(
        &self,
        execution: Execution,
        sim_layers: Option<usize>,
    ) -> TintConfig {
        TintConfig {
            inner_lr: INNER_LR,
            restrict_prefixes: true,
            reuse_forward_blocks: true,
            reuse_backward_blocks: true,
            n_simulation_layers: sim_layers,
            execution,
            ..TintConfig::for_model(self.d_model, self.n_prefixes, self.sim_head_size)
        }
    }
}

/// Analytic FLOP counts (2 per multiply-add) of the auxiliary-model math, per sequence.
///
/// Counted: every matmul of the model math (`Q, K, V, O, fc, proj` projections; attention scores
/// and value sums over the full `T x T` matrix; the tied LM head `T x D x V`). Not counted:
/// LayerNorm, activation, softmax and other elementwise work (O(T D) per layer, < 1% here).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StepFlops {
    /// One forward pass of the auxiliary model, with logits.
    pub forward: f64,
    /// The loss gradient of docs/construction.md §7 (prediction kind): logits again and `softmax · E`.
    pub loss_gradient: f64,
    /// The approximate backward of §9.2: input gradients of proj, fc, O, V, the value-only
    /// attention backward, and the weight gradients of the four updated matrices.
    pub backward: f64,
}

impl StepFlops {
    /// Counts for `config` with `seq_length` tokens.
    pub(crate) fn new(config: &BenchConfig, seq_length: usize) -> Self {
        let (t, d, di, v, l) = (
            seq_length as f64,
            config.d_model as f64,
            config.d_inner() as f64,
            config.vocab_size as f64,
            config.n_layers as f64,
        );
        let projections = 2.0 * t * (4.0 * d * d + 2.0 * d * di);
        let attention = 2.0 * 2.0 * t * t * d;
        let head = 2.0 * t * d * v;
        let input_grads = 2.0 * t * (2.0 * d * di + 2.0 * d * d);
        let weight_grads = input_grads;
        let attention_backward = 2.0 * t * t * d;
        Self {
            forward: l * (projections + attention) + head,
            loss_gradient: 2.0 * head,
            backward: l * (input_grads + weight_grads + attention_backward),
        }
    }

    /// One TinT step (= one functional-reference step): first forward, loss gradient, backward,
    /// final forward.
    pub(crate) fn tint_step(&self) -> f64 {
        2.0 * self.forward + self.loss_gradient + self.backward
    }
}

/// FLOPs of one dynamic-evaluation call per sequence: forward + backward (≈ 2× forward, all
/// weight and input gradients) on the training tokens, then a forward over the whole sequence.
pub(crate) fn dyn_eval_flops(config: &BenchConfig) -> f64 {
    3.0 * StepFlops::new(config, config.train_length).forward
        + StepFlops::new(config, config.seq_length).forward
}

/// FLOPs of one measurement of `mode` at `batch_size`.
pub(crate) fn mode_flops(config: &BenchConfig, mode: &str, batch_size: usize) -> f64 {
    let per_sequence = match mode {
        "structured" | "constructed" | "ref" => {
            StepFlops::new(config, config.seq_length).tint_step()
        }
        "dyn" => dyn_eval_flops(config),
        "aux" => StepFlops::new(config, config.seq_length).forward,
        "sgemm" => return 2.0 * (SGEMM_SIZE as f64).powi(3),
        _ => 0.0,
    };
    per_sequence * batch_size as f64
}

/// What a child measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Measurement {
    /// `structured`, `constructed`, `ref`, `dyn`, `aux` or `sgemm`.
    pub mode: String,
    /// Sequences per call.
    pub batch_size: usize,
    /// Tokens per sequence (0 where it does not apply: sgemm).
    #[serde(default)]
    pub seq_length: usize,
    /// Simulated top layers of a step (`None`: all).
    #[serde(default)]
    pub sim_layers: Option<usize>,
    /// Wall seconds of each timed run.
    pub seconds: Vec<f64>,
    /// User + system CPU seconds of each timed run.
    pub cpu_seconds: Vec<f64>,
    /// Peak resident set of the child process, kB (`VmHWM`).
    pub peak_rss_kb: u64,
    /// GPU memory the child process held at the end (MiB, `nvidia-smi`), when it ran on a GPU.
    #[serde(default)]
    pub gpu_memory_mb: Option<u64>,
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]),
    }
}

/// Runs `cargo xtask bench`.
pub(crate) fn run(args: &BenchArgs) -> Result<()> {
    let config = if args.quick {
        BenchConfig::MICRO
    } else {
        BenchConfig::TINY
    };
    if let Some(child) = &args.child {
        let dir = args
            .model_dir
            .as_deref()
            .context("--child needs --model-dir")?;
        let shape = ChildShape {
            seq_length: args.seq_length.unwrap_or(config.seq_length),
            sim_layers: args.sim_layers,
        };
        let measurement = run_child(&config, child, dir, args.repeat, args.smollm2_layers, shape)?;
        println!("{}", serde_json::to_string(&measurement)?);
        return Ok(());
    }
    if args.repeat == 0 || args.batch_sizes.contains(&0) || args.smollm2_batch_sizes.contains(&0) {
        bail!("--repeat and every batch size must be at least 1");
    }
    // Refuse unknown modes before any measurement runs.
    for mode in &args.modes {
        if !TINY_MODES.contains(&mode.as_str()) {
            bail!("unknown --modes entry {mode:?}: one of {TINY_MODES:?}");
        }
    }
    for mode in &args.scaling_modes {
        if !EXECUTION_MODES.contains(&mode.as_str()) && mode != "ref" {
            bail!("unknown --scaling-modes entry {mode:?}: structured, constructed or ref");
        }
    }
    let smollm2 = args.smollm2 || args.smollm2_only;
    if smollm2 {
        // Refuse unknown SmolLM2 modes before any measurement runs.
        for mode in &args.smollm2_modes {
            if !SMOLLM2_MODES.contains(&mode.as_str()) {
                bail!("unknown --smollm2-modes entry {mode:?}: sim, ref, dyn or aux");
            }
        }
        let layers = LlamaSizes::smollm2_135m().n_layers;
        if args.smollm2_layers == 0 || args.smollm2_layers > layers {
            bail!("--smollm2-layers must be in 1..={layers}");
        }
    }
    let dir = checkpoint_dir(&config);
    write_checkpoint(&config, &dir)?;
    let mut measurements = Vec::new();
    for mode in &args.modes {
        let batches: Vec<usize> = if mode == "sgemm" {
            vec![1]
        } else if args.smollm2_only {
            continue;
        } else {
            args.batch_sizes.clone()
        };
        for batch_size in batches {
            let shape = ChildShape {
                seq_length: config.seq_length,
                sim_layers: None,
            };
            measurements.push(run_in_child(args, &config, mode, batch_size, &dir, shape)?);
        }
    }
    if !args.smollm2_only {
        let section = render_report(&config, &measurements, args.repeat, &machine_description());
        let key = section_key(config.name);
        write_marked_section(&args.out, &key, &section, REPORT_HEADER)?;
    }
    if args.scaling && !args.smollm2_only {
        let mut rows = Vec::new();
        for (batch_size, shape) in scaling_points(&config) {
            for mode in &args.scaling_modes {
                rows.push(run_in_child(args, &config, mode, batch_size, &dir, shape)?);
            }
        }
        let section = render_scaling(&config, &rows, args.repeat, &machine_description());
        let key = format!("{}-scaling", section_key(config.name));
        write_marked_section(&args.out, &key, &section, REPORT_HEADER)?;
    }
    if smollm2 {
        let mut smollm2 = Vec::new();
        for mode in &args.smollm2_modes {
            for &batch_size in &args.smollm2_batch_sizes {
                let mode = format!("smollm2-{mode}");
                let shape = ChildShape {
                    seq_length: SMOLLM2_SEQ_LENGTH,
                    sim_layers: Some(args.smollm2_layers),
                };
                smollm2.push(run_in_child(args, &config, &mode, batch_size, &dir, shape)?);
            }
        }
        let sgemm_gflops = measurements
            .iter()
            .find(|m| m.mode == "sgemm")
            .map(|m| mode_flops(&config, "sgemm", 1) / min(&m.seconds) / 1e9);
        let section = render_smollm2(
            &smollm2,
            args.smollm2_layers,
            args.repeat,
            sgemm_gflops,
            &machine_description(),
        );
        write_marked_section(&args.out, &section_key("smollm2"), &section, REPORT_HEADER)?;
    }
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

/// The SmolLM2 measurements `--smollm2-modes` may name (child modes `smollm2-<mode>`).
const SMOLLM2_MODES: [&str; 4] = ["sim", "ref", "dyn", "aux"];

/// The tiny/micro measurements `--modes` may name.
const TINY_MODES: [&str; 6] = ["structured", "constructed", "ref", "dyn", "aux", "sgemm"];

/// Sequence length and simulated layers of one child measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ChildShape {
    /// Tokens per sequence (the first half trains).
    pub seq_length: usize,
    /// Simulated top layers (`None`: all).
    pub sim_layers: Option<usize>,
}

/// The points of the scaling table: `(B, shape)` for B = 1, 2, 4 at the config's T with every
/// layer; T = T/4, T/2 at B = 1; and 1, 2 simulated top layers at B = 1 (duplicates dropped).
pub(crate) fn scaling_points(config: &BenchConfig) -> Vec<(usize, ChildShape)> {
    let full = ChildShape {
        seq_length: config.seq_length,
        sim_layers: None,
    };
    let mut points: Vec<(usize, ChildShape)> = [1, 2, 4].map(|b| (b, full)).to_vec();
    for t in [config.seq_length / 4, config.seq_length / 2] {
        points.push((
            1,
            ChildShape {
                seq_length: t,
                sim_layers: None,
            },
        ));
    }
    for layers in [1, 2] {
        if layers < config.n_layers {
            points.push((
                1,
                ChildShape {
                    seq_length: config.seq_length,
                    sim_layers: Some(layers),
                },
            ));
        }
    }
    points
}

/// Runs one measurement in a child process (this binary with `--child`) and parses its result.
fn run_in_child(
    args: &BenchArgs,
    config: &BenchConfig,
    mode: &str,
    batch_size: usize,
    dir: &Path,
    shape: ChildShape,
) -> Result<Measurement> {
    match mode.strip_prefix("smollm2-") {
        Some(smollm2_mode) => eprintln!("bench smollm2: {smollm2_mode} B={batch_size} ..."),
        None => eprintln!(
            "bench {}: {mode} B={batch_size} T={} layers={} ...",
            config.name,
            shape.seq_length,
            shape
                .sim_layers
                .map_or_else(|| "all".to_string(), |n| n.to_string())
        ),
    }
    let exe = std::env::current_exe().context("locating the xtask binary")?;
    let mut command = Command::new(&exe);
    command.arg("bench");
    if args.quick {
        command.arg("--quick");
    }
    let output = command
        .args(["--repeat", &args.repeat.to_string()])
        .args(["--smollm2-layers", &args.smollm2_layers.to_string()])
        .args(["--child", &format!("{mode}:{batch_size}")])
        .args(["--seq-length", &shape.seq_length.to_string()])
        .args(
            shape
                .sim_layers
                .map(|n| vec!["--sim-layers".to_string(), n.to_string()])
                .unwrap_or_default(),
        )
        .arg("--model-dir")
        .arg(dir)
        .output()
        .context("running a bench child")?;
    if !output.status.success() {
        bail!(
            "bench child {mode}:{batch_size} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("bench child printed no result")?;
    let measurement: Measurement = serde_json::from_str(line)?;
    eprintln!(
        "  min {:.4} s (cpu {:.2} s), peak RSS {:.0} MB",
        min(&measurement.seconds),
        min(&measurement.cpu_seconds),
        measurement.peak_rss_kb as f64 / 1024.0
    );
    Ok(measurement)
}

/// Analytic FLOP counts (2 per multiply-add) of a LLaMA-family model's math, per sequence, with
/// the top `updated` of `sizes.n_layers` layers updated (docs/construction.md §9 on LLaMA, docs/tint-llama.md).
///
/// Counted: every matmul (`Q`, `O`: `D x D`; `K`, `V`: `D x Dkv` with `Dkv = n_kv · head_dim`
/// (GQA); SwiGLU gate, up, down: `D x Di` each; attention scores and value sums over the full
/// `T x T` matrix, `D` wide; the head `T x D x V`). Not counted: RMSNorm, rotary, SwiGLU gating,
/// softmax and other elementwise work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LlamaStepFlops {
    /// One layer's forward: `2T(2D² + 2D·Dkv + 3D·Di) + 4T²D`.
    pub layer_forward: f64,
    /// The LM head (logits): `2TDV`.
    pub head: f64,
    /// One updated layer's approximate backward (§9.2): input gradients of down, gate, up, `O`,
    /// `V` (`2T(3D·Di + D² + D·Dkv)`), as much again for their weight gradients, and the
    /// value-only attention backward `2T²D`.
    pub layer_backward: f64,
    /// Layers of the model.
    pub n_layers: f64,
    /// Updated (top) layers.
    pub updated: f64,
}

impl LlamaStepFlops {
    /// Counts for `sizes` with `seq_length` tokens and the top `updated` layers updated.
    pub(crate) fn new(sizes: &LlamaSizes, seq_length: usize, updated: usize) -> Self {
        let (t, d, di, v) = (
            seq_length as f64,
            sizes.d_model as f64,
            sizes.d_ff as f64,
            sizes.vocab_size as f64,
        );
        let dkv = (sizes.n_kv_heads * sizes.head_dim) as f64;
        let input_grads = 2.0 * t * (3.0 * d * di + d * d + d * dkv);
        Self {
            layer_forward: 2.0 * t * (2.0 * d * d + 2.0 * d * dkv + 3.0 * d * di)
                + 2.0 * 2.0 * t * t * d,
            head: 2.0 * t * d * v,
            layer_backward: 2.0 * input_grads + 2.0 * t * t * d,
            n_layers: sizes.n_layers as f64,
            updated: updated.min(sizes.n_layers) as f64,
        }
    }

    /// A plain forward with logits.
    pub(crate) fn forward(&self) -> f64 {
        self.n_layers * self.layer_forward + self.head
    }

    /// One TinT step (= one LLaMA reference step): the forward, the loss gradient (`4TDV`: logits
    /// again and `softmax · E`), the backward of the updated layers, and the final forward of the
    /// updated layers and the head (the layers below are unchanged and not recomputed).
    pub(crate) fn tint_step(&self) -> f64 {
        self.forward()
            + 2.0 * self.head
            + self.updated * self.layer_backward
            + self.updated * self.layer_forward
            + self.head
    }
}

/// FLOPs of one SmolLM2 dynamic-evaluation call per sequence with the top `updated` layers
/// trained: a forward on the `T/2` training tokens, its backward (the head's input gradient `2TDV`,
/// then about 2 forwards' worth for each trained layer: input and weight gradients of all seven
/// matrices and the full attention backward; nothing below the trained layers), then a forward on
/// all `T` tokens.
pub(crate) fn llama_dyn_eval_flops(sizes: &LlamaSizes, seq_length: usize, updated: usize) -> f64 {
    let train = LlamaStepFlops::new(sizes, seq_length / 2, updated);
    let all = LlamaStepFlops::new(sizes, seq_length, updated);
    train.forward() + train.head + 2.0 * train.updated * train.layer_forward + all.forward()
}

/// FLOPs of one SmolLM2 measurement (`smollm2-<mode>`) at `batch_size`, top `updated` layers.
pub(crate) fn smollm2_mode_flops(mode: &str, batch_size: usize, updated: usize) -> f64 {
    let sizes = LlamaSizes::smollm2_135m();
    let step = LlamaStepFlops::new(&sizes, SMOLLM2_SEQ_LENGTH, updated);
    let per_sequence = match mode {
        "smollm2-sim" | "smollm2-ref" => step.tint_step(),
        "smollm2-dyn" => llama_dyn_eval_flops(&sizes, SMOLLM2_SEQ_LENGTH, updated),
        "smollm2-aux" => step.forward(),
        _ => 0.0,
    };
    per_sequence * batch_size as f64
}

fn smollm2_label(mode: &str) -> &str {
    match mode {
        "smollm2-sim" => "LLaMA simulator step",
        "smollm2-ref" => "LLaMA functional reference step",
        "smollm2-dyn" => "dynamic evaluation",
        "smollm2-aux" => "forward",
        other => other,
    }
}

/// The SmolLM2 report section. `sgemm_gflops`: the machine's measured sgemm rate, when this run
/// measured it.
fn render_smollm2(
    measurements: &[Measurement],
    layers: usize,
    repeat: usize,
    sgemm_gflops: Option<f64>,
    machine: &str,
) -> String {
    let sizes = LlamaSizes::smollm2_135m();
    let sim = smollm2_sim_config(sizes.d_model, sizes.n_heads, smollm2_step_config(layers));
    let train = SMOLLM2_SEQ_LENGTH / 2;
    let mut out = format!(
        "## SmolLM2-135M, `{BACKEND_NAME}` backend (measured {})\n\n\
         LLaMA (D = {}, {} layers, {} query / {} KV heads of {}, SwiGLU Di = {}, vocabulary {}, tied \
         head), Q4_1 GGUF dequantised to f32; T = {SMOLLM2_SEQ_LENGTH} ({train} training tokens), \
         deterministic token ids; the top {layers} layers updated, one step. Rows: the constructed \
         LLaMA simulator (Ds = {}, P = {}, Hs = {}, the README sizes of `Tint::simulator`), the LLaMA \
         functional reference (docs/construction.md §9 on LLaMA, finite differences), dynamic evaluation (one \
         SGD step with burn autodiff on the training tokens, the top {layers} layers and the final \
         norm trained, then the forward on the whole sequence) and a plain forward.\n\n",
        today(),
        sizes.d_model,
        sizes.n_layers,
        sizes.n_heads,
        sizes.n_kv_heads,
        sizes.head_dim,
        sizes.d_ff,
        sizes.vocab_size,
        sim.hidden_size,
        sim.num_prefixes,
        sim.num_heads,
    );
    out.push_str(&format!("* Machine: {machine}.\n"));
    out.push_str(&format!("* Build: {}.\n", build_profile()));
    if let Some(gpu) = gpu_description().filter(|_| BACKEND_NAME != "flex") {
        out.push_str(&format!("* GPU: {gpu} (`nvidia-smi`).\n"));
    }
    out.push_str(&format!(
        "* Each row: one warm-up run, then {repeat} timed runs in a fresh child process; `min` and \
         `median` wall seconds, the smallest user+system CPU seconds of a run, and the child's peak \
         RSS (`VmHWM`, including loading, dequantising and construction).\n\n"
    ));
    out.push_str("| measurement | B | min s | median s | cpu s | tokens/s | GFLOP | GFLOP/s | peak RSS MB |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for m in measurements {
        let best = min(&m.seconds);
        let flops = smollm2_mode_flops(&m.mode, m.batch_size, layers);
        let gpu_memory = m
            .gpu_memory_mb
            .map(|mb| format!(" (GPU {mb} MiB)"))
            .unwrap_or_default();
        out.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {:.2} | {:.0} | {:.2} | {:.2} | {:.0}{gpu_memory} |\n",
            smollm2_label(&m.mode),
            m.batch_size,
            best,
            median(&m.seconds),
            min(&m.cpu_seconds),
            (m.batch_size * SMOLLM2_SEQ_LENGTH) as f64 / best,
            flops / 1e9,
            flops / best / 1e9,
            m.peak_rss_kb as f64 / 1024.0,
        ));
    }
    out.push_str("\n### Ratios\n\n");
    let find = |mode: &str, b: usize| {
        measurements
            .iter()
            .find(|m| m.mode == mode && m.batch_size == b)
    };
    for m in measurements.iter().filter(|m| m.mode == "smollm2-sim") {
        let (best, b) = (min(&m.seconds), m.batch_size);
        for (other, what) in [
            ("smollm2-ref", "our LLaMA functional reference"),
            ("smollm2-dyn", "dynamic evaluation"),
            ("smollm2-aux", "a plain forward"),
        ] {
            if let Some(o) = find(other, b) {
                out.push_str(&format!(
                    "* Simulator / {what}, B = {b}: {:.2}×{}.\n",
                    best / min(&o.seconds),
                    if other == "smollm2-ref" {
                        if best / min(&o.seconds) <= 3.0 {
                            " (issue 17's goal for the constructed execution, ≤ 3×: met)"
                        } else {
                            " (issue 17's goal for the constructed execution, ≤ 3×: not met)"
                        }
                    } else {
                        ""
                    },
                ));
            }
        }
        let rss_mb = m.peak_rss_kb as f64 / 1024.0;
        out.push_str(&format!("* Simulator peak RSS, B = {b}: {rss_mb:.0} MB"));
        if let Some(r) = find("smollm2-ref", b) {
            out.push_str(&format!(
                " ({:.2}× the reference's {:.0} MB)",
                m.peak_rss_kb as f64 / r.peak_rss_kb.max(1) as f64,
                r.peak_rss_kb as f64 / 1024.0
            ));
        }
        out.push_str(&format!(
            "; the official {} GB (B = 1) was for the tiny config.\n",
            OFFICIAL_PEAK_GB[0].1
        ));
        if let Some(bound) = sgemm_gflops {
            let rate = smollm2_mode_flops(&m.mode, b, layers) / best / 1e9;
            out.push_str(&format!(
                "* Simulator, B = {b}: {rate:.2} model GFLOP/s = {:.1}% of the sgemm rate ({bound:.1} GFLOP/s, this run).\n",
                100.0 * rate / bound
            ));
        }
    }
    let step = LlamaStepFlops::new(&sizes, SMOLLM2_SEQ_LENGTH, layers);
    out.push_str(&format!(
        "\n### FLOP count\n\n\
         Model FLOPs (2 per multiply-add), counted analytically (`xtask/src/bench.rs`, \
         `LlamaStepFlops`), with `Dkv = n_kv · head_dim = {}` (GQA) and `Di = {}`: per layer and \
         sequence the projections `2T(2D² + 2D·Dkv + 3D·Di)` (Q, O; K, V; SwiGLU gate, up, down) and \
         attention `4T²D` (full `T x T`); the tied head `2TDV`. Forward = all {} layers + head \
         ({:.2} GFLOP per sequence). A TinT step = forward + loss gradient `4TDV` + backward of \
         the {layers} updated layers (input gradients `2T(3D·Di + D² + D·Dkv)` of down, gate, up, \
         O, V, as much again for their weight gradients, `2T²D` value-only attention backward) + \
         the final forward of the updated layers and the head (the layers below are unchanged and \
         not recomputed) = {:.2} GFLOP per sequence; the simulator and the reference are both \
         charged this count (the simulator's wider network does more arithmetic: its GFLOP/s is \
         model FLOPs per second). Dynamic evaluation: a forward on the {train} training tokens, \
         its backward (head input gradient, ≈ 2 forwards per trained layer), and a forward on all \
         tokens = {:.2} GFLOP per sequence. RMSNorm, rotary, gating and softmax work is not \
         counted.\n\n",
        sizes.n_kv_heads * sizes.head_dim,
        sizes.d_ff,
        sizes.n_layers,
        step.forward() / 1e9,
        step.tint_step() / 1e9,
        llama_dyn_eval_flops(&sizes, SMOLLM2_SEQ_LENGTH, layers) / 1e9,
    ));
    out.push_str(&format!(
        "Reproduce: `cargo xtask fetch smollm2`, then `cargo xtask bench --smollm2-only \
         --smollm2-layers {layers}` (this section only; `--smollm2` also rewrites the tiny \
         section).\n"
    ));
    out
}

/// The start of a fresh report file (the measured sections are appended after it).
const REPORT_HEADER: &str =
    "# Performance\n\nWritten by `cargo xtask bench` (sections between `bench-*` markers are \
regenerated; the rest is kept).\n";

/// `batch_size` deterministic sequences of `seq_length` token ids.
fn ids<Bk: burn::tensor::backend::Backend>(
    config: &BenchConfig,
    batch_size: usize,
    seq_length: usize,
) -> Tensor<Bk, 2, Int> {
    let n = batch_size * seq_length;
    let ids: Vec<i64> = (0..n as i64)
        .map(|i| (i * 7919 + 13) % config.vocab_size as i64)
        .collect();
    Tensor::from_data(
        TensorData::new(ids, [batch_size, seq_length]),
        &Default::default(),
    )
}

/// One measurement in this process: load, build, warm up, time `repeat` runs.
fn run_child(
    config: &BenchConfig,
    spec: &str,
    dir: &Path,
    repeat: usize,
    smollm2_layers: usize,
    shape: ChildShape,
) -> Result<Measurement> {
    let (mode, batch) = spec.split_once(':').context("--child expects MODE:BATCH")?;
    let batch_size: usize = batch.parse().context("batch size")?;
    let seq_length = shape.seq_length;
    if !mode.starts_with("smollm2-") && (seq_length < 2 || seq_length > config.seq_length) {
        bail!(
            "--seq-length {seq_length} must be in 2..={}",
            config.seq_length
        );
    }
    let train_length = seq_length / 2;
    let device = device();
    let step: Box<dyn Fn() -> Result<f64>> = match mode {
        "structured" | "constructed" | "ref" => {
            let model: AuxModel<B> = load_model(dir, &device)?;
            let aux = AuxParams::from_aux(&model)?;
            let input = SimInput::with_train_lengths(
                ids::<B>(config, batch_size, seq_length),
                &vec![train_length; batch_size],
            )?;
            let execution = if mode == "constructed" {
                Execution::Constructed
            } else {
                Execution::Structured
            };
            let tint = config.tint_config(execution, shape.sim_layers);
            if mode == "ref" {
                let reference = FunctionalReference::new(aux, tint)?;
                Box::new(move || Ok(reference.forward(&input)?.final_loss.mean()))
            } else {
                let sim = TintSimulator::new(&aux, tint)?;
                Box::new(move || Ok(sim.forward(&input)?.final_loss.mean()))
            }
        }
        "aux" => {
            let model: AuxModel<B> = load_model(dir, &device)?;
            let input = ids::<B>(config, batch_size, seq_length);
            Box::new(move || {
                // One logit read back (a GPU read waits for the device); the logits stay a tensor,
                // as an HF forward's do.
                let logits = model.forward(input.clone())?;
                Ok(logits.slice([0..1, 0..1, 0..1]).into_scalar() as f64)
            })
        }
        "dyn" => {
            let model: AuxModel<AB> = load_model(dir, &device)?;
            let input = ids::<AB>(config, batch_size, seq_length);
            let dyn_config = DynEvalConfig {
                lr: INNER_LR,
                ..Default::default()
            };
            Box::new(move || {
                let outcome = dynamic_eval(&model, input.clone(), train_length, &dyn_config)?;
                Ok(outcome.train_losses[0])
            })
        }
        "sgemm" => {
            let n = SGEMM_SIZE;
            let a = Tensor::<B, 2>::random(
                [n, n],
                burn::tensor::Distribution::Normal(0.0, 1.0),
                &device,
            );
            let b = a.clone().transpose();
            Box::new(move || {
                // Only the sum comes back to the host: the read-back must not dominate on a GPU.
                let c = a.clone().matmul(b.clone()).sum();
                Ok(c.into_data()
                    .to_vec::<f32>()
                    .map_err(|e| anyhow::anyhow!("{e:?}"))?[0] as f64)
            })
        }
        "smollm2-dyn" => {
            let model: AuxModel<AB> = load_aux(&smollm2_arg()?, &device)?;
            let ids = smollm2_ids::<AB>(model.vocab_size(), batch_size);
            let train_length = SMOLLM2_SEQ_LENGTH / 2;
            // The step TinT takes, as `cargo xtask eval lm --budget` sets dynamic evaluation up:
            // the top layers (and the final norm) train, lr matched to the summed-loss `eta`.
            let dyn_config = DynEvalConfig {
                lr: INNER_LR * (train_length - 1) as f64,
                params: ParamSelection::top_layers(smollm2_layers),
                ..Default::default()
            };
            Box::new(move || {
                let outcome = dynamic_eval(&model, ids.clone(), train_length, &dyn_config)?;
                Ok(outcome.train_losses[0])
            })
        }
        "smollm2-aux" | "smollm2-ref" | "smollm2-sim" => {
            let model: AuxModel<B> = load_aux(&smollm2_arg()?, &device)?;
            // The report's FLOP counts use the published sizes: refuse a different file.
            let sizes = LlamaSizes::smollm2_135m();
            let loaded = (model.hidden_size(), model.n_layers(), model.vocab_size());
            if loaded != (sizes.d_model, sizes.n_layers, sizes.vocab_size) {
                bail!("SmolLM2 GGUF has (D, layers, vocabulary) = {loaded:?}, expected {sizes:?}");
            }
            let ids = smollm2_ids::<B>(model.vocab_size(), batch_size);
            let llama_config = smollm2_step_config(smollm2_layers);
            match mode {
                "smollm2-aux" => Box::new(move || {
                    let logits = model.forward(ids.clone())?;
                    Ok(logits
                        .into_data()
                        .to_vec::<f32>()
                        .map_err(|e| anyhow::anyhow!("{e:?}"))?[0] as f64)
                }),
                "smollm2-ref" => {
                    let input = smollm2_input(ids, batch_size)?;
                    let reference = LlamaReference::new(&model, llama_config)?;
                    Box::new(move || Ok(reference.forward(&input)?.final_loss.mean()))
                }
                _ => {
                    let input = smollm2_input(ids, batch_size)?;
                    let params = LlamaParams::from_aux(&model)?;
                    drop(model);
                    let config = smollm2_sim_config(params.d_model(), params.n_heads, llama_config);
                    let sim = LlamaSimulator::from_params(params, config)?;
                    Box::new(move || Ok(sim.forward(&input)?.final_loss.mean()))
                }
            }
        }
        other => bail!(
            "unknown bench mode {other}: sim, ref, dyn, aux, sgemm or smollm2-{{sim,ref,dyn,aux}}"
        ),
    };
    let mut seconds = Vec::new();
    let mut cpu = Vec::new();
    for run in 0..=repeat {
        let (start, cpu_start) = (Instant::now(), cpu_seconds());
        let value = step()?;
        let (wall, used) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu_start);
        if !value.is_finite() {
            bail!("{mode}: non-finite result {value}");
        }
        if run > 0 {
            seconds.push(wall);
            cpu.push(used);
        }
    }
    Ok(Measurement {
        mode: mode.to_string(),
        batch_size,
        seq_length: if mode == "sgemm" { 0 } else { seq_length },
        sim_layers: shape.sim_layers,
        seconds,
        cpu_seconds: cpu,
        peak_rss_kb: peak_rss_kb(),
        gpu_memory_mb: gpu_memory_mb(),
    })
}

/// The `--model` value of SmolLM2-135M (fetched on demand).
fn smollm2_arg() -> Result<ModelArg> {
    "smollm2".parse().map_err(|e: String| anyhow::anyhow!(e))
}

/// `batch_size` deterministic sequences of `SMOLLM2_SEQ_LENGTH` token ids below `vocab`.
fn smollm2_ids<Bk: burn::tensor::backend::Backend>(
    vocab: usize,
    batch_size: usize,
) -> Tensor<Bk, 2, Int> {
    let n = (batch_size * SMOLLM2_SEQ_LENGTH) as i64;
    let ids: Vec<i64> = (0..n).map(|i| (i * 7919 + 13) % vocab as i64).collect();
    Tensor::from_data(
        TensorData::new(ids, [batch_size, SMOLLM2_SEQ_LENGTH]),
        &Default::default(),
    )
}

/// The simulator / reference input: the first half of every sequence trains.
fn smollm2_input(ids: Tensor<B, 2, Int>, batch_size: usize) -> Result<SimInput<B>> {
    Ok(SimInput::with_train_lengths(
        ids,
        &vec![SMOLLM2_SEQ_LENGTH / 2; batch_size],
    )?)
}

/// The LLaMA step of the SmolLM2 simulator and reference rows: top `layers` layers, one step.
fn smollm2_step_config(layers: usize) -> LlamaTintConfig {
    LlamaTintConfig {
        n_simulation_layers: Some(layers),
        inner_lr: INNER_LR,
        ..Default::default()
    }
}

/// The SmolLM2 simulator's sizes: the README setting of [`LlamaSimulatorConfig::for_model`] (the
/// same `Ds`, `P`, `Hs` as `Tint::simulator` through `default_tint_config`), `Tmax` from the model.
fn smollm2_sim_config(
    d_model: usize,
    n_heads: usize,
    step: LlamaTintConfig,
) -> LlamaSimulatorConfig {
    LlamaSimulatorConfig::for_model(d_model, n_heads, step)
}

/// GPU memory this process holds (MiB), read from `nvidia-smi`; `None` on CPU backends or
/// where `nvidia-smi` is missing. burn's allocator keeps its pool, so this is close to the peak.
fn gpu_memory_mb() -> Option<u64> {
    if BACKEND_NAME == "flex" {
        return None;
    }
    let output = Command::new("nvidia-smi")
        .args([
            "--query-compute-apps=pid,used_memory",
            "--format=csv,noheader,nounits",
        ])
        .output()
        .ok()?;
    let pid = std::process::id().to_string();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| {
            let (p, mb) = line.split_once(',')?;
            (p.trim() == pid).then(|| mb.trim().parse().ok())?
        })
}

/// The GPU's name and driver (`nvidia-smi`), if there is one.
fn gpu_description() -> Option<String> {
    let output = Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,memory.total,driver_version",
            "--format=csv,noheader",
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    (output.status.success() && !text.is_empty()).then_some(text)
}

/// The report section's key: `bench-<config>` on the CPU, `bench-<config>-<backend>` on a GPU.
pub(crate) fn section_key(config_name: &str) -> String {
    if BACKEND_NAME == "flex" {
        format!("bench-{config_name}")
    } else {
        format!("bench-{config_name}-{BACKEND_NAME}")
    }
}

/// User + system CPU seconds of this process (`/proc/self/stat`, 100 Hz ticks; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the `(name)` field.
    (ticks(11) + ticks(12)) / 100.0
}

/// Peak resident set size of this process in kB (`VmHWM` of `/proc/self/status`; 0 elsewhere).
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU model, core count, memory and compiler, for the report.
fn machine_description() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let memory_gb = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kb| kb / 1024.0 / 1024.0)
        .unwrap_or(0.0);
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "rustc (unknown version)".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string();
    format!(
        "{model}, {cores} cores (`nproc`), {memory_gb:.0} GB RAM; {rustc}; 1-minute load average at the end of the run: {load}"
    )
}

fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "dev profile (dependencies at opt-level 3, workspace crates at opt-level 2; the default `cargo xtask` build)"
    } else {
        "release profile"
    }
}

fn today() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown date".into())
}

fn lookup(table: &[(usize, f64)], batch_size: usize) -> Option<f64> {
    table
        .iter()
        .find(|(b, _)| *b == batch_size)
        .map(|(_, s)| *s)
}

fn mode_label(mode: &str) -> &str {
    match mode {
        "structured" => "TinT step, structured execution",
        "constructed" => "TinT step, constructed execution",
        "ref" => "functional reference step",
        "dyn" => "dynamic evaluation",
        "aux" => "auxiliary forward",
        "sgemm" if SGEMM_SIZE == 8192 => "sgemm 8192³ (bound)",
        "sgemm" => "sgemm 1024³ (bound)",
        other => other,
    }
}

/// `met` / `not met` for a measured value against a goal (smaller is better).
fn verdict(value: f64, goal: f64) -> &'static str {
    if value <= goal {
        "met"
    } else {
        "not met"
    }
}

/// The ratio lines of one configuration: each execution against the authors' step (their range)
/// and against our reference, peak RSS against theirs, the reference and the forward against
/// PyTorch's figures, and issue 17's goals. The official figures are for the tiny config only.
pub(crate) fn render_ratios(config: &BenchConfig, measurements: &[Measurement]) -> String {
    let mut out = String::new();
    let official_config = config.name == BenchConfig::TINY.name;
    let find = |mode: &str, b: usize| {
        measurements
            .iter()
            .find(|m| m.mode == mode && m.batch_size == b)
            .map(|m| min(&m.seconds))
    };
    let sgemm = measurements
        .iter()
        .find(|m| m.mode == "sgemm")
        .map(|m| mode_flops(config, "sgemm", 1) / min(&m.seconds) / 1e9);
    for m in measurements {
        let best = min(&m.seconds);
        let b = m.batch_size;
        let rss_gb = m.peak_rss_kb as f64 / 1024.0 / 1024.0;
        match m.mode.as_str() {
            mode @ ("structured" | "constructed") => {
                let goals = if mode == "structured" {
                    &GOAL_STRUCTURED_SECONDS
                } else {
                    &GOAL_CONSTRUCTED_SECONDS
                };
                let official = OFFICIAL_STEP_SECONDS
                    .iter()
                    .find(|(ob, _)| *ob == b)
                    .map(|(_, range)| *range)
                    .filter(|_| official_config);
                if let Some((low, high)) = official {
                    let goal = lookup(goals, b).unwrap_or(f64::NAN);
                    out.push_str(&format!(
                        "* {mode}, B = {b}: {best:.3} s vs the official {low}–{high} s: \
                         official / ours **{:.2}–{:.2}×** (goal ≤ {goal} s: {}).\n",
                        low / best,
                        high / best,
                        verdict(best, goal),
                    ));
                }
                if let Some(r) = find("ref", b) {
                    out.push_str(&format!(
                        "* {mode} / our functional reference, B = {b}: {:.2}×.\n",
                        best / r
                    ));
                }
                if let Some(peak) = lookup(&OFFICIAL_PEAK_GB, b).filter(|_| official_config) {
                    out.push_str(&format!(
                        "* {mode} peak RSS, B = {b}: {:.0} MB vs the official {peak} GB ({}).\n",
                        rss_gb * 1024.0,
                        if rss_gb < peak { "below" } else { "not below" },
                    ));
                }
                if let Some(bound) = sgemm {
                    let rate = mode_flops(config, mode, b) / best / 1e9;
                    out.push_str(&format!(
                        "* {mode}, B = {b}: {rate:.2} model GFLOP/s = {:.1}% of the sgemm rate.\n",
                        100.0 * rate / bound
                    ));
                }
            }
            "ref" if b == 1 && official_config => out.push_str(&format!(
                "* Functional reference, B = 1: {best:.3} s vs the official plain-tensor update \
                 {OFFICIAL_REF_SECONDS} s ({:.2}×; goal ≤ {GOAL_REF_SECONDS} s: {}).\n",
                OFFICIAL_REF_SECONDS / best,
                verdict(best, GOAL_REF_SECONDS),
            )),
            "aux" if b == 1 && official_config => out.push_str(&format!(
                "* Auxiliary forward, B = 1: {best:.4} s vs the official HF forward \
                 {OFFICIAL_AUX_SECONDS} s ({:.2}×; goal ≤ {GOAL_AUX_SECONDS} s: {}).\n",
                OFFICIAL_AUX_SECONDS / best,
                verdict(best, GOAL_AUX_SECONDS),
            )),
            _ => {}
        }
    }
    if let (Some(c), Some(s)) = (find("constructed", 1), find("structured", 1)) {
        out.push_str(&format!(
            "* constructed / structured, B = 1: {:.2}×.\n",
            c / s
        ));
    }
    out.push_str(&format!(
        "\nThe official figures are {OFFICIAL_SOURCE}; they apply to the `tiny` section only. A \
         ratio `official / ours` above 1 means we are faster.\n"
    ));
    out
}

/// The report section for one configuration.
pub(crate) fn render_report(
    config: &BenchConfig,
    measurements: &[Measurement],
    repeat: usize,
    machine: &str,
) -> String {
    let mut out = String::new();
    let step = StepFlops::new(config, config.seq_length);
    let tint = config.tint_config(Execution::Structured, None);
    out.push_str(&format!(
        "## `{}` config, `{BACKEND_NAME}` backend (measured {})\n\n",
        config.name,
        today()
    ));
    out.push_str(&format!(
        "GPT-2, D = {}, {} layers, {} heads, vocabulary {}, T = {} ({} training tokens); TinT Ds = {}, \
         P = {}, Hs = {}, all layers simulated, one step, reuse on, restricted prefixes, exact \
         gates, f32, `{BACKEND_NAME}` backend. Seeded random weights (the same every run). \
         Executions: `constructed` evaluates every module from its own stored weights; \
         `structured` is the shortcut proven equal to it (the linear modules read `W, b` out of \
         their prefix rows into one matmul, the norm and activation backward apply their finite \
         difference directly, gates are 0/1 row selections).\n\n",
        config.d_model,
        config.n_layers,
        config.n_heads,
        config.vocab_size,
        config.seq_length,
        config.train_length,
        tint.hidden_size,
        tint.num_prefixes,
        tint.num_heads,
    ));
    out.push_str(&format!("* Machine: {machine}.\n"));
    out.push_str(&format!("* Build: {}.\n", build_profile()));
    match gpu_description() {
        Some(gpu) if BACKEND_NAME != "flex" => out.push_str(&format!(
            "* GPU: {gpu} (`nvidia-smi`); times include reading the loss back to the host, \
             which waits for the device.\n"
        )),
        _ => out.push_str(
            "* CPU run (`flex`, with burn-flex's `rayon` and `simd` features); GPU figures, where \
             measured, are in the `cuda`/`wgpu` sections.\n",
        ),
    }
    out.push_str(&format!(
        "* Each row: one warm-up run, then {repeat} timed runs in a fresh child process; `min` and \
         `median` wall seconds, the smallest user+system CPU seconds of a run, and the child's peak \
         RSS (`VmHWM`, including loading and construction).\n\n"
    ));
    out.push_str("| measurement | B | min s | median s | cpu s | tokens/s | GFLOP | GFLOP/s | peak RSS MB |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|\n");
    for m in measurements {
        let best = min(&m.seconds);
        let flops = mode_flops(config, &m.mode, m.batch_size);
        let tokens = if m.mode == "sgemm" {
            "–".to_string()
        } else {
            format!("{:.0}", (m.batch_size * config.seq_length) as f64 / best)
        };
        let gpu_memory = m
            .gpu_memory_mb
            .map(|mb| format!(" (GPU {mb} MiB)"))
            .unwrap_or_default();
        out.push_str(&format!(
            "| {} | {} | {:.4} | {:.4} | {:.2} | {} | {:.3} | {:.2} | {:.0}{gpu_memory} |\n",
            mode_label(&m.mode),
            m.batch_size,
            best,
            median(&m.seconds),
            min(&m.cpu_seconds),
            tokens,
            flops / 1e9,
            flops / best / 1e9,
            m.peak_rss_kb as f64 / 1024.0,
        ));
    }
    out.push_str("\n### Ratios\n\n");
    out.push_str(&render_ratios(config, measurements));
    out.push_str(&format!(
        "\n### FLOP count\n\n\
         Model FLOPs (2 per multiply-add) of the auxiliary math, counted analytically \
         (`xtask/src/bench.rs`, `StepFlops`): per layer and sequence the projections \
         `2T(4D² + 2D·Di)` and attention `4T²D` (full `T x T`), plus the LM head `2TDV`, make one \
         forward; the loss gradient adds `4TDV` (logits again, `softmax · E`); the backward adds \
         `2T(2D·Di + 2D²)` input gradients, as much again for the four updated weight matrices, and \
         `2T²D` for the value-only attention backward per layer. A TinT step = 2 forwards + loss \
         gradient + backward = {:.3} GFLOP per sequence here; both executions and the reference are \
         charged this count (the constructed network does more arithmetic, so its GFLOP/s is model \
         FLOPs per second, not hardware FLOPs). Dynamic evaluation: 3 forwards on the training \
         tokens (forward + backward) plus one forward on all tokens. LayerNorm, activation and \
         softmax work is not counted.\n\n",
        step.tint_step() / 1e9
    ));
    let dir = checkpoint_dir(config);
    out.push_str(&format!(
        "### Reproduce\n\n\
         ```sh\n\
         cargo xtask bench                 # tiny config (this file's `bench-tiny` section)\n\
         cargo xtask bench --scaling       # also the `bench-tiny-scaling` section (B, T, layers)\n\
         cargo xtask bench --quick         # micro config (`bench-micro` section)\n\
         # one measurement by hand, on the checkpoint and ids the bench wrote:\n\
         cargo xtask logits --model {dir} --ids {dir}/ids.json --out /tmp/tint-logits.safetensors \\\n  \
         --tint --execution structured --tint-prefixes {} --tint-heads {} --inner-lr {INNER_LR} \\\n  \
         --timing --repeat 5\n\
         ```\n\n\
         `--timing` prints one `step_seconds <value>` line per timed step (loading and construction \
         excluded); `--execution constructed` times the other execution; `ids.json` holds one \
         sequence (`input_ids`, and `train_mask` = 1 on the first {} tokens).\n",
        tint.num_prefixes,
        tint.num_heads,
        config.train_length,
        dir = dir.display(),
    ));
    out
}

/// The scaling section: step seconds of each execution and the reference against B, T and the
/// number of simulated top layers.
pub(crate) fn render_scaling(
    config: &BenchConfig,
    rows: &[Measurement],
    repeat: usize,
    machine: &str,
) -> String {
    let mut out = format!(
        "## `{}` config, `{BACKEND_NAME}` backend: scaling with B, T and simulated layers \
         (measured {})\n\n",
        config.name,
        today()
    );
    out.push_str(&format!(
        "The `{}` model and TinT sizes of the section above; the first half of each sequence \
         trains; `layers` = simulated top layers (the layers below run their plain forward once). \
         Each cell: the smallest wall seconds / the smallest user+system CPU seconds of \
         {repeat} timed runs after one warm-up, in a fresh child process; in brackets the child's \
         peak RSS in MB.\n\n",
        config.name
    ));
    out.push_str(&format!(
        "* Machine: {machine}.\n* Build: {}.\n\n",
        build_profile()
    ));
    let mut modes: Vec<&str> = Vec::new();
    for m in rows {
        if !modes.contains(&m.mode.as_str()) {
            modes.push(&m.mode);
        }
    }
    out.push_str("| B | T | layers |");
    for mode in &modes {
        out.push_str(&format!(" {} |", mode_label(mode)));
    }
    out.push_str(" tokens/s (first column) |\n|---|---|---|");
    out.push_str(&"---|".repeat(modes.len() + 1));
    out.push('\n');
    let mut points: Vec<(usize, usize, Option<usize>)> = Vec::new();
    for m in rows {
        let point = (m.batch_size, m.seq_length, m.sim_layers);
        if !points.contains(&point) {
            points.push(point);
        }
    }
    for (b, t, layers) in points {
        let layers_label =
            layers.map_or_else(|| format!("all ({})", config.n_layers), |n| n.to_string());
        out.push_str(&format!("| {b} | {t} | {layers_label} |"));
        let mut first = None;
        for (column, mode) in modes.iter().enumerate() {
            match rows.iter().find(|m| {
                m.mode == *mode && (m.batch_size, m.seq_length, m.sim_layers) == (b, t, layers)
            }) {
                Some(m) => {
                    let best = min(&m.seconds);
                    if column == 0 {
                        first = Some(best);
                    }
                    out.push_str(&format!(
                        " {best:.3} / {:.2} ({:.0}) |",
                        min(&m.cpu_seconds),
                        m.peak_rss_kb as f64 / 1024.0
                    ));
                }
                None => out.push_str(" – |"),
            }
        }
        match first {
            Some(best) => out.push_str(&format!(" {:.0} |\n", (b * t) as f64 / best)),
            None => out.push_str(" – |\n"),
        }
    }
    out.push_str(
        "\nReproduce: `cargo xtask bench --scaling` (also rewrites the config's main section).\n",
    );
    out
}

/// Where the bench writes its checkpoint and ids file.
pub(crate) fn checkpoint_dir(config: &BenchConfig) -> PathBuf {
    std::env::temp_dir().join(format!("tint-bench-gpt2-{}", config.name))
}

/// Writes a seeded random GPT-2 checkpoint (`config.json` + `model.safetensors`) for `config`.
pub(crate) fn write_checkpoint(config: &BenchConfig, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (d, v, t) = (config.d_model, config.vocab_size, config.seq_length);
    let mut rng = SplitMix(0x5EED_0001);
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    let mut normal = |name: String, shape: Vec<usize>, mean: f32, std: f32| {
        let n: usize = shape.iter().product();
        let values = (0..n).map(|_| mean + std * rng.normal()).collect();
        tensors.push((name, shape, values));
    };
    normal("transformer.wte.weight".into(), vec![v, d], 0.0, 0.02);
    normal("transformer.wpe.weight".into(), vec![t, d], 0.0, 0.01);
    normal("transformer.ln_f.weight".into(), vec![d], 1.0, 0.1);
    normal("transformer.ln_f.bias".into(), vec![d], 0.0, 0.02);
    let proj_std = 0.02 / (2.0 * config.n_layers as f32).sqrt();
    for i in 0..config.n_layers {
        let p = format!("transformer.h.{i}");
        for ln in ["ln_1", "ln_2"] {
            normal(format!("{p}.{ln}.weight"), vec![d], 1.0, 0.1);
            normal(format!("{p}.{ln}.bias"), vec![d], 0.0, 0.02);
        }
        normal(format!("{p}.attn.c_attn.weight"), vec![d, 3 * d], 0.0, 0.02);
        normal(format!("{p}.attn.c_attn.bias"), vec![3 * d], 0.0, 0.02);
        normal(format!("{p}.attn.c_proj.weight"), vec![d, d], 0.0, proj_std);
        normal(format!("{p}.attn.c_proj.bias"), vec![d], 0.0, 0.02);
        normal(format!("{p}.mlp.c_fc.weight"), vec![d, 4 * d], 0.0, 0.02);
        normal(format!("{p}.mlp.c_fc.bias"), vec![4 * d], 0.0, 0.02);
        normal(
            format!("{p}.mlp.c_proj.weight"),
            vec![4 * d, d],
            0.0,
            proj_std,
        );
        normal(format!("{p}.mlp.c_proj.bias"), vec![d], 0.0, 0.02);
    }
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, shape, values)| {
            let raw = values.iter().flat_map(|x| x.to_le_bytes()).collect();
            (name, shape, raw)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = bytes
        .iter()
        .map(|(name, shape, raw)| {
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), raw)
                .map(|view| (name.clone(), view))
        })
        .collect::<Result<_, _>>()?;
    tint_eval::write_atomic(
        dir.join("model.safetensors"),
        &safetensors::serialize(views, None)?,
    )?;
    let hf_config = serde_json::json!({
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "activation_function": "gelu_new",
        "n_embd": d,
        "n_head": config.n_heads,
        "n_layer": config.n_layers,
        "n_positions": t,
        "n_ctx": t,
        "n_inner": null,
        "vocab_size": v,
        "layer_norm_epsilon": 1e-5,
        "scale_attn_weights": true,
        "tie_word_embeddings": true,
        "bos_token_id": 0,
        "eos_token_id": 0,
    });
    tint_eval::write_atomic(
        dir.join("config.json"),
        serde_json::to_string_pretty(&hf_config)?.as_bytes(),
    )?;
    // The bench's token ids, one sequence, for `cargo xtask logits --tint --timing`.
    let ids: Vec<i64> = ids::<B>(config, 1, config.seq_length)
        .into_data()
        .convert::<i64>()
        .to_vec()
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let train_mask: Vec<i64> = (0..config.seq_length)
        .map(|t| i64::from(t < config.train_length))
        .collect();
    tint_eval::write_atomic(
        dir.join("ids.json"),
        serde_json::json!({ "input_ids": [ids], "train_mask": [train_mask] })
            .to_string()
            .as_bytes(),
    )?;
    Ok(())
}

/// A small seeded generator (SplitMix64) with Box–Muller normals: reproducible weights without a
/// dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f32 {
        let (u1, u2) = (self.uniform(), self.uniform());
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_flops_match_a_hand_count() {
        // D = 2, Di = 8, V = 3, L = 1, T = 4 by hand:
        // projections 2·4·(4·4 + 2·2·8) = 384, attention 4·16·2 = 128, head 2·4·2·3 = 48;
        // forward 384 + 128 + 48 = 560; loss gradient 96;
        // backward: input grads 2·4·(2·2·8 + 2·4) = 320, weight grads 320, attention 2·16·2 = 64.
        let config = BenchConfig {
            name: "hand",
            d_model: 2,
            n_layers: 1,
            n_heads: 1,
            vocab_size: 3,
            seq_length: 4,
            train_length: 2,
            n_prefixes: 1,
            sim_head_size: 1,
        };
        let flops = StepFlops::new(&config, 4);
        assert_eq!(flops.forward, 560.0);
        assert_eq!(flops.loss_gradient, 96.0);
        assert_eq!(flops.backward, 704.0);
        assert_eq!(flops.tint_step(), 2.0 * 560.0 + 96.0 + 704.0);
        assert_eq!(
            mode_flops(&config, "structured", 2),
            2.0 * flops.tint_step()
        );
        assert_eq!(mode_flops(&config, "constructed", 1), flops.tint_step());
        // dyn: 3 forwards on T = 2 (projections 192, attention 32, head 24) + one on T = 4.
        assert_eq!(dyn_eval_flops(&config), 3.0 * 248.0 + 560.0);
    }

    #[test]
    fn report_has_rows_ratios_and_reproduction() {
        let measurement = |mode: &str, b: usize, s: f64| Measurement {
            mode: mode.into(),
            batch_size: b,
            seq_length: 256,
            sim_layers: None,
            seconds: vec![s * 1.1, s, s * 1.2],
            cpu_seconds: vec![s],
            peak_rss_kb: 512 * 1024,
            gpu_memory_mb: None,
        };
        let report = render_report(
            &BenchConfig::TINY,
            &[
                measurement("structured", 1, 0.1),
                measurement("constructed", 1, 0.5),
                measurement("ref", 1, 0.25),
                measurement("aux", 1, 0.04),
                measurement("sgemm", 1, 0.1),
            ],
            3,
            "test machine",
        );
        assert!(report.contains("| TinT step, constructed execution | 1 | 0.5000 | 0.5500 |"));
        // 1.39 / 0.5 = 2.78, 1.61 / 0.5 = 3.22; goal 0.28 s.
        assert!(
            report.contains(
                "constructed, B = 1: 0.500 s vs the official 1.39–1.61 s: official / ours \
                 **2.78–3.22×** (goal ≤ 0.28 s: not met)"
            ),
            "{report}"
        );
        // 1.39 / 0.1 = 13.9, 1.61 / 0.1 = 16.1; goal 0.09 s.
        assert!(report.contains("**13.90–16.10×** (goal ≤ 0.09 s: not met)"));
        assert!(report.contains("constructed / our functional reference, B = 1: 2.00×."));
        assert!(report.contains("constructed / structured, B = 1: 5.00×."));
        assert!(report.contains("512 MB vs the official 1.12 GB (below)"));
        assert!(report.contains(
            "0.250 s vs the official plain-tensor update 0.18 s (0.72×; goal ≤ 0.15 s: not met)"
        ));
        assert!(report.contains(
            "0.0400 s vs the official HF forward 0.02 s (0.50×; goal ≤ 0.02 s: not met)"
        ));
        assert!(report.contains("torch 2.3.1, 2 threads"));
        if BACKEND_NAME == "flex" {
            assert!(report.contains("CPU run (`flex`"), "{report}");
            assert_eq!(section_key("tiny"), "bench-tiny");
        } else {
            assert_eq!(section_key("tiny"), format!("bench-tiny-{BACKEND_NAME}"));
        }
        assert!(report.contains("--timing --repeat"));
        assert!(report.contains("--execution structured"));
        assert!(report.contains("ids.json"));
        // 256 tokens in 0.5 s.
        assert!(report.contains("| 512 |"));
        // The micro config gets no official comparison.
        let micro = render_ratios(&BenchConfig::MICRO, &[measurement("structured", 1, 0.1)]);
        assert!(!micro.contains("official 1.39"), "{micro}");
        // Scaling: one row per point, columns per mode, tokens/s from the first column.
        let mut short = measurement("structured", 1, 0.05);
        short.seq_length = 64;
        let mut top = measurement("ref", 1, 0.2);
        top.sim_layers = Some(1);
        let scaling = render_scaling(
            &BenchConfig::TINY,
            &[
                measurement("structured", 1, 0.1),
                measurement("ref", 1, 0.25),
                short,
                top,
            ],
            3,
            "test machine",
        );
        assert!(
            scaling
                .contains("| 1 | 256 | all (4) | 0.100 / 0.10 (512) | 0.250 / 0.25 (512) | 2560 |"),
            "{scaling}"
        );
        assert!(
            scaling.contains("| 1 | 64 | all (4) | 0.050 / 0.05 (512) | – | 1280 |"),
            "{scaling}"
        );
        assert!(
            scaling.contains("| 1 | 256 | 1 | – | 0.200 / 0.20 (512) | – |"),
            "{scaling}"
        );
        let smollm2 = render_smollm2(
            &[
                measurement("smollm2-ref", 1, 4.0),
                measurement("smollm2-sim", 1, 8.0),
                measurement("smollm2-aux", 4, 0.5),
            ],
            2,
            3,
            Some(10.0),
            "test machine",
        );
        // min 4 s, median 4.4 s, 256 tokens / 4 s = 64 tokens/s.
        assert!(
            smollm2.contains("| LLaMA functional reference step | 1 | 4.000 | 4.400 | 4.00 | 64 |"),
            "{smollm2}"
        );
        // 4 × 256 tokens in 0.5 s.
        assert!(smollm2.contains("| forward | 4 | 0.500 | 0.550 | 0.50 | 2048 |"));
        assert!(smollm2.contains("top 2 layers updated"));
        assert!(smollm2.contains("Simulator / our LLaMA functional reference, B = 1: 2.00×"));
        assert!(
            smollm2.contains("Simulator peak RSS, B = 1: 512 MB (1.00× the reference's 512 MB)")
        );
        assert!(smollm2.contains("% of the sgemm rate (10.0 GFLOP/s, this run)"));
        assert!(smollm2.contains("Ds = 2880, P = 144, Hs = 45"), "{smollm2}");
        assert!(smollm2.contains("--smollm2-only"));
    }

    #[test]
    fn scaling_points_cover_batch_length_and_layers() {
        let points = scaling_points(&BenchConfig::TINY);
        let full = |b| {
            (
                b,
                ChildShape {
                    seq_length: 256,
                    sim_layers: None,
                },
            )
        };
        assert_eq!(&points[..3], &[full(1), full(2), full(4)]);
        assert!(points.contains(&(
            1,
            ChildShape {
                seq_length: 64,
                sim_layers: None
            }
        )));
        assert!(points.contains(&(
            1,
            ChildShape {
                seq_length: 256,
                sim_layers: Some(2)
            }
        )));
        assert_eq!(points.len(), 7);
        // The micro config has 2 layers: "2 simulated layers" is the full row, not repeated.
        assert_eq!(scaling_points(&BenchConfig::MICRO).len(), 6);
    }

    #[test]
    fn llama_step_flops_match_a_hand_count() {
        // D = 2, 2 heads of 1, 1 KV head (Dkv = 1), Di = 4, V = 3, 2 layers (top 1 updated), T = 4:
        // layer forward 2·4·(2·4 + 2·2 + 3·2·4) + 4·16·2 = 288 + 128 = 416; head 2·4·2·3 = 48;
        // backward: input grads 2·4·(3·2·4 + 4 + 2) = 240, weight grads 240, attention 2·16·2 = 64.
        let sizes = LlamaSizes {
            d_model: 2,
            n_heads: 2,
            n_kv_heads: 1,
            head_dim: 1,
            d_ff: 4,
            n_layers: 2,
            vocab_size: 3,
            tied: true,
            max_positions: 8,
        };
        let flops = LlamaStepFlops::new(&sizes, 4, 1);
        assert_eq!(flops.layer_forward, 416.0);
        assert_eq!(flops.head, 48.0);
        assert_eq!(flops.layer_backward, 544.0);
        assert_eq!(flops.forward(), 2.0 * 416.0 + 48.0);
        // forward + loss gradient 96 + backward 544 + final forward of the top layer and head.
        assert_eq!(flops.tint_step(), 880.0 + 96.0 + 544.0 + 416.0 + 48.0);
        // dyn: T = 2 training tokens: layer forward 2·2·36 + 4·4·2 = 176, head 24, forward 376;
        // + head input gradient 24 + 2 × 176 for the trained layer + the forward on T = 4.
        assert_eq!(
            llama_dyn_eval_flops(&sizes, 4, 1),
            376.0 + 24.0 + 352.0 + 880.0
        );
        // With every layer updated the step is 2 forwards + loss gradient + backward, as the GPT-2
        // count.
        let all = LlamaStepFlops::new(&sizes, 4, 2);
        assert_eq!(
            all.tint_step(),
            2.0 * all.forward() + 2.0 * all.head + 2.0 * all.layer_backward
        );
        assert_eq!(
            smollm2_mode_flops("smollm2-sim", 4, 2),
            4.0 * smollm2_mode_flops("smollm2-ref", 1, 2)
        );
    }

    #[test]
    fn checkpoint_is_seeded_and_loads() {
        let dir = std::env::temp_dir().join(format!("tint-bench-test-{}", std::process::id()));
        write_checkpoint(&BenchConfig::MICRO, &dir).unwrap();
        let first = std::fs::read(dir.join("model.safetensors")).unwrap();
        write_checkpoint(&BenchConfig::MICRO, &dir).unwrap();
        assert_eq!(first, std::fs::read(dir.join("model.safetensors")).unwrap());
        let model: AuxModel<B> = load_model(&dir, &device()).unwrap();
        assert_eq!(model.vocab_size(), BenchConfig::MICRO.vocab_size);
        assert_eq!(model.n_layers(), BenchConfig::MICRO.n_layers);
        let ids = crate::logits::read_ids(&dir.join("ids.json")).unwrap();
        assert_eq!(ids.input_ids[0].len(), BenchConfig::MICRO.seq_length);
        std::fs::remove_dir_all(&dir).ok();
    }
}
