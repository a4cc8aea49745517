//! Auxiliary language models for TinT: GPT-2, OPT and LLaMA (SmolLM2) definitions, loaders, tokenizers and
//! dynamic evaluation (explicit SGD on a prefix with burn autodiff).
//!
//! Library crate: generic over `B: Backend`, errors are [`AuxError`], nothing is printed.

pub mod error;
pub use error::AuxError;
