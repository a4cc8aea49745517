//! One measurement: what a child process loads, builds and times (`run_measurement`), what it
//! reports (`Measurement`: wall and CPU seconds of each timed run, peak RSS), and how a parent
//! asks for one (`ChildRequest`: the arguments of `xtask bench --child MODE:B …`).
//!
//! Only the step itself is timed (no loading, construction or report writing): one warm-up run,
//! then `repeat` timed runs. Each measurement runs in its own process so that its peak RSS
//! (`VmHWM`) is its own.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, ElementConversion, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use tint_aux::{
    dynamic_eval, load_gguf_model, load_model, AuxModel, DynEvalConfig, ParamSelection,
};
use tint_sim::llama::param_count::LlamaSizes;
use tint_sim::llama::{LlamaParams, LlamaReference, LlamaSimulator};
use tint_sim::{Engine, Execution, SimInput};

use super::checkpoint::token_ids;
use super::config::{
    smollm2_sim_config, smollm2_step_config, BenchConfig, ChildShape, INNER_LR, SMOLLM2_SEQ_LENGTH,
};
use super::error::BenchError;

/// What a child measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measurement {
    /// `structured`, `constructed`, `ref`, `dyn`, `aux`, `sgemm` or `smollm2-<mode>`.
    pub mode: String,
    /// Sequences per call.
    pub batch_size: usize,
    /// Tokens per sequence (0 where it does not apply: sgemm).
    #[serde(default)]
    pub seq_length: usize,
    /// Simulated top layers of a step (`None`: all).
    #[serde(default)]
    pub sim_layers: Option<usize>,
    /// Positions of the checkpoint (`n_positions`, the construction's `Tmax`; 0 where it does not
    /// apply: sgemm, SmolLM2, and measurements written before it was recorded).
    #[serde(default)]
    pub positions: usize,
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

impl Measurement {
    /// The smallest wall seconds of the timed runs.
    pub fn min_seconds(&self) -> f64 {
        min(&self.seconds)
    }

    /// The measurement a child printed: the last line of `stdout` that starts with `{`.
    ///
    /// # Errors
    /// No such line, or it is not a measurement.
    pub fn from_child_stdout(spec: &str, stdout: &str) -> Result<Self, BenchError> {
        let line = stdout
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .ok_or_else(|| BenchError::Child {
                spec: spec.to_string(),
                reason: "it printed no result".into(),
            })?;
        Ok(serde_json::from_str(line)?)
    }
}

/// The smallest value (`+∞` for none).
pub fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The median (`NaN` for none).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]),
    }
}

/// One measurement to run in a child process.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRequest {
    /// The GPT-2 configuration (its checkpoint is in the model directory).
    pub config: BenchConfig,
    /// The mode (`structured`, …, `smollm2-sim`, …).
    pub mode: String,
    /// Sequences per call.
    pub batch_size: usize,
    /// Sequence length and simulated layers.
    pub shape: ChildShape,
    /// Timed runs after the warm-up.
    pub repeat: usize,
    /// Top layers the SmolLM2 measurements update.
    pub smollm2_layers: usize,
    /// Side of the sgemm.
    pub sgemm_size: usize,
    /// Whether to read the process's GPU memory from `nvidia-smi` (GPU backends).
    pub query_gpu_memory: bool,
}

impl ChildRequest {
    /// The child's `MODE:BATCH`.
    pub fn spec(&self) -> String {
        format!("{}:{}", self.mode, self.batch_size)
    }

    /// Parses a child's `MODE:BATCH` into `(mode, batch size)`.
    ///
    /// # Errors
    /// No `:`, or a batch size that is not a positive integer.
    pub fn parse_spec(spec: &str) -> Result<(String, usize), BenchError> {
        let invalid = |rule| BenchError::InvalidSetting {
            name: "--child",
            value: spec.to_string(),
            rule,
        };
        let (mode, batch) = spec.split_once(':').ok_or_else(|| invalid("MODE:BATCH"))?;
        match batch.parse::<usize>() {
            Ok(b) if b > 0 => Ok((mode.to_string(), b)),
            _ => Err(invalid("the batch size is a positive integer")),
        }
    }

    /// The arguments after the executable that run this request as a child:
    /// `bench [--quick] --repeat R --smollm2-layers L --child MODE:B --seq-length T
    /// [--sim-layers N] [--positions P] --model-dir DIR` (`--positions`: a checkpoint of other
    /// positions than the config's, [`BenchConfig::with_positions`]).
    pub fn child_args(&self, model_dir: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["bench".into()];
        if self.config.base() == BenchConfig::MICRO {
            args.push("--quick".into());
        }
        for (flag, value) in [
            ("--repeat", self.repeat.to_string()),
            ("--smollm2-layers", self.smollm2_layers.to_string()),
            ("--child", self.spec()),
            ("--seq-length", self.shape.seq_length.to_string()),
        ] {
            args.extend([flag.into(), value.into()]);
        }
        if let Some(n) = self.shape.sim_layers {
            args.extend(["--sim-layers".into(), n.to_string().into()]);
        }
        if self.config.seq_length != self.config.base().seq_length {
            args.extend([
                "--positions".into(),
                self.config.seq_length.to_string().into(),
            ]);
        }
        args.extend(["--model-dir".into(), model_dir.as_os_str().to_owned()]);
        args
    }

    /// A one-line description for progress output.
    pub fn describe(&self) -> String {
        match self.mode.strip_prefix("smollm2-") {
            Some(mode) => format!("bench smollm2: {mode} B={}", self.batch_size),
            None => format!(
                "bench {}: {} B={} T={} layers={}{}",
                self.config.name,
                self.mode,
                self.batch_size,
                self.shape.seq_length,
                self.shape
                    .sim_layers
                    .map_or_else(|| "all".to_string(), |n| n.to_string()),
                if self.config.seq_length == self.config.base().seq_length {
                    String::new()
                } else {
                    format!(" Tmax={}", self.config.seq_length)
                }
            ),
        }
    }
}

/// Token ids as a `[batch_size, seq_length]` tensor.
fn ids_tensor<Bk: Backend>(
    vocab_size: usize,
    batch_size: usize,
    seq_length: usize,
    device: &Bk::Device,
) -> Tensor<Bk, 2, Int> {
    Tensor::from_data(
        TensorData::new(
            token_ids(vocab_size, batch_size, seq_length),
            [batch_size, seq_length],
        ),
        device,
    )
}

fn read_back(what: &'static str) -> impl Fn(burn::tensor::DataError) -> BenchError {
    move |e| BenchError::Data {
        what,
        reason: format!("{e:?}"),
    }
}

/// A timed step: returns a value that must be finite.
type Step<'a> = Box<dyn Fn() -> Result<f64, BenchError> + 'a>;

/// Runs one measurement in this process: load the model from `model_dir` (SmolLM2 modes: the GGUF
/// file `smollm2_gguf`), build what `request` times, one warm-up, `request.repeat` timed runs.
///
/// # Errors
/// An unknown mode, a sequence length outside `2..=T`, a missing or wrong SmolLM2 file, a failure
/// to load or build, or a non-finite result.
pub fn run_measurement<B: Backend>(
    request: &ChildRequest,
    model_dir: &Path,
    smollm2_gguf: Option<&Path>,
    device: &B::Device,
) -> Result<Measurement, BenchError> {
    let (config, mode, batch_size) = (&request.config, request.mode.as_str(), request.batch_size);
    let seq_length = request.shape.seq_length;
    if !mode.starts_with("smollm2-") && (seq_length < 2 || seq_length > config.seq_length) {
        return Err(BenchError::InvalidSetting {
            name: "--seq-length",
            value: seq_length.to_string(),
            rule: "at least 2 and at most the config's T",
        });
    }
    let train_length = seq_length / 2;
    let step = if mode.starts_with("smollm2-") {
        smollm2_step::<B>(request, smollm2_gguf, device)?
    } else {
        tiny_step::<B>(request, model_dir, train_length, device)?
    };
    let mut seconds = Vec::new();
    let mut cpu = Vec::new();
    for run in 0..=request.repeat {
        let (start, cpu_start) = (Instant::now(), cpu_seconds());
        let value = step()?;
        let (wall, used) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu_start);
        if !value.is_finite() {
            return Err(BenchError::NonFinite {
                mode: mode.to_string(),
                value,
            });
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
        sim_layers: request.shape.sim_layers,
        positions: if mode == "sgemm" || mode.starts_with("smollm2-") {
            0
        } else {
            config.seq_length
        },
        seconds,
        cpu_seconds: cpu,
        peak_rss_kb: peak_rss_kb(),
        gpu_memory_mb: request.query_gpu_memory.then(gpu_memory_mb).flatten(),
    })
}

/// The error for a mode this bench does not know.
fn unknown_mode(request: &ChildRequest) -> BenchError {
    BenchError::InvalidSetting {
        name: "--child",
        value: request.spec(),
        rule: "the mode is one of structured, constructed, ref, dyn, aux, sgemm or \
               smollm2-{sim,structured,ref,dyn,aux}",
    }
}

/// The timed step of a tiny-config mode on the seeded checkpoint in `model_dir`: a TinT step in
/// either execution or the reference, a plain forward, dynamic evaluation, or the sgemm bound.
fn tiny_step<'a, B: Backend>(
    request: &ChildRequest,
    model_dir: &Path,
    train_length: usize,
    device: &'a B::Device,
) -> Result<Step<'a>, BenchError> {
    let (config, mode, batch_size) = (&request.config, request.mode.as_str(), request.batch_size);
    let seq_length = request.shape.seq_length;
    Ok(match mode {
        "structured" | "constructed" | "ref" => {
            let model: AuxModel<B> = load_model(model_dir, device)?;
            let ids = ids_tensor::<B>(config.vocab_size, batch_size, seq_length, device);
            let input = SimInput::with_train_lengths(ids, &vec![train_length; batch_size])?;
            let engine = match mode {
                "constructed" => Engine::Simulator(Execution::Constructed),
                "structured" => Engine::Simulator(Execution::Structured),
                _ => Engine::Reference,
            };
            let tint = config.tint_config(Execution::Constructed, request.shape.sim_layers);
            let step = tint_sim::build(&model, &tint, engine, None)?;
            Box::new(move || Ok(step.forward(&input)?.final_loss.mean()))
        }
        "aux" => {
            let model: AuxModel<B> = load_model(model_dir, device)?;
            let input = ids_tensor::<B>(config.vocab_size, batch_size, seq_length, device);
            Box::new(move || {
                // One logit read back (a GPU read waits for the device); the logits stay a tensor,
                // as an HF forward's do.
                let logits = model.forward(input.clone())?;
                Ok(logits.slice([0..1, 0..1, 0..1]).into_scalar().elem::<f64>())
            })
        }
        "dyn" => {
            let model: AuxModel<Autodiff<B>> = load_model(model_dir, device)?;
            let input =
                ids_tensor::<Autodiff<B>>(config.vocab_size, batch_size, seq_length, device);
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
            let n = request.sgemm_size;
            let a = Tensor::<B, 2>::random([n, n], Distribution::Normal(0.0, 1.0), device);
            let b = a.clone().transpose();
            Box::new(move || {
                // Only the sum comes back to the host: the read-back must not dominate on a GPU.
                let c = a.clone().matmul(b.clone()).sum();
                let values = c.into_data().to_vec::<f32>().map_err(read_back("sgemm"))?;
                Ok(f64::from(values[0]))
            })
        }
        _ => return Err(unknown_mode(request)),
    })
}

/// The timed step of a SmolLM2 mode on the GGUF file `smollm2_gguf` (checked to be SmolLM2-135M):
/// the LLaMA simulator in either execution, the LLaMA reference, dynamic evaluation of the top
/// layers, or a plain forward.
fn smollm2_step<'a, B: Backend>(
    request: &ChildRequest,
    smollm2_gguf: Option<&Path>,
    device: &'a B::Device,
) -> Result<Step<'a>, BenchError> {
    let (mode, batch_size) = (request.mode.as_str(), request.batch_size);
    let smollm2 = || {
        smollm2_gguf.ok_or_else(|| BenchError::InvalidSetting {
            name: "--child",
            value: request.spec(),
            rule: "a SmolLM2 mode needs the SmolLM2 GGUF file",
        })
    };
    Ok(match mode {
        "smollm2-dyn" => {
            let model: AuxModel<Autodiff<B>> = load_gguf_model(smollm2()?, device)?;
            let ids = ids_tensor(model.vocab_size(), batch_size, SMOLLM2_SEQ_LENGTH, device);
            let train_length = SMOLLM2_SEQ_LENGTH / 2;
            // The step TinT takes, as `cargo xtask eval lm --budget` sets dynamic evaluation up:
            // the top layers (and the final norm) train, lr matched to the summed-loss `eta`.
            let dyn_config = DynEvalConfig {
                lr: INNER_LR * (train_length - 1) as f64,
                params: ParamSelection::top_layers(request.smollm2_layers),
                ..Default::default()
            };
            Box::new(move || {
                let outcome = dynamic_eval(&model, ids.clone(), train_length, &dyn_config)?;
                Ok(outcome.train_losses[0])
            })
        }
        "smollm2-aux" | "smollm2-ref" | "smollm2-sim" | "smollm2-structured" => {
            let model: AuxModel<B> = load_gguf_model(smollm2()?, device)?;
            // The report's FLOP counts use the published sizes: refuse a different file.
            let sizes = LlamaSizes::smollm2_135m();
            let found = (model.hidden_size(), model.n_layers(), model.vocab_size());
            let expected = (sizes.d_model, sizes.n_layers, sizes.vocab_size);
            if found != expected {
                return Err(BenchError::WrongSmolLm2 { found, expected });
            }
            let ids = ids_tensor::<B>(model.vocab_size(), batch_size, SMOLLM2_SEQ_LENGTH, device);
            let llama_config = smollm2_step_config(request.smollm2_layers);
            let input = || {
                SimInput::with_train_lengths(ids.clone(), &vec![SMOLLM2_SEQ_LENGTH / 2; batch_size])
            };
            match mode {
                "smollm2-aux" => Box::new(move || {
                    let logits = model.forward(ids.clone())?;
                    let values = logits.into_data().to_vec::<f32>();
                    Ok(f64::from(values.map_err(read_back("logits"))?[0]))
                }),
                "smollm2-ref" => {
                    let input = input()?;
                    let reference = LlamaReference::new(&model, llama_config)?;
                    Box::new(move || Ok(reference.forward(&input)?.final_loss.mean()))
                }
                _ => {
                    let input = input()?;
                    let params = LlamaParams::from_aux(&model)?;
                    drop(model);
                    let mut config =
                        smollm2_sim_config(params.d_model(), params.n_heads, llama_config);
                    if mode == "smollm2-structured" {
                        config.execution = Execution::Structured;
                    }
                    let sim = LlamaSimulator::from_params(params, config)?;
                    Box::new(move || Ok(sim.forward(&input)?.final_loss.mean()))
                }
            }
        }
        _ => return Err(unknown_mode(request)),
    })
}

/// GPU memory this process holds (MiB), read from `nvidia-smi`; `None` where `nvidia-smi` is
/// missing. burn's allocator keeps its pool, so this is close to the peak.
fn gpu_memory_mb() -> Option<u64> {
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

/// User + system CPU seconds of this process (`/proc/self/stat`, 100 Hz ticks; 0 elsewhere): on a
/// shared machine it is less disturbed by other jobs than wall time.
pub fn cpu_seconds() -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    fn request(mode: &str) -> ChildRequest {
        ChildRequest {
            config: BenchConfig::MICRO,
            mode: mode.into(),
            batch_size: 1,
            shape: ChildShape {
                seq_length: 16,
                sim_layers: Some(1),
            },
            repeat: 1,
            smollm2_layers: 2,
            sgemm_size: 8,
            query_gpu_memory: false,
        }
    }

    #[test]
    fn child_request_round_trips_through_its_arguments() {
        let args = request("ref").child_args(Path::new("/tmp/m"));
        let text: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            text.join(" "),
            "bench --quick --repeat 1 --smollm2-layers 2 --child ref:1 --seq-length 16 \
             --sim-layers 1 --model-dir /tmp/m"
        );
        assert_eq!(
            ChildRequest::parse_spec("ref:3").unwrap(),
            ("ref".into(), 3)
        );
        assert!(ChildRequest::parse_spec("ref").is_err());
        assert!(ChildRequest::parse_spec("ref:0").is_err());
        assert_eq!(median(&[3.0, 1.0, 2.0, 4.0]), 2.5);
        assert_eq!(min(&[3.0, 1.0]), 1.0);
    }

    #[test]
    fn a_child_measurement_times_repeat_runs_and_prints_json() {
        let dir = std::env::temp_dir().join(format!("tint-bench-child-{}", std::process::id()));
        super::super::checkpoint::write_checkpoint(&BenchConfig::MICRO, &dir).unwrap();
        let device = Default::default();
        for mode in ["ref", "sgemm"] {
            let m = run_measurement::<Flex>(&request(mode), &dir, None, &device).unwrap();
            assert_eq!((m.seconds.len(), m.cpu_seconds.len()), (1, 1));
            assert!(m.seconds[0] > 0.0);
            let line = format!("noise\n{}\n", serde_json::to_string(&m).unwrap());
            assert_eq!(Measurement::from_child_stdout("x", &line).unwrap(), m);
        }
        let mut long = request("ref");
        long.shape.seq_length = 65;
        assert!(run_measurement::<Flex>(&long, &dir, None, &device).is_err());
        assert!(run_measurement::<Flex>(&request("smollm2-sim"), &dir, None, &device).is_err());
        assert!(run_measurement::<Flex>(&request("nope"), &dir, None, &device).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
