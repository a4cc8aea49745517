//! # tint-cgt: the Contextually Guided Transformer
//!
//! A GPT-2 style causal transformer whose layers at and below a readout layer `l` carry two streams:
//! `x` (the ordinary token stream, never reading `y`) and `y` (a context summary that reads `[x, y]`).
//! The summary `y^l` generates low-rank operators `T^kappa(x; y) = x + dW^kappa(y) [x; 1]` applied before
//! every attention and MLP above `l`. Freezing `y` after a prompt makes the operators constant, so they
//! can be folded into the weights: the prompt becomes a specialised plain transformer
//! (Zhmoginov, Lee, Vladymyrov, Sandler: "Contextually Guided Transformer").
//!
//! Crate map:
//! - [`config`]: [`CgtConfig`] (model hyper-parameters), presets live in [`presets`].
//! - Layers: [`attention`], [`mlp`], [`template`] (operator generator), [`block`], [`embedding`], [`model`].
//! - [`specialise`] (folding) and [`export`] (safetensors).
//! - Losses: [`loss`] (cross-entropy, L2, auxiliary), [`regularisers`] (continuity, orthogonality),
//!   [`vae`] (Gaussian-process prior KL).
//! - [`data`]: seeded streaming generators (arithmetic ICL, linear regression, text mixture).
//! - [`train`]: Adam + warm-up/cosine schedule + clipping, checkpoints, JSONL log;
//!   [`data_parallel`]: the same training over several devices (burn-collective all-reduce), with the
//!   step's random draws split by rows ([`draws`]), also across several nodes ([`nodes`]).
//! - [`metrics`]: answer accuracy (dynamic / specialised), representation variation, linear fit, y·y map
//!   (drawn by the experiments with `tint_lab::chart`).
//!
//! The crate is generic over `B: Backend` (`AutodiffBackend` for training) and never picks a backend.

pub mod attention;
pub mod block;
pub mod config;
pub mod data;
pub mod data_parallel;
pub mod draws;
pub mod embedding;
pub mod error;
pub mod export;
pub mod loss;
pub mod metrics;
pub mod mlp;
pub mod model;
pub mod nodes;
pub mod objective;
pub mod objective_config;
pub mod presets;
pub mod regularisers;
pub mod specialise;
pub mod template;
pub mod train;
pub mod vae;

pub use config::{CgtConfig, InputKind, Mixing};
pub use data_parallel::{train_data_parallel, train_data_parallel_on_nodes};
pub use embedding::CgtInput;
pub use error::{CgtError, Result};
pub use model::{CgtModel, CgtOutput, ContextSummary, LowerPass};

#[cfg(test)]
pub(crate) mod tests {
    /// CPU backend for unit tests.
    pub(crate) type TestBackend = burn::backend::Flex;
}
