//! GPT-2: learned positions, pre-LN blocks, `gelu_new`, LM head tied to the token embedding.

mod loader;
mod model;

pub use loader::load_gpt2;
pub(crate) use loader::load_gpt2_from as load_gpt2_from_checkpoint;
pub use model::Gpt2;
