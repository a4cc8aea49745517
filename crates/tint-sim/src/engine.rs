//! One entry point for every TinT engine: [`build`] makes the constructed simulator (either
//! [`Execution`]) or the functional reference of any loaded auxiliary model — GPT-2 / OPT or the
//! LLaMA family — from one [`TintConfig`], behind the [`TintStep`] trait that every engine
//! implements.

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Int, Tensor};
use tint_aux::AuxModel;

use crate::any_model::ModelSimulator;
use crate::config::{Execution, TintConfig};
use crate::error::SimError;
use crate::input::SimInput;
use crate::llama::{
    LlamaDirection, LlamaParams, LlamaReference, LlamaSimulator, LlamaTintConfig,
    ReferenceStepMemory,
};
use crate::params::AuxParams;
use crate::reference::{FunctionalReference, SimOutput};
use crate::simulator::TintSimulator;
use crate::step_config::StepConfig;

/// Which implementation runs the TinT step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The constructed simulator network, evaluated with this execution (docs/construction.md §15).
    Simulator(Execution),
    /// The functional reference: the same update with plain tensor maths (docs/construction.md §9).
    Reference,
}

impl Engine {
    /// The constructed simulator, every module from its stored weights (docs/construction.md §15).
    pub const CONSTRUCTED: Engine = Engine::Simulator(Execution::Constructed);
    /// The constructed simulator in its structured execution, proven equal to the constructed one.
    pub const STRUCTURED: Engine = Engine::Simulator(Execution::Structured);
    /// Every engine: constructed, structured, reference.
    pub const ALL: [Engine; 3] = [Self::CONSTRUCTED, Self::STRUCTURED, Engine::Reference];

    /// The simulator's execution (`None` for the functional reference).
    pub fn execution(self) -> Option<Execution> {
        match self {
            Engine::Simulator(execution) => Some(execution),
            Engine::Reference => None,
        }
    }
}

/// A TinT step: one forward pass that runs the auxiliary model on the training part, applies the
/// simulated update and evaluates the updated model. Implemented by every engine: [`TintSimulator`]
/// and [`FunctionalReference`] (GPT-2 / OPT), [`LlamaSimulator`] and [`LlamaReference`] (LLaMA
/// family), and [`ModelSimulator`].
pub trait TintStep<B: Backend>: Send + Sync {
    /// First-pass and final logits (and losses) of a batch.
    ///
    /// # Shapes
    /// `input.input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// [`SimError::InvalidInput`] for inputs that do not match the model.
    fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError>;

    /// Which engine this is.
    fn engine(&self) -> Engine;

    /// The simulated step it runs.
    fn step(&self) -> &StepConfig;

    /// The step on `input` (a batch of one sequence) and the auxiliary model it leaves, whose
    /// plain forward ([`UpdatedModel::logits`]) gives the step's `final_logits` on `input`'s ids
    /// and scores other ids with the weights trained on `input`: what lets a caller train once
    /// and evaluate many sequences. `None` (the default) for an engine that does not hand out its
    /// updated weights: the simulators, which keep them in the prefix rows of their states.
    ///
    /// # Shapes
    /// `input.input_ids`: `[1, seq_length]` → logits `[1, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// As [`Self::forward`], and [`SimError::InvalidInput`] for a batch of more than one sequence.
    fn updated(&self, input: &SimInput<B>) -> Option<Result<Updated<B>, SimError>> {
        let _ = input;
        None
    }

    /// Whether [`Self::direction`] gives a direction: the LLaMA functional reference with one
    /// forward-backward pass. The default: no.
    fn gives_directions(&self) -> bool {
        false
    }

    /// The step's descent direction on the summed loss of `inputs` (each a batch of one
    /// sequence, trained apart from the others on the same weights): with one input, what
    /// [`Self::updated`] gives at any step size ([`StepDirection::updated`]) from one backward
    /// pass; with several, TinT's Single format. `None` where [`Self::gives_directions`] is false
    /// (an engine that does not hand out its updated weights, a step of more than one
    /// forward-backward pass, whose later gradients depend on `η`).
    ///
    /// # Shapes
    /// every `inputs[i].input_ids`: `[1, seq_length_i]`.
    ///
    /// # Errors
    /// As [`Self::updated`] for each input; no input.
    fn direction(
        &self,
        inputs: &[SimInput<B>],
    ) -> Option<Result<Box<dyn StepDirection<B>>, SimError>> {
        let _ = inputs;
        None
    }

    /// An upper estimate of the memory one step on sequences of `seq_lengths` needs
    /// ([`ReferenceStepMemory`]), to refuse a step over a limit before it allocates. `None` (the
    /// default) where the engine has no estimate yet: every engine but the LLaMA functional
    /// reference (the one `eval icl` and `eval lm` run on SmolLM2 at 2,048 positions).
    fn step_memory(&self, seq_lengths: &[usize]) -> Option<ReferenceStepMemory> {
        let _ = seq_lengths;
        None
    }
}

/// The descent direction of one TinT step on one or more sequences ([`TintStep::direction`]).
pub trait StepDirection<B: Backend>: Send + Sync {
    /// The updated model at step size `inner_lr`: the model [`TintStep::updated`] of the same
    /// engine configured with that step size returns, computed with the same operations.
    fn updated(&self, inner_lr: f64) -> Box<dyn UpdatedModel<B>>;
}

impl<B: Backend> StepDirection<B> for LlamaDirection<B> {
    fn updated(&self, inner_lr: f64) -> Box<dyn UpdatedModel<B>> {
        Box::new(LlamaDirection::updated(self, inner_lr))
    }
}

/// What [`TintStep::updated`] returns: the step's output and the updated model.
pub type Updated<B> = (SimOutput<B>, Box<dyn UpdatedModel<B>>);

/// An auxiliary model whose weights a TinT step updated, evaluated by plain forwards (no step).
pub trait UpdatedModel<B: Backend>: Send + Sync {
    /// Logits of the updated model.
    ///
    /// # Shapes
    /// `input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// [`SimError::InvalidInput`] for ids that do not fit the model.
    fn logits(&self, input_ids: Tensor<B, 2, Int>) -> Result<Tensor<B, 3>, SimError>;

    /// The updated weights in a copy of `base` (the auxiliary model the step was built from), to
    /// run with the model's own forward and key/value cache; `None` (the default) where the
    /// weights do not map back onto an [`AuxModel`] (the GPT-2/OPT reference: plain
    /// [`Self::logits`] only).
    ///
    /// # Errors
    /// [`SimError::UnsupportedModel`] when `base` is not the model the step was built from.
    fn to_aux(&self, base: &AuxModel<B>) -> Option<Result<AuxModel<B>, SimError>> {
        let _ = base;
        None
    }
}

impl<B: Backend> UpdatedModel<B> for FunctionalReference<B> {
    fn logits(&self, input_ids: Tensor<B, 2, Int>) -> Result<Tensor<B, 3>, SimError> {
        FunctionalReference::logits(self, input_ids)
    }
}

impl<B: Backend> UpdatedModel<B> for LlamaReference<B> {
    fn logits(&self, input_ids: Tensor<B, 2, Int>) -> Result<Tensor<B, 3>, SimError> {
        LlamaReference::logits(self, input_ids)
    }

    fn to_aux(&self, base: &AuxModel<B>) -> Option<Result<AuxModel<B>, SimError>> {
        Some(self.params().to_aux(base))
    }
}

impl<B: Backend> TintStep<B> for TintSimulator<B> {
    fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError> {
        TintSimulator::forward(self, input)
    }
    fn engine(&self) -> Engine {
        Engine::Simulator(self.config().execution)
    }
    fn step(&self) -> &StepConfig {
        &self.config().step
    }
}

impl<B: Backend> TintStep<B> for LlamaSimulator<B> {
    fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError> {
        LlamaSimulator::forward(self, input)
    }
    fn engine(&self) -> Engine {
        Engine::Simulator(self.config().execution)
    }
    fn step(&self) -> &StepConfig {
        &self.config().step.step
    }
}

impl<B: Backend> TintStep<B> for FunctionalReference<B> {
    fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError> {
        FunctionalReference::forward(self, input)
    }
    fn engine(&self) -> Engine {
        Engine::Reference
    }
    fn step(&self) -> &StepConfig {
        &self.config().step
    }
    fn updated(&self, input: &SimInput<B>) -> Option<Result<Updated<B>, SimError>> {
        Some(
            FunctionalReference::updated(self, input)
                .map(|(output, model)| (output, Box::new(model) as Box<dyn UpdatedModel<B>>)),
        )
    }
}

impl<B: Backend> TintStep<B> for LlamaReference<B> {
    fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError> {
        LlamaReference::forward(self, input)
    }
    fn engine(&self) -> Engine {
        Engine::Reference
    }
    fn step(&self) -> &StepConfig {
        &self.config().step
    }
    fn updated(&self, input: &SimInput<B>) -> Option<Result<Updated<B>, SimError>> {
        Some(
            LlamaReference::updated(self, input)
                .map(|(output, model)| (output, Box::new(model) as Box<dyn UpdatedModel<B>>)),
        )
    }
    fn gives_directions(&self) -> bool {
        self.config().step.n_forward_backward == 1
    }
    fn direction(
        &self,
        inputs: &[SimInput<B>],
    ) -> Option<Result<Box<dyn StepDirection<B>>, SimError>> {
        if !self.gives_directions() {
            return None;
        }
        Some(
            LlamaReference::direction(self, inputs)
                .map(|direction| Box::new(direction) as Box<dyn StepDirection<B>>),
        )
    }
    fn step_memory(&self, seq_lengths: &[usize]) -> Option<ReferenceStepMemory> {
        Some(LlamaReference::step_memory(self, seq_lengths))
    }
}

impl<B: Backend> TintStep<B> for ModelSimulator<B> {
    fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError> {
        ModelSimulator::forward(self, input)
    }
    fn engine(&self) -> Engine {
        match self {
            Self::Gpt2(sim) => sim.engine(),
            Self::Llama(sim) => sim.engine(),
        }
    }
    fn step(&self) -> &StepConfig {
        match self {
            Self::Gpt2(sim) => TintStep::step(sim.as_ref()),
            Self::Llama(sim) => TintStep::step(sim.as_ref()),
        }
    }
}

/// The TinT `engine` of `model` with `config`, in `dtype` (`None`: the model's own dtype;
/// `Some(DType::F64)` for a float64 run). A simulator engine replaces `config.execution` with its
/// own; GPT-2 / OPT get [`TintSimulator`] / [`FunctionalReference`], LLaMA-family models
/// [`LlamaSimulator`] (sizes from [`crate::llama::LlamaSimulatorConfig::from_tint`]) /
/// [`LlamaReference`] (step from [`LlamaTintConfig::from_tint`]).
///
/// One step on the committed micro GPT-2: the constructed network trains on the first 12 tokens
/// inside its forward pass and scores the rest; the functional reference takes the same step.
///
/// ```
/// use burn::backend::Flex;
/// use burn::tensor::{Int, Tensor, TensorData};
/// use std::path::Path;
/// use tint_sim::{build, Engine, Execution, SimInput, TintConfig};
///
/// let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
///     .join("../../fixtures/official-tint/micro-gpt2-random");
/// let device = Default::default();
/// let model = tint_aux::load_model::<Flex>(&dir, &device)?;
/// let mut config = TintConfig::for_model(model.hidden_size(), 8, 8);
/// config.step.inner_lr = 0.1;
/// let ids: Vec<i64> = (0..24).map(|t| (t * 37 + 5) % 400).collect();
/// let ids = Tensor::<Flex, 2, Int>::from_data(TensorData::new(ids, [1, 24]), &device);
/// let input = SimInput::with_train_lengths(ids, &[12])?;
/// let tint = build(&model, &config, Engine::Simulator(Execution::Constructed), None)?;
/// let reference = build(&model, &config, Engine::Reference, None)?;
/// let (a, b) = (tint.forward(&input)?, reference.forward(&input)?);
/// let gap: f32 = (a.final_logits - b.final_logits).abs().max().into_scalar();
/// assert!(gap < 2e-3, "constructed and reference differ by {gap}"); // docs/construction.md §9.4
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// The construction errors of the engine ([`SimError::InvalidConfig`] naming the rule and values),
/// and [`SimError::UnsupportedModel`] for what TinT cannot simulate.
pub fn build<B: Backend>(
    model: &AuxModel<B>,
    config: &TintConfig,
    engine: Engine,
    dtype: Option<DType>,
) -> Result<Box<dyn TintStep<B>>, SimError> {
    match engine {
        Engine::Simulator(execution) => {
            let config = TintConfig {
                execution,
                ..config.clone()
            };
            Ok(match ModelSimulator::new(model, config, dtype)? {
                ModelSimulator::Gpt2(sim) => sim,
                ModelSimulator::Llama(sim) => sim,
            })
        }
        Engine::Reference => {
            if let AuxModel::Llama(_) = model {
                let mut params = LlamaParams::from_aux(model)?;
                if let Some(dtype) = dtype {
                    params = params.cast(dtype);
                }
                let step = LlamaTintConfig::from_tint(config);
                return Ok(Box::new(LlamaReference::from_params(params, step)?));
            }
            let mut aux = AuxParams::from_aux(model)?;
            if let Some(dtype) = dtype {
                aux = aux.cast(dtype);
            }
            Ok(Box::new(FunctionalReference::new(aux, config.clone())?))
        }
    }
}
