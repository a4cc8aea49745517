//! LLaMA-architecture causal LMs (SmolLM2-135M and friends): RMSNorm, SwiGLU MLP, rotary embeddings in
//! HF's `rotate_half` convention, grouped-query attention, tied or untied LM head.
//!
//! Weights are burn `Linear`s (`[d_input, d_output]`) in public fields, so the TinT simulator can read them.
//! Load with [`load_llama_hf`] (HF `LlamaForCausalLM` directory) or [`load_llama_gguf`] (a `.gguf` file, which
//! also gives the tokenizer), or build random weights with [`LlamaConfig::init`].

mod aux_impl;
mod block;
mod blockwise_backward;
mod config;
mod loader;
mod mlp;
mod model;
mod rms_norm;

pub use aux_impl::{gguf_tokenizer, load_gguf_model, try_load_llama};
pub use block::{LlamaBlock, LlamaLayerTrace};
pub(crate) use blockwise_backward::blockwise_loss_and_gradients;
pub use config::{HfLlamaConfig, HfRopeParameters, LlamaConfig};
pub(crate) use loader::gguf_name;
pub use loader::{
    load_llama_gguf, load_llama_hf, permute_rotary_rows, read_hf_config, unpermute_rotary_rows,
    LoadedGguf,
};
pub use mlp::{SwiGluMlp, SwiGluTrace};
pub use model::{LlamaModel, LlamaTrace};
pub use rms_norm::RmsNorm;
