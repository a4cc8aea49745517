//! Auxiliary language models for TinT: GPT-2, OPT and LLaMA (SmolLM2) definitions, loaders, tokenizers and
//! dynamic evaluation (explicit SGD on a prefix with burn autodiff).
//!
//! Library crate: generic over `B: Backend`, errors are [`AuxError`], nothing is printed.
//!
//! Crate map:
//! - [`config`]: serde mirrors of HF `config.json`, architecture detection.
//! - [`loader`]: [`load_model`] from a local directory (`config.json` + `model.safetensors`).
//! - [`model`]: [`AuxModel`], the common entry point (`forward`, `forward_traced`).
//! - [`gpt2`], [`opt`]: the architectures; [`block`], [`attention`], [`layer_norm`], [`activation`]:
//!   their shared layers (linear weights are `[d_input, d_output]`, `y = x W + b`).
//! - [`trace`]: per-layer intermediate activations.
//! - [`params`]: named parameters and a visitor over them.
//! - [`ids`]: token-id files and their checks; [`finite`]: finiteness checks of outputs.
//! - [`tokenizer`]: byte-level BPE tokenizers from `tokenizer.json` or `vocab.json` + `merges.txt`.
//! - [`loss`]: next-token negative log-likelihoods; [`dyn_eval`]: dynamic evaluation.
//!
//! ```no_run
//! use burn::backend::{Autodiff, Flex};
//! use burn::tensor::{Int, Tensor, TensorData};
//! use tint_aux::{dynamic_eval, load_model, AuxModel, DynEvalConfig};
//!
//! # fn main() -> Result<(), tint_aux::AuxError> {
//! type B = Autodiff<Flex>;
//! let device = Default::default();
//! let model: AuxModel<B> = load_model(std::path::Path::new("fixtures/aux/gpt2-tiny"), &device)?;
//! let ids = Tensor::<B, 2, Int>::from_data(TensorData::new(vec![1i64, 2, 3, 4, 5, 6], [1, 6]), &device);
//! let trace = model.forward_traced(ids.clone())?; // logits + per-layer activations
//! let config = DynEvalConfig { lr: 1e-2, ..Default::default() };
//! let outcome = dynamic_eval(&model, ids, 4, &config)?; // SGD on tokens 0..4, NLL of tokens 4..6
//! # let _ = (trace, outcome);
//! # Ok(())
//! # }
//! ```

pub mod activation;
pub mod attention;
pub mod block;
mod checkpoint;
pub mod config;
pub mod dyn_eval;
pub mod error;
pub mod finite;
pub mod gguf;
pub mod gpt2;
pub mod ids;
pub mod layer_norm;
pub mod llama;
pub mod loader;
pub mod loss;
pub mod memory;
pub mod model;
pub mod opt;
pub mod params;
pub mod prefix_cache;
mod size_fields;
pub mod tokenizer;
pub mod trace;
pub mod weight_file;

pub use checkpoint::linear;
pub use config::{read_text_limited, AuxConfig};
pub use dyn_eval::{
    dynamic_eval, dynamic_eval_with, selected_param_bytes, sgd_gradient, sgd_update, DynEvalConfig,
    DynEvalOutcome, GradientMemory, ParamSelection, SgdGradient,
};
pub use error::AuxError;
pub use finite::{check_finite, count_non_finite, first_non_finite_weight};
pub use ids::TokenIds;
pub use llama::{gguf_tokenizer, load_gguf_model};
pub use loader::load_model;
pub use loss::{
    continuation_nll, continuation_nll_of_logits, lm_loss, next_token_nll, LossMask, LossReduction,
};
pub use memory::{default_memory_limit, BackwardMemory, ForwardMemory};
pub use model::{AuxModel, CausalLm};
pub use params::{ParamGroup, ParamInfo, ParamMapper};
pub use prefix_cache::PrefixCache;
pub use tokenizer::AuxTokenizer;
pub use trace::{ForwardTrace, LayerTrace};
pub use weight_file::{FileTensor, TensorNaming, WeightFile};
