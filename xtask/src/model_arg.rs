//! The `--model` argument: a checkpoint directory, a `.gguf` file, or the name of a fetched asset.

use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{Context, Result};
use burn::tensor::backend::Backend;
use tint_aux::AuxModel;

/// Where an auxiliary model comes from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ModelArg {
    /// A HF-style directory with `config.json` + `model.safetensors`.
    Dir(PathBuf),
    /// A GGUF file (LLaMA family).
    Gguf(PathBuf),
    /// SmolLM2-135M-Instruct, fetched on demand (`cargo xtask fetch smollm2`).
    SmolLm2,
}

impl FromStr for ModelArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "smollm2" | "smollm2-135m" => ModelArg::SmolLm2,
            _ if s.ends_with(".gguf") => ModelArg::Gguf(PathBuf::from(s)),
            _ => ModelArg::Dir(PathBuf::from(s)),
        })
    }
}

impl std::fmt::Display for ModelArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelArg::Dir(p) | ModelArg::Gguf(p) => write!(f, "{}", p.display()),
            ModelArg::SmolLm2 => write!(f, "smollm2"),
        }
    }
}

/// Loads the auxiliary model named by `arg`, fetching the asset first when needed.
pub(crate) fn load_aux<B: Backend>(arg: &ModelArg, device: &B::Device) -> Result<AuxModel<B>> {
    match arg {
        ModelArg::Dir(dir) => tint_aux::load_model(dir, device)
            .with_context(|| format!("loading model from {}", dir.display())),
        ModelArg::Gguf(path) => load_gguf(path, device),
        ModelArg::SmolLm2 => {
            let path = crate::fetch::smollm2_gguf()?;
            load_gguf(&path, device)
        }
    }
}

fn load_gguf<B: Backend>(path: &std::path::Path, device: &B::Device) -> Result<AuxModel<B>> {
    tint_aux::load_gguf_model(path, device)
        .with_context(|| format!("loading GGUF model {}", path.display()))
}

/// Loads the tokenizer that belongs to the model named by `arg`.
pub(crate) fn load_tokenizer(arg: &ModelArg) -> Result<tint_aux::tokenizer::AuxTokenizer> {
    match arg {
        ModelArg::Dir(dir) => tint_aux::tokenizer::AuxTokenizer::from_dir(dir)
            .with_context(|| format!("loading the tokenizer of {}", dir.display())),
        ModelArg::Gguf(path) => gguf_tokenizer(path),
        ModelArg::SmolLm2 => gguf_tokenizer(&crate::fetch::smollm2_gguf()?),
    }
}

fn gguf_tokenizer(path: &std::path::Path) -> Result<tint_aux::tokenizer::AuxTokenizer> {
    tint_aux::gguf_tokenizer(path)
        .with_context(|| format!("reading the tokenizer of {}", path.display()))
}
