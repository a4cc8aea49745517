//! Where the auxiliary model of a run comes from: a checkpoint directory, a `.gguf` file, or the
//! SmolLM2 asset, and the [`Assets`] that provide the offline assets (the front end fetches them on
//! demand; see docs/assets.md).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use burn::tensor::backend::Backend;
use tint_aux::tokenizer::AuxTokenizer;
use tint_aux::AuxModel;

use crate::EvalError;

/// The asset that holds the SmolLM2-135M-Instruct GGUF file.
pub const SMOLLM2_ASSET: &str = "smollm2";

/// Provides the offline assets by name: the one asset trait of every experiment (`tint-lab`).
pub use tint_lab::host::Assets;

/// Where an auxiliary model comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    /// A HF-style directory with `config.json` + `model.safetensors`.
    Dir(PathBuf),
    /// A GGUF file (LLaMA family).
    Gguf(PathBuf),
    /// SmolLM2-135M-Instruct, the [`SMOLLM2_ASSET`] (fetched on demand).
    SmolLm2,
}

impl FromStr for ModelSource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "smollm2" | "smollm2-135m" => ModelSource::SmolLm2,
            _ if s.ends_with(".gguf") => ModelSource::Gguf(PathBuf::from(s)),
            _ => ModelSource::Dir(PathBuf::from(s)),
        })
    }
}

impl std::fmt::Display for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::Dir(p) | ModelSource::Gguf(p) => write!(f, "{}", p.display()),
            ModelSource::SmolLm2 => write!(f, "smollm2"),
        }
    }
}

/// What the [`SMOLLM2_ASSET`] is, exactly: the words every result that names the model uses.
pub const SMOLLM2_IDENTITY: &str = "SmolLM2-135M-Instruct, Q4_1 GGUF dequantised to float32";

impl ModelSource {
    /// The model's exact identity for reports: for `smollm2` the checkpoint and its quantisation
    /// ([`SMOLLM2_IDENTITY`]); for a file or directory its path and format.
    pub fn identity(&self) -> String {
        match self {
            ModelSource::SmolLm2 => SMOLLM2_IDENTITY.into(),
            ModelSource::Gguf(p) => format!("{} (GGUF, dequantised to float32)", p.display()),
            ModelSource::Dir(p) => format!("{} (HF safetensors checkpoint)", p.display()),
        }
    }
}

impl serde::Serialize for ModelSource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A source with its asset resolved to a file.
enum Resolved {
    Dir(PathBuf),
    Gguf(PathBuf),
}

impl ModelSource {
    fn resolve(&self, assets: &dyn Assets) -> Result<Resolved, EvalError> {
        Ok(match self {
            ModelSource::Dir(dir) => Resolved::Dir(dir.clone()),
            ModelSource::Gguf(path) => Resolved::Gguf(path.clone()),
            ModelSource::SmolLm2 => Resolved::Gguf(assets.asset(SMOLLM2_ASSET)?),
        })
    }

    /// Loads the model.
    ///
    /// # Errors
    ///
    /// The loader's error, with the directory or file in front.
    pub fn load<B: Backend>(
        &self,
        assets: &dyn Assets,
        device: &B::Device,
    ) -> Result<AuxModel<B>, EvalError> {
        match self.resolve(assets)? {
            Resolved::Gguf(path) => tint_aux::load_gguf_model(&path, device)
                .map_err(|e| EvalError::from(e).context(loading("GGUF model", &path))),
            Resolved::Dir(dir) => tint_aux::load_model(&dir, device)
                .map_err(|e| EvalError::from(e).context(loading("model from", &dir))),
        }
    }

    /// Loads the model's tokenizer.
    ///
    /// # Errors
    ///
    /// The tokenizer's error, with the directory or file in front.
    pub fn tokenizer(&self, assets: &dyn Assets) -> Result<AuxTokenizer, EvalError> {
        match self.resolve(assets)? {
            Resolved::Gguf(path) => tint_aux::gguf_tokenizer(&path).map_err(|e| {
                EvalError::from(e).context(format!("reading the tokenizer of {}", path.display()))
            }),
            Resolved::Dir(dir) => AuxTokenizer::from_dir(&dir).map_err(|e| {
                EvalError::from(e).context(format!("loading the tokenizer of {}", dir.display()))
            }),
        }
    }

    /// The files that hold the weights (for the content hash of the resume fingerprint): the GGUF
    /// file, or every file of the directory in name order.
    ///
    /// # Errors
    ///
    /// [`EvalError::Io`] when the directory cannot be listed.
    pub fn checkpoint_files(&self, assets: &dyn Assets) -> Result<Vec<PathBuf>, EvalError> {
        let dir = match self.resolve(assets)? {
            Resolved::Gguf(path) => return Ok(vec![path]),
            Resolved::Dir(dir) => dir,
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|source| EvalError::Io {
                operation: "list",
                path: dir.clone(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        Ok(files)
    }
}

fn loading(what: &str, path: &Path) -> String {
    format!("loading {what} {}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_and_print() {
        assert_eq!("smollm2".parse(), Ok(ModelSource::SmolLm2));
        assert_eq!(
            "m/x.gguf".parse(),
            Ok(ModelSource::Gguf(PathBuf::from("m/x.gguf")))
        );
        assert_eq!("m".parse(), Ok(ModelSource::Dir(PathBuf::from("m"))));
        assert_eq!(ModelSource::SmolLm2.to_string(), "smollm2");
        assert_eq!(
            serde_json::to_value(ModelSource::Dir("a/b".into())).unwrap(),
            "a/b"
        );
    }
}
