//! Byte-level BPE tokenizers (GPT-2, OPT) loaded from local files through the `tokenizers` crate.

use std::path::{Path, PathBuf};

use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::Tokenizer;

use crate::AuxError;

/// File name of a serialized `tokenizers` tokenizer.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// File name of a GPT-2 style BPE vocabulary.
pub const VOCAB_FILE: &str = "vocab.json";
/// File name of GPT-2 style BPE merges.
pub const MERGES_FILE: &str = "merges.txt";

/// A text tokenizer of an auxiliary model.
pub struct AuxTokenizer {
    inner: Tokenizer,
    /// A BOS id prepended to every encoded text (a GGUF file's `add_bos_token`).
    bos: Option<u32>,
}

impl std::fmt::Debug for AuxTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuxTokenizer")
            .field("vocab_size", &self.vocab_size())
            .finish()
    }
}

impl AuxTokenizer {
    /// Loads `dir/tokenizer.json`, or else builds a byte-level BPE from `dir/vocab.json` and
    /// `dir/merges.txt` (no prefix space, as GPT-2).
    ///
    /// # Errors
    ///
    /// [`AuxError::MissingFile`] when neither is present, [`AuxError::Tokenizer`] when a file does not
    /// parse.
    pub fn from_dir(dir: &Path) -> Result<Self, AuxError> {
        let json = dir.join(TOKENIZER_FILE);
        if json.exists() {
            return Self::from_tokenizer_json(&json);
        }
        let vocab = dir.join(VOCAB_FILE);
        let merges = dir.join(MERGES_FILE);
        for path in [&vocab, &merges] {
            if !path.exists() {
                return Err(AuxError::MissingFile {
                    path: path.clone(),
                    what: "tokenizer (tokenizer.json, or vocab.json and merges.txt)",
                });
            }
        }
        Self::from_vocab_merges(&vocab, &merges)
    }

    /// Loads a serialized `tokenizer.json`.
    pub fn from_tokenizer_json(path: &Path) -> Result<Self, AuxError> {
        if !path.exists() {
            return Err(AuxError::MissingFile {
                path: path.to_path_buf(),
                what: "tokenizer.json",
            });
        }
        let text = crate::config::read_text(path, "tokenizer.json")?;
        // The whole file must be JSON before the `tokenizers` crate sees it: some of its deserialisers
        // panic on malformed input (a cut string in a decoder, found by the mutation suite).
        serde_json::from_str::<serde_json::Value>(&text).map_err(|source| AuxError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        let inner =
            guard(path, || text.parse::<Tokenizer>())?.map_err(|e| tokenizer_error(path, e))?;
        Ok(Self { inner, bos: None })
    }

    /// Builds a byte-level BPE tokenizer from `vocab.json` and `merges.txt`.
    pub fn from_vocab_merges(vocab: &Path, merges: &Path) -> Result<Self, AuxError> {
        let (vocab_str, merges_str) = (path_str(vocab)?, path_str(merges)?);
        let bpe = guard(vocab, || BPE::from_file(vocab_str, merges_str).build())?
            .map_err(|e| tokenizer_error(vocab, e))?;
        let mut inner = Tokenizer::new(bpe);
        let byte_level = ByteLevel::default().add_prefix_space(false);
        inner.with_pre_tokenizer(Some(byte_level));
        inner.with_decoder(Some(byte_level));
        Ok(Self { inner, bos: None })
    }

    /// Vocabulary size, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Encodes text without adding special tokens, after the BOS id where the model's file asks
    /// for one ([`Self::with_bos`]).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, AuxError> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| AuxError::Tokenize {
                message: e.to_string(),
            })?;
        Ok(self
            .bos
            .into_iter()
            .chain(encoding.get_ids().iter().copied())
            .collect())
    }

    /// This tokenizer prepending `bos` to every encoded text.
    pub fn with_bos(mut self, bos: u32) -> Self {
        self.bos = Some(bos);
        self
    }

    /// The BOS id prepended to every encoded text, if any.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// Decodes ids back to text.
    pub fn decode(&self, ids: &[u32]) -> Result<String, AuxError> {
        self.inner
            .decode(ids, false)
            .map_err(|e| AuxError::Tokenize {
                message: e.to_string(),
            })
    }

    /// Wraps an already built `tokenizers` tokenizer (e.g. one read from GGUF metadata).
    pub fn from_tokenizer(inner: Tokenizer) -> Self {
        Self { inner, bos: None }
    }

    /// The wrapped `tokenizers` tokenizer.
    pub fn inner(&self) -> &Tokenizer {
        &self.inner
    }
}

/// Runs a call into the `tokenizers` crate, turning a panic of that crate on hostile input into
/// [`AuxError::Tokenizer`] naming `path` (a backstop: inputs are validated first where possible).
fn guard<T>(path: &Path, call: impl FnOnce() -> T) -> Result<T, AuxError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).map_err(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        AuxError::Tokenizer {
            path: path.to_path_buf(),
            message: format!("the tokenizers library failed on this file: {message}"),
        }
    })
}

fn tokenizer_error(path: &Path, error: tokenizers::Error) -> AuxError {
    AuxError::Tokenizer {
        path: PathBuf::from(path),
        message: error.to_string(),
    }
}

fn path_str(path: &Path) -> Result<&str, AuxError> {
    path.to_str().ok_or_else(|| AuxError::Tokenizer {
        path: path.to_path_buf(),
        message: "path is not valid UTF-8".to_string(),
    })
}
