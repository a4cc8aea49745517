//! Loading a [`LlamaModel`] from an HF `LlamaForCausalLM` directory or from a GGUF file, and random init.
//!
//! | HF name (`model.safetensors`)                  | GGUF name                 | ours                            |
//! |------------------------------------------------|---------------------------|---------------------------------|
//! | `model.embed_tokens.weight` `[vocab, d]`       | `token_embd.weight`       | `embedding.weight`              |
//! | `model.layers.N.input_layernorm.weight`        | `blk.N.attn_norm.weight`  | `blocks[N].attn_norm.weight`    |
//! | `model.layers.N.self_attn.q_proj.weight`       | `blk.N.attn_q.weight` (*) | `blocks[N].attention.query`     |
//! | `model.layers.N.self_attn.k_proj.weight`       | `blk.N.attn_k.weight` (*) | `blocks[N].attention.key`       |
//! | `model.layers.N.self_attn.v_proj.weight`       | `blk.N.attn_v.weight`     | `blocks[N].attention.value`     |
//! | `model.layers.N.self_attn.o_proj.weight`       | `blk.N.attn_output.weight`| `blocks[N].attention.output`    |
//! | `model.layers.N.post_attention_layernorm.weight`| `blk.N.ffn_norm.weight`  | `blocks[N].mlp_norm.weight`     |
//! | `model.layers.N.mlp.{gate,up,down}_proj.weight`| `blk.N.ffn_{gate,up,down}.weight` | `blocks[N].mlp.{gate,up,down}` |
//! | `model.norm.weight`                            | `output_norm.weight`      | `final_norm.weight`             |
//! | `lm_head.weight` (absent when tied)            | `output.weight` (absent when tied) | `lm_head`              |
//!
//! HF and GGUF matrices are `[d_output, d_input]` row-major (GGUF dims `[d_input, d_output]` innermost-first);
//! every linear weight is transposed to burn's `[d_input, d_output]`.
//! (*) llama.cpp's `convert_hf_to_gguf.py` permutes the rows of `W_q`/`W_k` within each head from HF's
//! half-split rotary layout to llama.cpp's adjacent-pair layout; [`unpermute_rotary_rows`] undoes it, exactly
//! as transformers' GGUF loader does, so the model computes HF's function.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use burn::module::Param;
use burn::nn::{Embedding, Linear};
use burn::tensor::{backend::Backend, Distribution, Tensor, TensorData};

use super::block::LlamaBlock;
use super::config::{HfLlamaConfig, LlamaConfig};
use super::mlp::SwiGluMlp;
use super::model::LlamaModel;
use super::rms_norm::RmsNorm;
use crate::attention::CausalSelfAttention;
use crate::checkpoint::{
    check_parameter_budget, linear, read_checkpoint_bytes, row_major_transpose, unused_error,
    Checkpoint,
};
use crate::gguf::{GgufError, GgufFile, GgufTokenizer};
use crate::size_fields::{llama_size_fields, name_size_fields};
use crate::weight_file::{TensorNaming, WeightFile};
use crate::AuxError;

/// Undoes llama.cpp's rotary row permutation of a `[n_heads · head_dim, cols]` row-major matrix.
///
/// Within each head, GGUF row `2i + j` (`i < head_dim/2`, `j ∈ {0, 1}`) is HF row `j · head_dim/2 + i`.
pub fn unpermute_rotary_rows(data: &[f32], n_heads: usize, cols: usize) -> Vec<f32> {
    let rows = data.len() / cols;
    let half = rows / n_heads / 2;
    let mut out = vec![0f32; data.len()];
    for h in 0..n_heads {
        for i in 0..half {
            for j in 0..2 {
                let from = h * 2 * half + 2 * i + j;
                let to = h * 2 * half + j * half + i;
                out[to * cols..(to + 1) * cols]
                    .copy_from_slice(&data[from * cols..(from + 1) * cols]);
            }
        }
    }
    out
}

/// llama.cpp's rotary row permutation (HF → GGUF), the inverse of [`unpermute_rotary_rows`].
pub fn permute_rotary_rows(data: &[f32], n_heads: usize, cols: usize) -> Vec<f32> {
    let rows = data.len() / cols;
    let half = rows / n_heads / 2;
    let mut out = vec![0f32; data.len()];
    for h in 0..n_heads {
        for i in 0..half {
            for j in 0..2 {
                let to = h * 2 * half + 2 * i + j;
                let from = h * 2 * half + j * half + i;
                out[to * cols..(to + 1) * cols]
                    .copy_from_slice(&data[from * cols..(from + 1) * cols]);
            }
        }
    }
    out
}

/// Where the weights come from; names are HF names, shapes HF's (`[d_output, d_input]` for linears).
trait WeightSource {
    fn tensor<B: Backend, const D: usize>(
        &self,
        hf_name: &str,
        shape: [usize; D],
        device: &B::Device,
    ) -> Result<Tensor<B, D>, AuxError>;

    /// Checked before anything is built: the source can hold a model of `needed` parameters (`None`:
    /// the count overflows).
    fn check_budget(&self, needed: Option<u64>) -> Result<(), AuxError>;

    /// Checked after the model is built: every tensor of the source was read.
    fn check_all_used(&self) -> Result<(), AuxError>;

    /// The file the tensors come from and its naming.
    fn weight_file(&self) -> WeightFile;
}

/// Most parameters [`LlamaConfig::init`] builds (2³² values, 16 GiB of float32): random weights have no
/// file to bound their size.
pub(super) const MAX_RANDOM_INIT_PARAMETERS: u64 = 1 << 32;

/// HF LLaMA checkpoint tensors that are buffers, not weights (older exports store them).
fn hf_ignorable(name: &str) -> bool {
    name.ends_with(".rotary_emb.inv_freq")
}

impl WeightSource for Checkpoint<'_> {
    fn tensor<B: Backend, const D: usize>(
        &self,
        hf_name: &str,
        shape: [usize; D],
        device: &B::Device,
    ) -> Result<Tensor<B, D>, AuxError> {
        Checkpoint::tensor(self, hf_name, shape, device)
    }

    fn check_budget(&self, needed: Option<u64>) -> Result<(), AuxError> {
        check_parameter_budget(self.path(), needed, self.total_elements())
    }

    fn check_all_used(&self) -> Result<(), AuxError> {
        Checkpoint::check_all_used(self, &hf_ignorable)
    }

    fn weight_file(&self) -> WeightFile {
        WeightFile::new(self.path(), TensorNaming::LlamaHf)
    }
}

struct GgufSource<'a> {
    file: &'a GgufFile,
    path: PathBuf,
    n_heads: usize,
    n_kv_heads: usize,
    used: Mutex<BTreeSet<String>>,
}

pub(crate) fn gguf_name(hf_name: &str) -> String {
    let fixed = match hf_name {
        "model.embed_tokens.weight" => Some("token_embd.weight"),
        "model.norm.weight" => Some("output_norm.weight"),
        "lm_head.weight" => Some("output.weight"),
        _ => None,
    };
    if let Some(name) = fixed {
        return name.to_string();
    }
    let rest = hf_name.strip_prefix("model.layers.").unwrap_or(hf_name);
    let (layer, rest) = rest.split_once('.').unwrap_or(("", rest));
    let part = match rest {
        "input_layernorm.weight" => "attn_norm.weight",
        "post_attention_layernorm.weight" => "ffn_norm.weight",
        "self_attn.q_proj.weight" => "attn_q.weight",
        "self_attn.k_proj.weight" => "attn_k.weight",
        "self_attn.v_proj.weight" => "attn_v.weight",
        "self_attn.o_proj.weight" => "attn_output.weight",
        "mlp.gate_proj.weight" => "ffn_gate.weight",
        "mlp.up_proj.weight" => "ffn_up.weight",
        "mlp.down_proj.weight" => "ffn_down.weight",
        other => other,
    };
    format!("blk.{layer}.{part}")
}

impl WeightSource for GgufSource<'_> {
    fn tensor<B: Backend, const D: usize>(
        &self,
        hf_name: &str,
        shape: [usize; D],
        device: &B::Device,
    ) -> Result<Tensor<B, D>, AuxError> {
        let name = gguf_name(hf_name);
        let missing = |error| match error {
            GgufError::MissingTensor { tensor } => AuxError::MissingTensor {
                path: self.path.clone(),
                tensor,
            },
            other => AuxError::from(other),
        };
        let info = self.file.tensor_info(&name).map_err(missing)?;
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone());
        // The shape is checked on the tensor info, before anything is dequantised.
        if info.shape() != shape {
            return Err(AuxError::TensorShape {
                path: self.path.clone(),
                tensor: name,
                expected: shape.to_vec(),
                found: info.shape(),
                set_by: "".into(),
            });
        }
        let tensor = self.file.tensor_f32(&name).map_err(missing)?;
        let data = if name.ends_with("attn_q.weight") {
            unpermute_rotary_rows(&tensor.data, self.n_heads, shape[D - 1])
        } else if name.ends_with("attn_k.weight") {
            unpermute_rotary_rows(&tensor.data, self.n_kv_heads, shape[D - 1])
        } else {
            tensor.data
        };
        Ok(Tensor::from_data(TensorData::new(data, shape), device))
    }

    fn check_budget(&self, needed: Option<u64>) -> Result<(), AuxError> {
        let available = self
            .file
            .tensors
            .iter()
            .map(|t| t.n_elements())
            .fold(0u64, u64::saturating_add);
        check_parameter_budget(&self.path, needed, available)
    }

    fn check_all_used(&self) -> Result<(), AuxError> {
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let mut unused: Vec<String> = self
            .file
            .tensors
            .iter()
            .filter(|t| !used.contains(&t.name))
            .map(|t| t.name.clone())
            .collect();
        unused.sort();
        unused_error(&self.path, unused)
    }

    fn weight_file(&self) -> WeightFile {
        WeightFile::new(&self.path, TensorNaming::LlamaGguf)
    }
}

fn hf_linear<B: Backend, W: WeightSource>(
    weights: &W,
    name: &str,
    d_input: usize,
    d_output: usize,
    device: &B::Device,
) -> Result<Linear<B>, AuxError> {
    let weight: Tensor<B, 2> = weights.tensor(name, [d_output, d_input], device)?;
    Ok(linear(row_major_transpose(weight), None))
}

fn assemble<B: Backend, W: WeightSource>(
    config: &LlamaConfig,
    weights: &W,
    device: &B::Device,
) -> Result<LlamaModel<B>, AuxError> {
    weights.check_budget(config.min_parameter_count())?;
    let model = assemble_unchecked(config, weights, device).map_err(|e| {
        name_size_fields(e, &llama_size_fields(config, &weights.weight_file().naming))
    })?;
    weights.check_all_used()?;
    Ok(model)
}

fn assemble_unchecked<B: Backend, W: WeightSource>(
    config: &LlamaConfig,
    weights: &W,
    device: &B::Device,
) -> Result<LlamaModel<B>, AuxError> {
    let (d, hd) = (config.d_model, config.head_dim());
    let norm = |name: &str| -> Result<RmsNorm<B>, AuxError> {
        Ok(RmsNorm::new(
            weights.tensor(name, [d], device)?,
            config.rms_norm_eps,
        ))
    };
    let embedding_weight =
        weights.tensor("model.embed_tokens.weight", [config.vocab_size, d], device)?;
    let mut blocks = Vec::with_capacity(config.n_layers);
    for layer in 0..config.n_layers {
        let p = format!("model.layers.{layer}");
        let lin = |name: &str, d_in: usize, d_out: usize| {
            hf_linear::<B, W>(weights, &format!("{p}.{name}.weight"), d_in, d_out, device)
        };
        blocks.push(LlamaBlock {
            attn_norm: norm(&format!("{p}.input_layernorm.weight"))?,
            attention: CausalSelfAttention {
                query: lin("self_attn.q_proj", d, config.n_heads * hd)?,
                key: lin("self_attn.k_proj", d, config.n_kv_heads * hd)?,
                value: lin("self_attn.v_proj", d, config.n_kv_heads * hd)?,
                output: lin("self_attn.o_proj", config.n_heads * hd, d)?,
                n_heads: config.n_heads,
                n_kv_heads: config.n_kv_heads,
                head_dim: hd,
            },
            mlp_norm: norm(&format!("{p}.post_attention_layernorm.weight"))?,
            mlp: SwiGluMlp {
                gate: lin("mlp.gate_proj", d, config.d_ff)?,
                up: lin("mlp.up_proj", d, config.d_ff)?,
                down: lin("mlp.down_proj", config.d_ff, d)?,
            },
        });
    }
    let lm_head = if config.tie_word_embeddings {
        None
    } else {
        Some(hf_linear(
            weights,
            "lm_head.weight",
            d,
            config.vocab_size,
            device,
        )?)
    };
    Ok(LlamaModel {
        embedding: Embedding {
            weight: Param::from_tensor(embedding_weight),
        },
        blocks,
        final_norm: norm("model.norm.weight")?,
        lm_head,
        rope_theta: config.rope_theta,
        max_positions: config.max_positions,
        weight_file: weights.weight_file(),
    })
}

/// Reads and converts the `config.json` of an HF `LlamaForCausalLM` directory.
///
/// # Errors
/// [`AuxError::MissingFile`], [`AuxError::Io`], [`AuxError::Json`], [`AuxError::InvalidConfig`].
pub fn read_hf_config(dir: &Path) -> Result<LlamaConfig, AuxError> {
    let path = dir.join("config.json");
    if !path.is_file() {
        return Err(AuxError::MissingFile {
            path,
            what: "model config",
        });
    }
    let text = std::fs::read_to_string(&path).map_err(|source| AuxError::Io {
        path: path.clone(),
        source,
    })?;
    let hf: HfLlamaConfig = serde_json::from_str(&text).map_err(|source| AuxError::Json {
        path: path.clone(),
        source,
    })?;
    hf.to_config(&path)
}

/// Loads an HF `LlamaForCausalLM` directory (`config.json` + `model.safetensors`).
///
/// # Errors
/// Those of [`read_hf_config`], and [`AuxError::MissingFile`], [`AuxError::Safetensors`],
/// [`AuxError::MissingTensor`], [`AuxError::TensorShape`], [`AuxError::TensorDtype`] for the weights.
pub fn load_llama_hf<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<(LlamaModel<B>, LlamaConfig), AuxError> {
    let config = read_hf_config(dir)?;
    let path = dir.join("model.safetensors");
    if !path.is_file() {
        return Err(AuxError::MissingFile {
            path,
            what: "model weights (safetensors)",
        });
    }
    let bytes = read_checkpoint_bytes(&path)?;
    let checkpoint = Checkpoint::parse(&path, &bytes)?;
    let model = assemble(&config, &checkpoint, device)?;
    Ok((model, config))
}

/// A LLaMA model, its config and its tokenizer, loaded from one GGUF file.
#[derive(Debug)]
pub struct LoadedGguf<B: Backend> {
    /// The model, weights dequantised to the backend's float type.
    pub model: LlamaModel<B>,
    /// Hyper-parameters from the `llama.*` metadata.
    pub config: LlamaConfig,
    /// The tokenizer from the `tokenizer.ggml.*` metadata.
    pub tokenizer: GgufTokenizer,
}

/// Loads a LLaMA-architecture GGUF file (e.g. SmolLM2-135M-Instruct.Q4_1.gguf): dequantises every tensor,
/// undoes the rotary permutation of `attn_q`/`attn_k`, builds the tokenizer.
///
/// # Errors
/// [`AuxError::Gguf`] for file-level problems, [`AuxError::InvalidConfig`], [`AuxError::MissingTensor`],
/// [`AuxError::TensorShape`].
pub fn load_llama_gguf<B: Backend>(
    path: &Path,
    device: &B::Device,
) -> Result<LoadedGguf<B>, AuxError> {
    let file = GgufFile::open(path)?;
    let config = LlamaConfig::from_gguf(&file, path)?;
    let source = GgufSource {
        file: &file,
        path: path.to_path_buf(),
        n_heads: config.n_heads,
        n_kv_heads: config.n_kv_heads,
        used: Mutex::new(BTreeSet::new()),
    };
    let model = assemble(&config, &source, device)?;
    let tokenizer = GgufTokenizer::from_gguf(&file)?;
    Ok(LoadedGguf {
        model,
        config,
        tokenizer,
    })
}

impl LlamaConfig {
    /// A model with random weights (normal, std 0.02; norms 1) for tests and simulation.
    ///
    /// # Errors
    /// [`AuxError::InvalidConfig`] if the config is inconsistent.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<LlamaModel<B>, AuxError> {
        self.validate(Path::new("<LlamaConfig>"))?;
        let source = RandomSource;
        assemble(self, &source, device)
    }
}

/// Random weights: norms are 1, everything else N(0, 0.02²).
struct RandomSource;

impl WeightSource for RandomSource {
    fn tensor<B: Backend, const D: usize>(
        &self,
        hf_name: &str,
        shape: [usize; D],
        device: &B::Device,
    ) -> Result<Tensor<B, D>, AuxError> {
        Ok(if hf_name.contains("norm") {
            Tensor::ones(shape, device)
        } else {
            Tensor::random(shape, Distribution::Normal(0.0, 0.02), device)
        })
    }

    fn check_budget(&self, needed: Option<u64>) -> Result<(), AuxError> {
        match needed {
            Some(needed) if needed <= MAX_RANDOM_INIT_PARAMETERS => Ok(()),
            _ => Err(AuxError::InvalidConfig {
                path: PathBuf::from("<LlamaConfig>"),
                reason: format!(
                    "random init of at least {} parameters is above the limit of {MAX_RANDOM_INIT_PARAMETERS}",
                    needed.map_or("2^64".to_string(), |n| n.to_string())
                ),
            }),
        }
    }

    fn check_all_used(&self) -> Result<(), AuxError> {
        Ok(())
    }

    fn weight_file(&self) -> WeightFile {
        WeightFile::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotary_permutation_round_trips_and_matches_llama_cpp() {
        // Two heads of head_dim 4, one column: rows are 0..8.
        let rows: Vec<f32> = (0..8).map(|r| r as f32).collect();
        // llama.cpp: reshape(n_head, 2, hd/2, cols).swapaxes(1, 2): per head [x0, x2, x1, x3].
        let permuted = permute_rotary_rows(&rows, 2, 1);
        assert_eq!(permuted, vec![0., 2., 1., 3., 4., 6., 5., 7.]);
        assert_eq!(unpermute_rotary_rows(&permuted, 2, 1), rows);
        // Several columns move with their row.
        let m: Vec<f32> = (0..24).map(|v| v as f32).collect(); // [8 rows, 3 cols]
        assert_eq!(
            unpermute_rotary_rows(&permute_rotary_rows(&m, 1, 3), 1, 3),
            m
        );
    }

    #[test]
    fn gguf_names_map_from_hf_names() {
        assert_eq!(
            gguf_name("model.layers.12.self_attn.o_proj.weight"),
            "blk.12.attn_output.weight"
        );
        assert_eq!(
            gguf_name("model.layers.0.post_attention_layernorm.weight"),
            "blk.0.ffn_norm.weight"
        );
        assert_eq!(
            gguf_name("model.layers.3.mlp.down_proj.weight"),
            "blk.3.ffn_down.weight"
        );
        assert_eq!(gguf_name("model.embed_tokens.weight"), "token_embd.weight");
        assert_eq!(gguf_name("lm_head.weight"), "output.weight");
    }
}
