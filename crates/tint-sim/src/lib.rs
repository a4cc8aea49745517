//! The TinT simulator (Trainable Transformer in Transformer, docs/construction.md §4–§11) for pre-LayerNorm
//! auxiliary models (GPT-2, OPT), and its functional reference (docs/construction.md §9).
//!
//! # Crate map
//!
//! | module | what it holds |
//! |---|---|
//! | [`step_config`] | [`StepConfig`]: the simulated step every engine shares (layers, steps, `η`, `s`, loss gradient, derivatives), one validation |
//! | [`engine`] | [`build`]: any engine (simulator with either execution, or functional reference) of any auxiliary model behind the [`TintStep`] trait |
//! | [`config`] | [`TintConfig`]: TinT sizes, the step, gates, execution, compatibility switch |
//! | [`params`] | [`AuxParams`]: auxiliary weights in `[in, out]` layout with per-sequence copies |
//! | [`input`] | [`SimInput`]: token ids, training mask, optional gradient / ICL masks |
//! | [`math`] | LayerNorm / activation forward and first-order or exact backward |
//! | [`output`] | [`SimOutput`]: the logits and losses a step returns |
//! | [`loss`] | loss gradient (§7) and evaluation cross-entropy |
//! | [`mod@reference`] | [`FunctionalReference`]: the §9 update with plain tensor ops (oracle and fast path) |
//! | `family_step` | the TinT step once for every engine and family: `run_rounds` over a `StepFamily` (the GPT-2 / OPT and LLaMA simulators and references), `simulate` for the simulators |
//! | [`simulator`] | [`TintSimulator`]: the constructed TinT network built from tint-ops modules |
//! | [`param_count`] | official (§11) and paper (Table 3) parameter counts without building |
//! | [`flops`] | analytic FLOP counts of a step, dynamic evaluation and a forward |
//! | [`io`] | save / load a simulator (`tint_config.json` + `tint.safetensors`) |
//! | [`error`] | [`SimError`] |
//!
//! # Usage
//!
//! ```text
//! let model = tint_aux::load_model::<B>(dir, &device)?;
//! let aux = AuxParams::from_aux(&model)?;                 // .cast(DType::F64) for exactness checks
//! let mut config = TintConfig::for_model(768, 256, 256);
//! config.step.inner_lr = 1e-4;
//! let input = SimInput::with_train_lengths(input_ids, &train_lengths)?;   // or SimInput::new(ids, mask)
//! let out = TintSimulator::new(&aux, config.clone())?.forward(&input)?;   // first/final logits + losses
//! let fast = FunctionalReference::new(aux, config)?.forward(&input)?;     // same result, plain tensors
//! ```
//!
//! # Step size
//!
//! TinT descends on the **summed** next-token loss over the training targets; dynamic evaluation
//! usually averages. With `n` loss terms (`Ltr - 1` for one training prefix), a TinT step `eta`
//! corresponds to an averaged-loss step `lr = eta * n` (docs/construction.md §10).
//!
//! # Precision
//!
//! Everything runs in the dtype of the auxiliary weights: f32 by default, f64 after
//! [`AuxParams::cast`] (burn's Flex backend keeps f64 end to end). Gates are exact 0/1 selections.
#![warn(missing_docs)]

pub mod any_model;
pub mod config;
pub mod engine;
pub mod error;
mod family_step;
pub mod flops;
mod from_aux;
pub mod input;
pub mod io;
pub mod llama;
pub mod loss;
pub mod math;
pub mod output;
pub mod param_count;
pub mod params;
pub mod reference;
pub mod sequences;
pub mod simulator;
pub mod step_config;
mod updated_params;

pub use any_model::ModelSimulator;
pub use config::{Execution, GateMode, TintConfig, TintSizes};
pub use engine::{build, Engine, StepDirection, TintStep, Updated, UpdatedModel};
pub use error::SimError;
pub use input::SimInput;
pub use loss::EvalLoss;
pub use params::{Activation, AuxDims, AuxParams, LayerNormParams, LayerParams};
pub use reference::{FunctionalReference, SimOutput};
pub use simulator::TintSimulator;
pub use step_config::{AttentionBackwardMode, DerivativeMode, LossGradientKind, StepConfig};
pub use updated_params::tint_updated_params;
