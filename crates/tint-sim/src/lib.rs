//! The TinT simulator (Trainable Transformer in Transformer, TINT_SPEC §4–§11) for pre-LayerNorm
//! auxiliary models (GPT-2, OPT), and its functional reference (TINT_SPEC §9).
//!
//! # Crate map
//!
//! | module | what it holds |
//! |---|---|
//! | [`config`] | [`TintConfig`]: TinT hyper-parameters, loss-gradient kind, compatibility switch |
//! | [`params`] | [`AuxParams`]: auxiliary weights in `[in, out]` layout with per-sequence copies |
//! | [`input`] | [`SimInput`]: token ids, training mask, optional gradient / ICL masks |
//! | [`math`] | LayerNorm / activation forward and first-order or exact backward |
//! | [`loss`] | loss gradient (§7) and evaluation cross-entropy |
//! | [`reference`] | [`FunctionalReference`]: the §9 update with plain tensor ops |
//! | [`error`] | [`SimError`] |
#![warn(missing_docs)]

pub mod config;
pub mod error;
mod from_aux;
pub mod input;
pub mod io;
pub mod loss;
pub mod math;
pub mod param_count;
pub mod params;
pub mod reference;
pub mod simulator;

pub use config::{DerivativeMode, LossGradientKind, TintConfig};
pub use error::SimError;
pub use input::SimInput;
pub use loss::EvalLoss;
pub use params::{Activation, AuxDims, AuxParams, LayerNormParams, LayerParams};
pub use reference::{FunctionalReference, SimOutput};
pub use simulator::TintSimulator;
