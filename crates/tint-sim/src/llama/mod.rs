//! TinT for the LLaMA family (RMSNorm, SwiGLU, rotary embeddings, grouped-query attention, tied or
//! untied LM head): the functional reference of a simulated SGD step (see docs/tint-llama.md).
//!
//! | module | what it holds |
//! |---|---|
//! | [`config`] | [`LlamaTintConfig`], [`LlamaUpdates`]: hyper-parameters and which parameters move |
//! | [`params`] | [`LlamaParams`]: the auxiliary weights as plain `[in, out]` tensors |
//! | [`math`] | RMSNorm / SwiGLU forward and first-order or exact backward |
//! | [`mod@reference`] | [`LlamaReference`]: forward, approximate backward, descent, final forward |
//! | [`mlp_block`] | [`mlp_block::SimulatedSwiGlu`]: the SwiGLU MLP simulated with tint-ops modules (first simulator piece) |
//! | [`attention_half`] | [`attention_half::SimulatedAttentionHalf`]: `h_in + W_O · RoPE-GQA-Attn(RMSNorm(h_in))` forward and backward + `W_O`/`W_V` descent from tint-ops modules |
//! | [`simulator`] | [`LlamaSimulator`]: the whole TinT network (forward, final norm + loss gradient, backward + descent, final forward) |
//! | [`param_count`] | [`param_count::LlamaParamCount`]: the simulator's parameter count, closed form and from the modules |
//! | [`mlp_half`] | [`mlp_half::SimulatedMlpHalf`]: `h_mid + SwiGLU(RMSNorm(h_mid))` forward and backward + descent from tint-ops modules |
//!
//! ```text
//! let model = tint_aux::load_model::<B>(Path::new("model.gguf"), &device)?;
//! let step = StepConfig { inner_lr: 1e-5, n_simulation_layers: Some(4), ..Default::default() };
//! let config = LlamaTintConfig { step, ..Default::default() };
//! let out = LlamaReference::new(&model, config)?.forward_with_train_lengths(ids, &[128])?;
//! // out.final_logits: [batch_size, seq_length, vocab_size]; out.final_loss: CE on the evaluation part
//! ```

pub mod attention_half;
pub mod config;
pub mod math;
pub mod mlp_block;
pub mod mlp_half;
pub mod param_count;
pub mod params;
pub mod reference;
pub mod reference_memory;
mod residual;
pub mod simulator;
pub mod step_gradients;

pub use config::{LlamaTintConfig, LlamaUpdates};
pub use params::{LlamaLayerParams, LlamaParams};
pub use reference::LlamaDirection;
pub use reference::LlamaReference;
pub use reference_memory::{ReferenceSizes, ReferenceStepMemory};
pub use simulator::{LlamaSimulator, LlamaSimulatorConfig};
