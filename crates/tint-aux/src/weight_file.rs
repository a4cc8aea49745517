//! The file a model's weights were read from, and the name each of our parameters has in it, so that
//! an error names a weight as the file does (`transformer.ln_f.bias`, `blk.0.ffn_gate.weight`), not
//! by our module path (`ln_f.beta`, `blocks.0.mlp.gate.weight`).
//!
//! The mapping is the inverse of the loaders' tables (`gpt2/loader.rs`, `opt/loader.rs`,
//! `llama/loader.rs`); a test loads each tiny checkpoint and checks that every parameter maps to a
//! tensor of its file.

use std::path::{Path, PathBuf};

/// How a file names the tensors of one architecture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TensorNaming {
    /// Built in memory (random weights, tests): our parameter paths are the only names.
    #[default]
    Ours,
    /// An HF GPT-2 safetensors file; `prefix` is `transformer.` or empty.
    Gpt2 {
        /// What every key starts with.
        prefix: String,
    },
    /// An HF OPT safetensors file; `prefix` is `model.decoder.` or `decoder.`.
    Opt {
        /// What every decoder key starts with.
        prefix: String,
    },
    /// An HF `LlamaForCausalLM` safetensors file.
    LlamaHf,
    /// A llama.cpp GGUF file.
    LlamaGguf,
}

/// Where a model's weights came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeightFile {
    /// The weights file; `None` for a model built in memory.
    pub path: Option<PathBuf>,
    /// How that file names its tensors.
    pub naming: TensorNaming,
}

/// One parameter as its file holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileTensor {
    /// The tensor's key in the file.
    pub name: String,
    /// Which part of that tensor the parameter is, when it is not all of it (GPT-2's fused
    /// `c_attn` holds query, key and value side by side).
    pub part: Option<&'static str>,
}

impl WeightFile {
    /// A model read from `path`, named as `naming` says.
    pub fn new(path: &Path, naming: TensorNaming) -> Self {
        WeightFile {
            path: Some(path.to_path_buf()),
            naming,
        }
    }

    /// The file's tensor for our parameter path `ours` (e.g. `blocks.1.fc.weight`), or `None` when
    /// the model was built in memory or the path is not one of the architecture's parameters.
    pub fn tensor_of(&self, ours: &str) -> Option<FileTensor> {
        let whole = |name: String| Some(FileTensor { name, part: None });
        match &self.naming {
            TensorNaming::Ours => None,
            TensorNaming::Gpt2 { prefix } => gpt2_tensor(prefix, ours),
            TensorNaming::Opt { prefix } => opt_tensor(prefix, ours).and_then(whole),
            TensorNaming::LlamaHf => llama_hf_name(ours).and_then(whole),
            TensorNaming::LlamaGguf => llama_hf_name(ours)
                .map(|hf| crate::llama::gguf_name(&hf))
                .and_then(whole),
        }
    }

    /// `ours` in words for an error: the file's tensor and the file (`` `transformer.ln_f.bias` in
    /// /m/model.safetensors ``), or our path when the file has no name for it.
    pub fn describe(&self, ours: &str) -> String {
        match (self.tensor_of(ours), &self.path) {
            (Some(tensor), Some(path)) => {
                let part = tensor.part.map(|p| format!(" ({p})")).unwrap_or_default();
                format!("`{}`{part} in {}", tensor.name, path.display())
            }
            _ => ours.to_string(),
        }
    }
}

/// Splits `blocks.N.rest` into `(N, rest)`.
fn block_path(ours: &str) -> Option<(usize, &str)> {
    let rest = ours.strip_prefix("blocks.")?;
    let (layer, rest) = rest.split_once('.')?;
    Some((layer.parse().ok()?, rest))
}

/// `gamma`/`beta` of a LayerNorm are the file's `weight`/`bias`; a linear's names are the same.
fn norm_leaf(leaf: &str) -> Option<&'static str> {
    match leaf {
        "gamma" => Some("weight"),
        "beta" => Some("bias"),
        _ => None,
    }
}

fn linear_leaf(leaf: &str) -> Option<&'static str> {
    match leaf {
        "weight" => Some("weight"),
        "bias" => Some("bias"),
        _ => None,
    }
}

fn gpt2_tensor(prefix: &str, ours: &str) -> Option<FileTensor> {
    let whole = |name: String| FileTensor { name, part: None };
    match ours {
        "wte" | "wpe" => return Some(whole(format!("{prefix}{ours}.weight"))),
        _ => {}
    }
    if let Some(leaf) = ours.strip_prefix("ln_f.") {
        return Some(whole(format!("{prefix}ln_f.{}", norm_leaf(leaf)?)));
    }
    let (layer, rest) = block_path(ours)?;
    let (module, leaf) = rest.rsplit_once('.')?;
    let h = format!("{prefix}h.{layer}");
    let fused = |part: &'static str| {
        Some(FileTensor {
            name: format!("{h}.attn.c_attn.{}", linear_leaf(leaf)?),
            part: Some(part),
        })
    };
    let file_module = match module {
        "ln1" => return Some(whole(format!("{h}.ln_1.{}", norm_leaf(leaf)?))),
        "ln2" => return Some(whole(format!("{h}.ln_2.{}", norm_leaf(leaf)?))),
        "attn.query" => return fused("the query's third, the first"),
        "attn.key" => return fused("the key's third, the second"),
        "attn.value" => return fused("the value's third, the last"),
        "attn.output" => "attn.c_proj",
        "fc" => "mlp.c_fc",
        "proj" => "mlp.c_proj",
        _ => return None,
    };
    Some(whole(format!("{h}.{file_module}.{}", linear_leaf(leaf)?)))
}

fn opt_tensor(prefix: &str, ours: &str) -> Option<String> {
    match ours {
        "wte" => return Some(format!("{prefix}embed_tokens.weight")),
        "wpe" => return Some(format!("{prefix}embed_positions.weight")),
        _ => {}
    }
    if let Some(leaf) = ours.strip_prefix("ln_f.") {
        return Some(format!("{prefix}final_layer_norm.{}", norm_leaf(leaf)?));
    }
    for projection in ["project_in", "project_out"] {
        if let Some(leaf) = ours
            .strip_prefix(projection)
            .and_then(|r| r.strip_prefix('.'))
        {
            return Some(format!("{prefix}{projection}.{}", linear_leaf(leaf)?));
        }
    }
    let (layer, rest) = block_path(ours)?;
    let (module, leaf) = rest.rsplit_once('.')?;
    let p = format!("{prefix}layers.{layer}");
    let (file_module, leaf) = match module {
        "ln1" => ("self_attn_layer_norm", norm_leaf(leaf)?),
        "ln2" => ("final_layer_norm", norm_leaf(leaf)?),
        "attn.query" => ("self_attn.q_proj", linear_leaf(leaf)?),
        "attn.key" => ("self_attn.k_proj", linear_leaf(leaf)?),
        "attn.value" => ("self_attn.v_proj", linear_leaf(leaf)?),
        "attn.output" => ("self_attn.out_proj", linear_leaf(leaf)?),
        "fc" => ("fc1", linear_leaf(leaf)?),
        "proj" => ("fc2", linear_leaf(leaf)?),
        _ => return None,
    };
    Some(format!("{p}.{file_module}.{leaf}"))
}

/// The HF `LlamaForCausalLM` key of our LLaMA parameter path.
fn llama_hf_name(ours: &str) -> Option<String> {
    match ours {
        "embedding.weight" => return Some("model.embed_tokens.weight".into()),
        "final_norm.weight" => return Some("model.norm.weight".into()),
        "lm_head.weight" => return Some("lm_head.weight".into()),
        _ => {}
    }
    let (layer, rest) = block_path(ours)?;
    let hf = match rest {
        "attn_norm.weight" => "input_layernorm.weight",
        "mlp_norm.weight" => "post_attention_layernorm.weight",
        "attention.query.weight" => "self_attn.q_proj.weight",
        "attention.key.weight" => "self_attn.k_proj.weight",
        "attention.value.weight" => "self_attn.v_proj.weight",
        "attention.output.weight" => "self_attn.o_proj.weight",
        "mlp.gate.weight" => "mlp.gate_proj.weight",
        "mlp.up.weight" => "mlp.up_proj.weight",
        "mlp.down.weight" => "mlp.down_proj.weight",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_each_files_convention() {
        let gpt2 = WeightFile::new(
            Path::new("/m/model.safetensors"),
            TensorNaming::Gpt2 {
                prefix: "transformer.".into(),
            },
        );
        assert_eq!(
            gpt2.describe("ln_f.beta"),
            "`transformer.ln_f.bias` in /m/model.safetensors"
        );
        assert_eq!(
            gpt2.describe("blocks.1.attn.key.bias"),
            "`transformer.h.1.attn.c_attn.bias` (the key's third, the second) in /m/model.safetensors"
        );
        let gguf = WeightFile::new(Path::new("/m/s.gguf"), TensorNaming::LlamaGguf);
        assert_eq!(
            gguf.describe("blocks.0.mlp.gate.weight"),
            "`blk.0.ffn_gate.weight` in /m/s.gguf"
        );
        let opt = WeightFile::new(
            Path::new("o.safetensors"),
            TensorNaming::Opt {
                prefix: "model.decoder.".into(),
            },
        );
        assert_eq!(
            opt.tensor_of("blocks.2.ln2.gamma").unwrap().name,
            "model.decoder.layers.2.final_layer_norm.weight"
        );
        // In memory, or a path the architecture does not have: our name as it is.
        assert_eq!(WeightFile::default().describe("ln_f.beta"), "ln_f.beta");
        assert_eq!(gpt2.describe("blocks.x.fc.weight"), "blocks.x.fc.weight");
        assert_eq!(gpt2.tensor_of("blocks.0.ln1.weight"), None);
    }
}
