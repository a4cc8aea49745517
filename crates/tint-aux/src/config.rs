//! Serde mirrors of Hugging Face `config.json` files and architecture detection.
//!
//! Field names follow HF exactly (they are the JSON keys); everything else in this crate uses the
//! burn-nn vocabulary (`d_model`, `n_heads`, `d_ff`, `n_layers`).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::AuxError;

/// The `model_type` values [`AuxConfig::from_json_str`] understands.
pub const SUPPORTED_MODEL_TYPES: &str = "gpt2, opt, llama";

/// HF `GPT2Config` (the fields the forward pass uses).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpt2Config {
    /// Model width `d_model`.
    pub n_embd: usize,
    /// Number of transformer blocks.
    pub n_layer: usize,
    /// Number of attention heads.
    pub n_head: usize,
    /// Length of the learned position table.
    pub n_positions: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// LayerNorm epsilon. Default: 1e-5.
    #[serde(default = "default_ln_eps")]
    pub layer_norm_epsilon: f64,
    /// MLP activation; only `gelu_new` (tanh approximation) is implemented. Default: `gelu_new`.
    #[serde(default = "default_gelu_new")]
    pub activation_function: String,
    /// MLP hidden width; `null` means `4 * n_embd`.
    #[serde(default)]
    pub n_inner: Option<usize>,
    /// Scale attention scores by `1 / sqrt(d_k)`; only `true` is implemented. Default: true.
    #[serde(default = "default_true")]
    pub scale_attn_weights: bool,
    /// Extra `1 / (layer + 1)` score scaling; only `false` is implemented. Default: false.
    #[serde(default)]
    pub scale_attn_by_inverse_layer_idx: bool,
    /// LM head tied to `wte`; only `true` is implemented. Default: true.
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
}

impl Gpt2Config {
    /// MLP hidden width `d_ff` (`n_inner`, or `4 * n_embd` when unset; saturating, and validation
    /// refuses an `n_embd` whose `4 * n_embd` overflows).
    pub fn d_ff(&self) -> usize {
        self.n_inner.unwrap_or(self.n_embd.saturating_mul(4))
    }
}

/// HF `OPTConfig` (the fields the forward pass uses).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptConfig {
    /// Model width `d_model`.
    pub hidden_size: usize,
    /// Number of transformer blocks.
    pub num_hidden_layers: usize,
    /// MLP hidden width `d_ff`.
    pub ffn_dim: usize,
    /// Number of attention heads.
    pub num_attention_heads: usize,
    /// Longest sequence; the position table has `max_position_embeddings + 2` rows (offset 2).
    pub max_position_embeddings: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Pre-LN (`true`, as in opt-125m) or post-LN (`false`, as in opt-350m). Default: true.
    #[serde(default = "default_true")]
    pub do_layer_norm_before: bool,
    /// Width of the token embedding; when it differs from `hidden_size` the model has
    /// `project_in`/`project_out`. `null` means `hidden_size`.
    #[serde(default)]
    pub word_embed_proj_dim: Option<usize>,
    /// MLP activation; only `relu` is implemented. Default: `relu`.
    #[serde(default = "default_relu")]
    pub activation_function: String,
    /// Whether linear layers have biases. Default: true.
    #[serde(default = "default_true")]
    pub enable_bias: bool,
    /// Whether LayerNorms have a gain and bias. Default: true.
    #[serde(default = "default_true")]
    pub layer_norm_elementwise_affine: bool,
    /// HF's switch that drops the final LayerNorm of pre-LN models. Default: false.
    #[serde(default, rename = "_remove_final_layer_norm")]
    pub remove_final_layer_norm: bool,
    /// LM head tied to `embed_tokens`; only `true` is implemented. Default: true.
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
}

impl OptConfig {
    /// Width of the token embedding (`word_embed_proj_dim`, or `hidden_size` when unset).
    pub fn d_embed(&self) -> usize {
        self.word_embed_proj_dim.unwrap_or(self.hidden_size)
    }

    /// Whether the model has a final LayerNorm (pre-LN and not removed, as in HF).
    pub fn has_final_layer_norm(&self) -> bool {
        self.do_layer_norm_before && !self.remove_final_layer_norm
    }

    /// Whether the model has `project_in`/`project_out`.
    pub fn has_projections(&self) -> bool {
        self.d_embed() != self.hidden_size
    }
}

/// LayerNorm epsilon of OPT (PyTorch `nn.LayerNorm` default; OPT configs do not store it).
pub const OPT_LAYER_NORM_EPS: f64 = 1e-5;

/// Number of unused rows at the start of OPT's learned position table.
pub const OPT_POSITION_OFFSET: usize = 2;

/// A lower bound on the number of parameters of a decoder with these sizes: the token embedding
/// (`vocab · d_embed`) and, per block, at least two `d_model × d_model` attention matrices and two
/// `d_model × d_ff` MLP matrices (true of GPT-2, OPT and LLaMA). `None` when it overflows `u64`.
///
/// The loaders compare it with the number of values in the checkpoint before building anything, so that a
/// corrupt size (10⁹ layers, a 2⁴⁰-wide model) is refused without allocating.
pub fn min_parameter_count(
    vocab: usize,
    d_embed: usize,
    d_model: usize,
    n_layers: usize,
    d_ff: usize,
) -> Option<u64> {
    let [vocab, d_embed, d_model, n_layers, d_ff] =
        [vocab, d_embed, d_model, n_layers, d_ff].map(|v| v as u64);
    let per_block = d_model
        .checked_mul(d_model)?
        .checked_add(d_model.checked_mul(d_ff)?)?
        .checked_mul(2)?;
    vocab
        .checked_mul(d_embed)?
        .checked_add(n_layers.checked_mul(per_block)?)
}

/// Checks that `value` (a config field called `name`) is finite and positive.
pub(crate) fn check_positive_finite(name: &str, value: f64) -> Result<(), String> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(format!("{name} must be finite and positive, found {value}"))
    }
}

/// A parsed `config.json` of a supported architecture.
#[derive(Debug, Clone, PartialEq)]
pub enum AuxConfig {
    /// `model_type: "gpt2"`.
    Gpt2(Gpt2Config),
    /// `model_type: "opt"`.
    Opt(OptConfig),
}

/// What a JSON value is, for messages: `an array`, `the number 3`, `the string "x"`, `null`, …
fn json_kind(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::Bool(b) => format!("the boolean {b}"),
        serde_json::Value::Number(n) => format!("the number {n}"),
        serde_json::Value::String(s) => format!("the string {s:?}"),
        serde_json::Value::Array(_) => "an array".into(),
        serde_json::Value::Object(_) => "an object".into(),
    }
}

impl AuxConfig {
    /// Parses a `config.json` text; `path` is only used in error messages.
    ///
    /// Detects the architecture from `model_type` and validates the sizes.
    pub fn from_json_str(text: &str, path: &Path) -> Result<Self, AuxError> {
        let json_err = |source| AuxError::Json {
            path: path.to_path_buf(),
            source,
        };
        let invalid = |reason: String| AuxError::InvalidConfig {
            path: path.to_path_buf(),
            reason,
        };
        let value: serde_json::Value = serde_json::from_str(text).map_err(json_err)?;
        let Some(object) = value.as_object() else {
            return Err(invalid(format!(
                "the config must be a JSON object of settings; it is {}",
                json_kind(&value)
            )));
        };
        let model_type = match object.get("model_type") {
            Some(serde_json::Value::String(name)) => name.clone(),
            Some(other) => {
                return Err(invalid(format!(
                    "field `model_type` must be a string naming the architecture ({}); it is {}",
                    SUPPORTED_MODEL_TYPES,
                    json_kind(other)
                )))
            }
            None => {
                return Err(invalid(format!(
                    "no field `model_type`: it names the architecture ({SUPPORTED_MODEL_TYPES})"
                )))
            }
        };
        // Typed errors name the field (`n_layer: invalid type: floating point `2.5`, expected
        // usize`), not only a line and column.
        fn typed<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
            let mut deserializer = serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
                match e.path().to_string().as_str() {
                    // A missing field is reported at the top level; the message names it.
                    "." => e.inner().to_string(),
                    field => format!("field `{field}`: {}", e.inner()),
                }
            })
        }
        let config = match model_type.as_str() {
            "gpt2" => AuxConfig::Gpt2(typed(text).map_err(invalid)?),
            "opt" => AuxConfig::Opt(typed(text).map_err(invalid)?),
            other => {
                return Err(AuxError::UnknownArchitecture {
                    path: path.to_path_buf(),
                    model_type: other.to_string(),
                    supported: SUPPORTED_MODEL_TYPES,
                })
            }
        };
        config.validate(path)?;
        Ok(config)
    }

    /// [`min_parameter_count`] of this config.
    pub fn min_parameter_count(&self) -> Option<u64> {
        match self {
            AuxConfig::Gpt2(c) => {
                min_parameter_count(c.vocab_size, c.n_embd, c.n_embd, c.n_layer, c.d_ff())
            }
            AuxConfig::Opt(c) => min_parameter_count(
                c.vocab_size,
                c.d_embed(),
                c.hidden_size,
                c.num_hidden_layers,
                c.ffn_dim,
            ),
        }
    }

    /// Reads and parses `path` (a `config.json`).
    pub fn from_file(path: &Path) -> Result<Self, AuxError> {
        let text = read_text(path, "model config")?;
        Self::from_json_str(&text, path)
    }

    pub(crate) fn validate(&self, path: &Path) -> Result<(), AuxError> {
        let invalid = |reason: String| AuxError::InvalidConfig {
            path: path.to_path_buf(),
            reason,
        };
        let (d_model, n_heads, n_layers, vocab, positions, activation, expected_act) = match self {
            AuxConfig::Gpt2(c) => (
                c.n_embd,
                c.n_head,
                c.n_layer,
                c.vocab_size,
                c.n_positions,
                &c.activation_function,
                "gelu_new",
            ),
            AuxConfig::Opt(c) => (
                c.hidden_size,
                c.num_attention_heads,
                c.num_hidden_layers,
                c.vocab_size,
                c.max_position_embeddings,
                &c.activation_function,
                "relu",
            ),
        };
        if d_model == 0 || n_heads == 0 || vocab == 0 || positions == 0 {
            return Err(invalid(format!(
                "sizes must be positive (d_model {d_model}, n_heads {n_heads}, vocab {vocab}, positions {positions})"
            )));
        }
        if !d_model.is_multiple_of(n_heads) {
            return Err(invalid(format!(
                "d_model {d_model} is not divisible by n_heads {n_heads}"
            )));
        }
        if n_layers == 0 {
            return Err(invalid("n_layers must be positive".to_string()));
        }
        match self {
            AuxConfig::Gpt2(c) => {
                check_positive_finite("layer_norm_epsilon", c.layer_norm_epsilon)
                    .map_err(invalid)?;
                if c.n_inner.is_none() && c.n_embd.checked_mul(4).is_none() {
                    return Err(invalid(format!(
                        "4 * n_embd overflows (n_embd {})",
                        c.n_embd
                    )));
                }
                if c.n_inner == Some(0) {
                    return Err(invalid("n_inner must be positive".to_string()));
                }
                if c.n_embd.checked_mul(3).is_none() {
                    return Err(invalid(format!(
                        "3 * n_embd overflows (n_embd {})",
                        c.n_embd
                    )));
                }
            }
            AuxConfig::Opt(c) => {
                if c.ffn_dim == 0 || c.word_embed_proj_dim == Some(0) {
                    return Err(invalid(format!(
                        "ffn_dim ({}) and word_embed_proj_dim ({:?}) must be positive",
                        c.ffn_dim, c.word_embed_proj_dim
                    )));
                }
                if c.max_position_embeddings
                    .checked_add(OPT_POSITION_OFFSET)
                    .is_none()
                {
                    return Err(invalid(format!(
                        "max_position_embeddings + {OPT_POSITION_OFFSET} overflows (max_position_embeddings {})",
                        c.max_position_embeddings
                    )));
                }
            }
        }
        if self.min_parameter_count().is_none() {
            return Err(invalid(format!(
                "sizes overflow a 64-bit parameter count (vocab {vocab}, d_model {d_model}, n_layers {n_layers})"
            )));
        }
        let unsupported = match self {
            AuxConfig::Gpt2(c) if !c.scale_attn_weights => Some("scale_attn_weights = false"),
            AuxConfig::Gpt2(c) if c.scale_attn_by_inverse_layer_idx => {
                Some("scale_attn_by_inverse_layer_idx = true")
            }
            AuxConfig::Gpt2(Gpt2Config {
                tie_word_embeddings: false,
                ..
            })
            | AuxConfig::Opt(OptConfig {
                tie_word_embeddings: false,
                ..
            }) => Some("tie_word_embeddings = false (untied LM head)"),
            _ => None,
        };
        if let Some(option) = unsupported {
            return Err(invalid(format!("{option} is not implemented")));
        }
        if activation != expected_act {
            return Err(invalid(format!(
                "activation_function {activation:?} is not implemented (expected {expected_act:?})"
            )));
        }
        Ok(())
    }
}

/// Reads a UTF-8 file, mapping a missing file to [`AuxError::MissingFile`].
pub(crate) fn read_text(path: &Path, what: &'static str) -> Result<String, AuxError> {
    std::fs::read_to_string(path).map_err(|source| io_error(path, what, source))
}

/// Reads a UTF-8 file of at most `max_bytes` bytes, whatever kind of file it is
/// ([`tint_assets::text_file::read_text_limited`], its error mapped to this crate's).
///
/// # Errors
/// [`AuxError::MissingFile`], and [`AuxError::Io`] naming the file for a read error, text that is
/// not UTF-8, or more than `max_bytes` bytes (with `what` and the limit).
pub fn read_text_limited(
    path: &Path,
    what: &'static str,
    max_bytes: u64,
) -> Result<String, AuxError> {
    tint_assets::text_file::read_text_limited(path, what, max_bytes)
        .map_err(|e| io_error(&e.path, e.what, e.source))
}

/// Maps an IO error to [`AuxError::MissingFile`] (not found) or [`AuxError::Io`].
pub(crate) fn io_error(path: &Path, what: &'static str, source: std::io::Error) -> AuxError {
    if source.kind() == std::io::ErrorKind::NotFound {
        AuxError::MissingFile {
            path: path.to_path_buf(),
            what,
        }
    } else {
        AuxError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

fn default_ln_eps() -> f64 {
    1e-5
}

fn default_true() -> bool {
    true
}

fn default_gelu_new() -> String {
    "gelu_new".to_string()
}

fn default_relu() -> String {
    "relu".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_gpt2_and_opt() {
        let gpt2 = r#"{"model_type":"gpt2","n_embd":32,"n_layer":2,"n_head":4,"n_positions":64,"vocab_size":100}"#;
        let parsed = AuxConfig::from_json_str(gpt2, Path::new("c.json")).unwrap();
        let AuxConfig::Gpt2(c) = parsed else {
            panic!("expected gpt2, got {parsed:?}")
        };
        assert_eq!(c.d_ff(), 128);
        assert_eq!(c.activation_function, "gelu_new");

        let opt = r#"{"model_type":"opt","hidden_size":32,"num_hidden_layers":2,"ffn_dim":64,
            "num_attention_heads":4,"max_position_embeddings":64,"vocab_size":100,
            "do_layer_norm_before":false,"word_embed_proj_dim":16}"#;
        let parsed = AuxConfig::from_json_str(opt, Path::new("c.json")).unwrap();
        let AuxConfig::Opt(c) = parsed else {
            panic!("expected opt, got {parsed:?}")
        };
        assert!(c.has_projections());
        assert!(!c.has_final_layer_norm());
    }

    #[test]
    fn unknown_architecture_is_a_typed_error() {
        let text = r#"{"model_type":"bert","hidden_size":32}"#;
        let err = AuxConfig::from_json_str(text, Path::new("x/config.json")).unwrap_err();
        assert!(
            matches!(&err, AuxError::UnknownArchitecture { model_type, .. } if model_type == "bert"),
            "{err}"
        );
        // Issue 66: a config without `model_type`, or not an object, says so instead of naming
        // an architecture `""`; a value of the wrong type names its field.
        for (text, expected) in [
            ("{}", "no field `model_type`"),
            (
                "[1, 2]",
                "must be a JSON object of settings; it is an array",
            ),
            (
                r#"{"model_type": 2}"#,
                "field `model_type` must be a string",
            ),
            (
                r#"{"model_type":"gpt2","n_embd":32,"n_layer":2.5,"n_head":4,"n_positions":64,"vocab_size":100}"#,
                "field `n_layer`: invalid type: floating point `2.5`",
            ),
        ] {
            let err = AuxConfig::from_json_str(text, Path::new("x/config.json")).unwrap_err();
            let message = err.to_string();
            assert!(
                matches!(err, AuxError::InvalidConfig { .. })
                    && message.contains(expected)
                    && message.contains("x/config.json"),
                "{text}: {message}"
            );
        }
    }

    #[test]
    fn invalid_sizes_and_activation_are_rejected() {
        let heads = r#"{"model_type":"gpt2","n_embd":30,"n_layer":2,"n_head":4,"n_positions":64,"vocab_size":100}"#;
        let err = AuxConfig::from_json_str(heads, Path::new("c.json")).unwrap_err();
        assert!(matches!(err, AuxError::InvalidConfig { .. }), "{err}");
        let act = r#"{"model_type":"gpt2","n_embd":32,"n_layer":2,"n_head":4,"n_positions":64,"vocab_size":100,"activation_function":"relu"}"#;
        let err = AuxConfig::from_json_str(act, Path::new("c.json")).unwrap_err();
        assert!(matches!(err, AuxError::InvalidConfig { .. }), "{err}");
        let untied = r#"{"model_type":"opt","hidden_size":32,"num_hidden_layers":2,"ffn_dim":64,
            "num_attention_heads":4,"max_position_embeddings":64,"vocab_size":100,"tie_word_embeddings":false}"#;
        let err = AuxConfig::from_json_str(untied, Path::new("c.json")).unwrap_err();
        assert!(matches!(err, AuxError::InvalidConfig { .. }), "{err}");
        let missing = r#"{"model_type":"gpt2","n_embd":32}"#;
        let err = AuxConfig::from_json_str(missing, Path::new("c.json")).unwrap_err();
        assert!(
            matches!(err, AuxError::InvalidConfig { .. })
                && err.to_string().contains("missing field `n_layer`"),
            "{err}"
        );
    }
}
