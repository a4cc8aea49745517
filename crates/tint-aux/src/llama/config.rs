//! LLaMA hyper-parameters: our [`LlamaConfig`], its HF `config.json` mirror [`HfLlamaConfig`], and the
//! reading of the `llama.*` GGUF metadata.

use std::path::Path;

use burn::config::Config;
use serde::{Deserialize, Serialize};

use crate::gguf::GgufFile;
use crate::AuxError;

/// Hyper-parameters of a LLaMA-architecture decoder (RMSNorm, SwiGLU, RoPE, grouped-query attention).
#[derive(Config, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Model width.
    pub d_model: usize,
    /// Number of decoder blocks.
    pub n_layers: usize,
    /// Number of query heads.
    pub n_heads: usize,
    /// Number of key/value heads (grouped-query attention when below `n_heads`).
    pub n_kv_heads: usize,
    /// SwiGLU hidden width.
    pub d_ff: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// RMSNorm epsilon. Default: 1e-5.
    #[config(default = 1e-5)]
    pub rms_norm_eps: f64,
    /// RoPE base θ. Default: 10000.
    #[config(default = 10000.0)]
    pub rope_theta: f64,
    /// Longest sequence the model was trained for. Default: 2048.
    #[config(default = 2048)]
    pub max_positions: usize,
    /// Whether the LM head reuses the token embedding. Default: false.
    #[config(default = false)]
    pub tie_word_embeddings: bool,
}

impl LlamaConfig {
    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// Query heads per key/value head.
    pub fn n_rep(&self) -> usize {
        self.n_heads / self.n_kv_heads
    }

    /// Checks the divisibility constraints the architecture needs.
    ///
    /// # Errors
    /// [`AuxError::InvalidConfig`] naming `path` (the file the config came from).
    pub fn validate(&self, path: &Path) -> Result<(), AuxError> {
        let fail = |reason: String| {
            Err(AuxError::InvalidConfig {
                path: path.to_path_buf(),
                reason,
            })
        };
        let sizes = [
            ("d_model", self.d_model),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("n_kv_heads", self.n_kv_heads),
            ("d_ff", self.d_ff),
            ("vocab_size", self.vocab_size),
            ("max_positions", self.max_positions),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return fail(format!("{name} must be positive"));
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return fail(format!(
                "d_model {} is not a multiple of n_heads {}",
                self.d_model, self.n_heads
            ));
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return fail(format!(
                "n_heads {} is not a multiple of n_kv_heads {}",
                self.n_heads, self.n_kv_heads
            ));
        }
        if !self.head_dim().is_multiple_of(2) {
            return fail(format!(
                "head_dim {} must be even for rotary embeddings",
                self.head_dim()
            ));
        }
        for (name, value) in [
            ("rms_norm_eps", self.rms_norm_eps),
            ("rope_theta", self.rope_theta),
        ] {
            if let Err(reason) = crate::config::check_positive_finite(name, value) {
                return fail(reason);
            }
        }
        if self.min_parameter_count().is_none() {
            return fail(format!(
                "sizes overflow a 64-bit parameter count (vocab_size {}, d_model {}, n_layers {}, d_ff {})",
                self.vocab_size, self.d_model, self.n_layers, self.d_ff
            ));
        }
        Ok(())
    }

    /// [`crate::config::min_parameter_count`] of this config.
    pub fn min_parameter_count(&self) -> Option<u64> {
        crate::config::min_parameter_count(
            self.vocab_size,
            self.d_model,
            self.d_model,
            self.n_layers,
            self.d_ff,
        )
    }

    /// Reads the `llama.*` metadata of a GGUF file. The head is tied when the file has no `output.weight`.
    ///
    /// # Errors
    /// [`AuxError::Gguf`] for missing or mistyped keys, [`AuxError::InvalidConfig`] for inconsistent values.
    pub fn from_gguf(file: &GgufFile, path: &Path) -> Result<Self, AuxError> {
        let arch = file.get_str("general.architecture")?;
        if arch != "llama" {
            return Err(AuxError::InvalidConfig {
                path: path.to_path_buf(),
                reason: format!("general.architecture is {arch:?}, expected \"llama\""),
            });
        }
        let int = |key: &str| -> Result<usize, AuxError> {
            let value = file.get_u64(key)?;
            usize::try_from(value).map_err(|_| AuxError::InvalidConfig {
                path: path.to_path_buf(),
                reason: format!("{key} = {value} does not fit in usize"),
            })
        };
        let d_model = int("llama.embedding_length")?;
        let n_heads = int("llama.attention.head_count")?;
        let n_kv_heads = match file.metadata.get("llama.attention.head_count_kv") {
            Some(_) => int("llama.attention.head_count_kv")?,
            None => n_heads,
        };
        let vocab_size = match file.metadata.get("llama.vocab_size") {
            Some(_) => int("llama.vocab_size")?,
            None => file.get_array("tokenizer.ggml.tokens")?.len(),
        };
        let config = LlamaConfig::new(
            d_model,
            int("llama.block_count")?,
            n_heads,
            n_kv_heads,
            int("llama.feed_forward_length")?,
            vocab_size,
        )
        .with_rms_norm_eps(file.get_f64("llama.attention.layer_norm_rms_epsilon")?)
        .with_rope_theta(match file.metadata.get("llama.rope.freq_base") {
            Some(_) => file.get_f64("llama.rope.freq_base")?,
            None => 10000.0,
        })
        .with_max_positions(int("llama.context_length")?)
        .with_tie_word_embeddings(file.tensor_info("output.weight").is_err());
        config.validate(path)?;
        if let Some(rope_dim) = file.metadata.get("llama.rope.dimension_count") {
            if rope_dim.as_u64() != Some(config.head_dim() as u64) {
                return Err(AuxError::InvalidConfig {
                    path: path.to_path_buf(),
                    reason: format!(
                        "llama.rope.dimension_count {rope_dim:?} differs from head_dim {} (partial rotary is not implemented)",
                        config.head_dim()
                    ),
                });
            }
        }
        Ok(config)
    }
}

/// HF `LlamaConfig` (`config.json` of `LlamaForCausalLM`), the fields the forward pass uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HfLlamaConfig {
    /// Model width.
    pub hidden_size: usize,
    /// SwiGLU hidden width.
    pub intermediate_size: usize,
    /// Number of query heads.
    pub num_attention_heads: usize,
    /// Number of decoder blocks.
    pub num_hidden_layers: usize,
    /// Number of key/value heads; `null` means `num_attention_heads`.
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// RMSNorm epsilon. Default: 1e-6 (HF's default).
    #[serde(default = "default_rms_eps")]
    pub rms_norm_eps: f64,
    /// RoPE base θ (transformers < 5); `rope_parameters.rope_theta` takes precedence. Default: 10000.
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    /// RoPE settings as transformers ≥ 5 writes them; only `rope_type = "default"` is supported.
    #[serde(default)]
    pub rope_parameters: Option<HfRopeParameters>,
    /// Longest sequence. Default: 2048.
    #[serde(default = "default_max_positions")]
    pub max_position_embeddings: usize,
    /// Tied LM head. Default: false.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Explicit head width; only `hidden_size / num_attention_heads` is supported.
    #[serde(default)]
    pub head_dim: Option<usize>,
    /// Must be `silu`. Default: `silu`.
    #[serde(default = "default_silu")]
    pub hidden_act: String,
    /// Must be false (no attention biases).
    #[serde(default)]
    pub attention_bias: bool,
    /// Must be false (no MLP biases).
    #[serde(default)]
    pub mlp_bias: bool,
    /// Must be null (no RoPE scaling).
    #[serde(default)]
    pub rope_scaling: Option<serde_json::Value>,
}

/// The `rope_parameters` object of transformers ≥ 5.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HfRopeParameters {
    /// RoPE base θ.
    #[serde(default)]
    pub rope_theta: Option<f64>,
    /// Scaling scheme; `default` means none.
    #[serde(default)]
    pub rope_type: Option<String>,
}

fn default_rms_eps() -> f64 {
    1e-6
}
fn default_rope_theta() -> f64 {
    10000.0
}
fn default_max_positions() -> usize {
    2048
}
fn default_silu() -> String {
    "silu".to_string()
}

impl HfLlamaConfig {
    /// Converts to [`LlamaConfig`], rejecting features this implementation lacks.
    ///
    /// # Errors
    /// [`AuxError::InvalidConfig`] naming `path`.
    pub fn to_config(&self, path: &Path) -> Result<LlamaConfig, AuxError> {
        let fail = |reason: String| {
            Err(AuxError::InvalidConfig {
                path: path.to_path_buf(),
                reason,
            })
        };
        if self.hidden_act != "silu" {
            return fail(format!(
                "hidden_act {:?} (only silu is implemented)",
                self.hidden_act
            ));
        }
        if self.attention_bias || self.mlp_bias {
            return fail("attention_bias/mlp_bias are not implemented".to_string());
        }
        if self.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
            return fail("rope_scaling is not implemented".to_string());
        }
        let mut rope_theta = self.rope_theta;
        if let Some(rope) = &self.rope_parameters {
            if let Some(kind) = rope.rope_type.as_deref().filter(|k| *k != "default") {
                return fail(format!("rope_type {kind:?} is not implemented"));
            }
            rope_theta = rope.rope_theta.unwrap_or(rope_theta);
        }
        let config = LlamaConfig::new(
            self.hidden_size,
            self.num_hidden_layers,
            self.num_attention_heads,
            self.num_key_value_heads.unwrap_or(self.num_attention_heads),
            self.intermediate_size,
            self.vocab_size,
        )
        .with_rms_norm_eps(self.rms_norm_eps)
        .with_rope_theta(rope_theta)
        .with_max_positions(self.max_position_embeddings)
        .with_tie_word_embeddings(self.tie_word_embeddings);
        config.validate(path)?;
        if let Some(head_dim) = self.head_dim {
            if head_dim != config.head_dim() {
                return fail(format!(
                    "head_dim {head_dim} differs from hidden_size / num_attention_heads = {}",
                    config.head_dim()
                ));
            }
        }
        Ok(config)
    }
}
