//! [`ModelSimulator`]: the TinT simulator of any loaded auxiliary model — [`TintSimulator`] for
//! GPT-2 / OPT, [`LlamaSimulator`] for the LLaMA family (RMSNorm, SwiGLU, rotary GQA) — built from
//! one [`TintConfig`].

use burn::tensor::backend::Backend;
use burn::tensor::DType;
use tint_aux::AuxModel;

use crate::config::TintConfig;
use crate::error::SimError;
use crate::input::SimInput;
use crate::llama::{LlamaParams, LlamaSimulator, LlamaSimulatorConfig};
use crate::params::AuxParams;
use crate::reference::SimOutput;
use crate::simulator::TintSimulator;

/// The simulator of a GPT-2 / OPT or LLaMA-family auxiliary model.
#[derive(Debug)]
pub enum ModelSimulator<B: Backend> {
    /// GPT-2 / OPT (boxed: both simulators are large).
    Gpt2(Box<TintSimulator<B>>),
    /// LLaMA family, with [`LlamaSimulatorConfig::from_tint`] of the configuration.
    Llama(Box<LlamaSimulator<B>>),
}

impl<B: Backend> ModelSimulator<B> {
    /// Builds the simulator of `model` with `config` (its `execution` and gates included), in
    /// `dtype` (`None`: the model's own dtype; `Some(DType::F64)` for a float64 run).
    ///
    /// # Errors
    /// As [`TintSimulator::new`] / [`LlamaSimulator::from_params`], and
    /// [`SimError::UnsupportedModel`] for what TinT cannot simulate.
    pub fn new(
        model: &AuxModel<B>,
        config: TintConfig,
        dtype: Option<DType>,
    ) -> Result<Self, SimError> {
        if let AuxModel::Llama(_) = model {
            let mut params = LlamaParams::from_aux(model)?;
            if let Some(dtype) = dtype {
                params = params.cast(dtype);
            }
            let config = LlamaSimulatorConfig::from_tint(&config);
            return Ok(Self::Llama(Box::new(LlamaSimulator::from_params(
                params, config,
            )?)));
        }
        let mut aux = AuxParams::from_aux(model)?;
        if let Some(dtype) = dtype {
            aux = aux.cast(dtype);
        }
        Ok(Self::Gpt2(Box::new(TintSimulator::new(&aux, config)?)))
    }

    /// Runs the simulator (see [`TintSimulator::forward`]).
    ///
    /// # Shapes
    /// `input.input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// [`SimError::InvalidInput`] for inputs that do not match the model.
    pub fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError> {
        match self {
            Self::Gpt2(sim) => sim.forward(input),
            Self::Llama(sim) => sim.forward(input),
        }
    }

    /// Parameter count, counted the way the official code counts it (one module copy per layer
    /// and step, every prefix block, the embeddings).
    pub fn num_params(&self) -> usize {
        match self {
            Self::Gpt2(sim) => sim.num_params(),
            Self::Llama(sim) => sim.num_params(),
        }
    }

    /// Number of stored values the constructed execution reads (embeddings, every prefix block,
    /// one copy of each module kind; see [`TintSimulator::num_params_read`]).
    pub fn num_params_read(&self) -> usize {
        match self {
            Self::Gpt2(sim) => sim.num_params_read(),
            Self::Llama(sim) => sim.num_params_read(),
        }
    }

    /// `(Ds, P, Hs)` of the simulator.
    pub fn sizes(&self) -> (usize, usize, usize) {
        let dims = match self {
            Self::Gpt2(sim) => sim.dims(),
            Self::Llama(sim) => sim.dims(),
        };
        (dims.d_sim(), dims.n_prefixes(), dims.n_heads_sim())
    }
}
