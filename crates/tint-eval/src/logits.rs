//! Logits for given token ids, written to a safetensors file (`cargo xtask logits`): the auxiliary
//! model's forward, or the TinT simulator's first-pass and final logits, for cross-checking against
//! other implementations (HF transformers, the authors' TinT code).
//!
//! [`LogitsArgs`] is the command line (`clap::Args` with the `clap` feature). [`write_logits`]
//! checks the request (vocabulary, memory, train mask, step settings) before it
//! makes any tensor, refuses non-finite logits with where they first appeared (unless told to write
//! them) and writes the file atomically.

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;
use burn::tensor::{Bool, DType, Int, Tensor, TensorData};
use tint_aux::{AuxModel, TokenIds};
use tint_sim::{Execution, GateMode};

use crate::model_source::ModelSource;
use crate::results_doc::{create_parent_dir, write_file};
use crate::run_settings::{check_step_count, check_steps, TintFlags};
use crate::EvalError;

/// Arguments of `cargo xtask logits`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LogitsArgs {
    /// Model: a directory (config.json + model.safetensors), a .gguf file, or a fetched asset name
    /// (`smollm2`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub model: ModelSource,
    /// JSON file `{"input_ids": [[...], ...]}` (all rows of equal length).
    #[cfg_attr(feature = "clap", arg(long))]
    pub ids: PathBuf,
    /// Output safetensors file; holds `logits` `[batch, seq, vocab]` (f32; f64 with `--f64`), or with `--tint`
    /// `first_logits` and `final_logits`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub out: PathBuf,
    /// Run the TinT simulator instead of the plain model; the ids file must hold `train_mask`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tint: bool,
    /// TinT inner learning rate `eta` (on the summed loss).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1e-6))]
    pub inner_lr: f64,
    /// Simulated SGD steps.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub steps: usize,
    /// Run the simulator in float64.
    #[cfg_attr(feature = "clap", arg(long))]
    pub f64: bool,
    /// Time the simulated step: one warm-up step, then `--repeat` timed steps, one
    /// `step_seconds <value>` line each (loading and construction excluded).
    #[cfg_attr(feature = "clap", arg(long))]
    pub timing: bool,
    /// Number of timed steps with `--timing`.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3))]
    pub repeat: usize,
    /// How the simulator is evaluated with `--tint`: `constructed` (every module from its stored
    /// weights) or `structured` (the proven-equal shortcut that reads `W, b` out of the prefix rows).
    #[cfg_attr(feature = "clap", arg(long, default_value = "constructed"))]
    pub execution: Execution,
    /// Evaluate the stored gates in their official `tanh(g10 · …)` form instead of its 0/1 limit.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tanh_gates: bool,
    /// Write logits that hold NaN or infinite values instead of failing (the failure names where the
    /// first non-finite value appeared: a weight, or the simulated update).
    #[cfg_attr(feature = "clap", arg(long))]
    pub allow_non_finite: bool,
    /// The most memory the request may need, in GiB (default: three quarters of the machine's
    /// memory). Before any tensor is made, the logits, one block's activations and its attention
    /// scores are estimated from the ids' shape and the model's sizes; a request over the limit is
    /// refused with the estimate. With --tint this counts the auxiliary model's part (both sets
    /// of logits), not the simulator's own state.
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_memory_gib: Option<f64>,
    /// TinT hyper-parameters.
    #[cfg_attr(feature = "clap", command(flatten))]
    pub tint_flags: TintFlags,
}

/// One request: the ids, where the logits go and how strictly they are checked.
#[derive(Debug, Clone, Copy)]
pub struct LogitsRequest<'a> {
    /// The ids file (named in errors).
    pub ids_path: &'a Path,
    /// Its content, read and checked by [`TokenIds::read`].
    pub ids: &'a TokenIds,
    /// The safetensors file to write.
    pub out: &'a Path,
    /// Run in float64 (the simulator's dtype; 8 bytes a value in the memory estimate).
    pub f64: bool,
    /// Write logits that hold NaN or infinite values instead of failing.
    pub allow_non_finite: bool,
    /// The most memory the request may need, in bytes; the flag that sets it is named in the
    /// refusal (`--max-memory-gib`).
    pub memory_limit: u64,
}

/// The TinT simulator's settings for a request (`logits --tint`).
#[derive(Debug, Clone)]
pub struct TintLogits {
    /// The TinT hyper-parameters.
    pub flags: TintFlags,
    /// The inner learning rate `eta` (on the summed loss).
    pub inner_lr: f64,
    /// Simulated SGD steps.
    pub steps: usize,
    /// How the simulator is evaluated.
    pub execution: Execution,
    /// Evaluate the stored gates in their official `tanh(g10 · …)` form.
    pub tanh_gates: bool,
    /// Time this many steps after one untimed warm-up step (`None`: one step, untimed).
    pub timed_steps: Option<usize>,
}

/// What [`write_logits`] reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum LogitsEvent {
    /// The simulator is built: its execution, gates, sizes and parameter counts, in one line.
    SimulatorBuilt(String),
    /// One timed step took this many wall seconds (loading and construction excluded; the step
    /// ends with a host read, so asynchronous backends have finished).
    TimedStep(f64),
}

/// What [`write_logits`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub enum LogitsWritten {
    /// `logits` `[batch, seq, vocab]`.
    Model {
        /// Their shape.
        dims: [usize; 3],
    },
    /// `first_logits` and `final_logits` `[batch, seq, vocab]` of the simulator.
    Tint {
        /// Their shape.
        dims: [usize; 3],
        /// Mean first-pass loss over the sequences.
        first_loss: f64,
        /// Mean loss after the simulated update.
        final_loss: f64,
    },
}

/// Computes the logits of `model` (or, with `tint`, of the TinT simulator built from it) for the
/// request's ids on `device` (the model's) and writes them to `request.out`.
///
/// # Shapes
///
/// Ids `[batch, seq]` (and the train mask of the same shape with `tint`); every written tensor is
/// `[batch, seq, vocab]`.
///
/// # Errors
///
/// [`EvalError`] for an id outside the vocabulary, an estimate over the memory limit, a missing or
/// useless train mask, a bad step setting, non-finite logits (with where they first appeared,
/// unless `allow_non_finite`), a simulator that cannot be built, or a file that cannot be written.
pub fn write_logits<B: Backend>(
    model: &AuxModel<B>,
    device: &B::Device,
    request: &LogitsRequest<'_>,
    tint: Option<&TintLogits>,
    on_event: &mut dyn FnMut(LogitsEvent),
) -> Result<LogitsWritten, EvalError> {
    let ids = request.ids;
    // Before any tensor: an id that does not fit the backend's integer type would panic in the cast.
    ids.check_vocab(model.vocab_size())?;
    admit_memory(model, request, if tint.is_some() { 2 } else { 1 })?;
    match tint {
        Some(tint) => write_tint_logits(model, request, tint, device, on_event),
        None => {
            let logits = model.forward(ids_tensor(&ids.input_ids, device))?;
            check_logits(request, &logits, "logits", || {
                tint_aux::first_non_finite_weight(model).or_else(|| {
                    Some(
                        "every weight is finite and the config is validated: the forward overflowed"
                            .into(),
                    )
                })
            })?;
            let dims = logits.dims();
            write_safetensors(request.out, vec![("logits", logits)])?;
            Ok(LogitsWritten::Model { dims })
        }
    }
}

/// Refuses a request whose estimated memory ([`tint_aux::ForwardMemory`]) is over its limit;
/// `logit_sets` is how many sets of logits the request writes.
fn admit_memory<B: Backend>(
    model: &AuxModel<B>,
    request: &LogitsRequest<'_>,
    logit_sets: u64,
) -> Result<(), EvalError> {
    let (batch, seq) = (request.ids.input_ids.len(), request.ids.input_ids[0].len());
    let value_bytes = if request.f64 { 8 } else { 4 };
    let mut memory = tint_aux::ForwardMemory::of_model(model, batch, seq, value_bytes);
    memory.logits = memory.logits.saturating_mul(logit_sets);
    memory.admit(
        &format!(
            "{}: logits of {batch} x {seq} token ids ({} vocabulary entries each)",
            request.ids_path.display(),
            model.vocab_size()
        ),
        request.memory_limit,
        "--max-memory-gib",
    )?;
    Ok(())
}

/// Fails on non-finite `logits` unless the request allows them; `cause` says where they came from.
fn check_logits<B: Backend, const D: usize>(
    request: &LogitsRequest<'_>,
    logits: &Tensor<B, D>,
    what: &str,
    cause: impl FnOnce() -> Option<String>,
) -> Result<(), EvalError> {
    if request.allow_non_finite {
        return Ok(());
    }
    tint_aux::check_finite(logits, what, cause).map_err(|e| {
        EvalError::from(e).context(format!(
            "{what} (pass --allow-non-finite to write them anyway)"
        ))
    })
}

/// `logits --tint`: first-pass and final logits of the simulator.
fn write_tint_logits<B: Backend>(
    model: &AuxModel<B>,
    request: &LogitsRequest<'_>,
    tint: &TintLogits,
    device: &B::Device,
    on_event: &mut dyn FnMut(LogitsEvent),
) -> Result<LogitsWritten, EvalError> {
    let ids = request.ids;
    ids.check_train_mask(request.ids_path).map_err(|e| {
        EvalError::from(e).context("--tint needs a useful \"train_mask\" next to \"input_ids\"")
    })?;
    let mask = ids
        .train_mask
        .as_ref()
        .expect("check_train_mask refuses ids without a train mask");
    // The same rules as `eval lm` / `eval icl`: a finite, non-negative step, at least one step.
    check_steps("--inner-lr", &[tint.inner_lr])?;
    check_step_count(tint.steps)?;
    let mut config = tint.flags.config(model, tint.inner_lr, tint.steps)?;
    config.execution = tint.execution;
    if tint.tanh_gates {
        config.gate_mode = GateMode::Tanh;
    }
    let dtype = request.f64.then_some(DType::F64);
    let simulator = tint_sim::ModelSimulator::new(model, config.clone(), dtype)?;
    let (hidden_size, num_prefixes, num_heads) = simulator.sizes();
    let flat: Vec<bool> = mask.iter().flatten().map(|&m| m == 1).collect();
    let train_mask =
        Tensor::<B, 2, Bool>::from_data(TensorData::new(flat, [mask.len(), mask[0].len()]), device);
    let input = tint_sim::SimInput::new(ids_tensor(&ids.input_ids, device), train_mask);
    on_event(LogitsEvent::SimulatorBuilt(format!(
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
    )));
    let mut output = simulator.forward(&input)?;
    // The warm-up step above is not timed; each timed step ends with a host read so that
    // asynchronous backends have finished.
    for _ in 0..tint.timed_steps.unwrap_or(0) {
        let start = std::time::Instant::now();
        output = simulator.forward(&input)?;
        let _ = output.final_logits.clone().sum().into_data();
        on_event(LogitsEvent::TimedStep(start.elapsed().as_secs_f64()));
    }
    check_logits(request, &output.first_logits, "first_logits", || {
        tint_aux::first_non_finite_weight(model).or_else(|| {
            Some("every weight is finite: the simulator's first pass overflowed".into())
        })
    })?;
    check_logits(request, &output.final_logits, "final_logits", || {
        Some(format!(
            "first_logits are finite, so the simulated update made them non-finite (inner_lr {:e}, {} \
             step(s))",
            tint.inner_lr, tint.steps
        ))
    })?;
    let dims = output.final_logits.dims();
    let (first_loss, final_loss) = (output.first_loss.mean(), output.final_loss.mean());
    write_safetensors(
        request.out,
        vec![
            ("first_logits", output.first_logits),
            ("final_logits", output.final_logits),
        ],
    )?;
    Ok(LogitsWritten::Tint {
        dims,
        first_loss,
        final_loss,
    })
}

/// Token ids as a `[batch, seq]` Int tensor.
///
/// # Shapes
///
/// `rows`: `batch` rows of `seq` ids each (checked equal by [`TokenIds::read`]) → `[batch, seq]`.
fn ids_tensor<B: Backend>(rows: &[Vec<i64>], device: &B::Device) -> Tensor<B, 2, Int> {
    let flat: Vec<i64> = rows.iter().flatten().copied().collect();
    Tensor::from_data(TensorData::new(flat, [rows.len(), rows[0].len()]), device)
}

/// Writes named float tensors to a safetensors file atomically, as F64 when the tensor is f64 and
/// F32 otherwise (creating the file's directory).
///
/// # Errors
///
/// [`EvalError::Io`] naming the directory or file that cannot be created or written.
fn write_safetensors<B: Backend>(
    path: &Path,
    tensors: Vec<(&str, Tensor<B, 3>)>,
) -> Result<(), EvalError> {
    let owned: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, t)| {
            let shape = t.dims().to_vec();
            let (dtype, bytes) = if t.dtype() == DType::F64 {
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
    create_parent_dir(path)?;
    let bytes = safetensors::serialize(views, None).map_err(|e| EvalError::Io {
        operation: "serialise the tensors for",
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    write_file(path, &bytes)
}
