//! A `tokenizers` tokenizer built from a GGUF file's `tokenizer.ggml.*` metadata.
//!
//! Only `tokenizer.ggml.model = gpt2` (byte-level BPE) is supported. The vocabulary (`tokenizer.ggml.tokens`)
//! is already spelled in GPT-2's byte alphabet, the merges (`tokenizer.ggml.merges`) are `"left right"` strings.
//! Tokens of type 3 (control, e.g. `<|im_start|>`) become special added tokens and type 4 (user-defined)
//! plain added tokens, so they are matched whole as llama.cpp does.
//!
//! Pre-tokenisation follows `tokenizer.ggml.pre`: `smollm` (and the StarCoder family it shares its regex
//! with) splits every digit on its own before GPT-2's byte-level regex, as both llama.cpp and SmolLM2's
//! original `tokenizer.json` do; any other value uses GPT-2's regex alone.
//! (transformers' GGUF converter ignores `smollm` and uses GPT-2's regex; the two differ only on a space
//! followed by a digit, see `scripts/make_llama_fixtures.py`.)

use std::collections::HashMap;

use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, PreTokenizerWrapper, Tokenizer};

use super::{GgufError, GgufFile};

/// llama.cpp's token type of control tokens.
const TOKEN_TYPE_CONTROL: i64 = 3;
/// llama.cpp's token type of user-defined tokens.
const TOKEN_TYPE_USER_DEFINED: i64 = 4;
/// `tokenizer.ggml.pre` values whose regex splits digits individually.
const DIGIT_SPLITTING_PRE: [&str; 4] = ["smollm", "starcoder", "refact", "codeshell"];

/// A byte-level BPE tokenizer read from GGUF metadata, with its special token ids.
#[derive(Clone)]
pub struct GgufTokenizer {
    /// The underlying `tokenizers` tokenizer (no post-processor: BOS is added by [`GgufTokenizer::encode`]).
    pub tokenizer: Tokenizer,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos_token_id: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos_token_id: Option<u32>,
    /// `tokenizer.ggml.add_bos_token` (false when absent, as for GPT-2-style vocabularies).
    pub add_bos: bool,
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("bos_token_id", &self.bos_token_id)
            .field("eos_token_id", &self.eos_token_id)
            .field("add_bos", &self.add_bos)
            .finish()
    }
}

fn tokenizer_error(error: impl std::fmt::Display) -> GgufError {
    GgufError::Tokenizer {
        message: error.to_string(),
    }
}

/// The token id under `key`, if present, checked against a vocabulary of `vocab_size` tokens.
fn optional_id(file: &GgufFile, key: &str, vocab_size: usize) -> Result<Option<u32>, GgufError> {
    if !file.metadata.contains_key(key) {
        return Ok(None);
    }
    let value = file.get_u64(key)?;
    match u32::try_from(value) {
        Ok(id) if (id as usize) < vocab_size => Ok(Some(id)),
        _ => Err(GgufError::TokenOutOfVocabulary {
            key: key.to_string(),
            value,
            vocab_size,
        }),
    }
}

impl GgufTokenizer {
    /// Builds the tokenizer from `tokenizer.ggml.{model, pre, tokens, merges, token_type, bos_token_id,
    /// eos_token_id, add_bos_token}`.
    ///
    /// # Errors
    /// [`GgufError::MissingMetadata`] / [`GgufError::MetadataType`] for absent or mistyped keys,
    /// [`GgufError::UnsupportedTokenizer`] for models other than `gpt2`, [`GgufError::Tokenizer`] if the
    /// `tokenizers` crate rejects the vocabulary (e.g. a merge of unknown tokens).
    pub fn from_gguf(file: &GgufFile) -> Result<Self, GgufError> {
        let model = file.get_str("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(GgufError::UnsupportedTokenizer {
                model: model.to_string(),
            });
        }
        let tokens = file.get_string_array("tokenizer.ggml.tokens")?;
        let merges: Vec<(String, String)> = file
            .get_string_array("tokenizer.ggml.merges")?
            .into_iter()
            .map(|merge| {
                merge
                    .split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| tokenizer_error(format!("merge {merge:?} has no space")))
            })
            .collect::<Result<_, _>>()?;
        let token_types: Vec<i64> = match file.metadata.get("tokenizer.ggml.token_type") {
            None => vec![1; tokens.len()],
            Some(_) => file
                .get_array("tokenizer.ggml.token_type")?
                .iter()
                .map(|v| {
                    v.as_i64().ok_or_else(|| GgufError::MetadataType {
                        key: "tokenizer.ggml.token_type".to_string(),
                        expected: "array of integers",
                        found: v.type_name(),
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(id, token)| (token.to_string(), id as u32))
            .collect::<HashMap<_, _>>()
            .into_iter()
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(tokenizer_error)?;
        let mut tokenizer = Tokenizer::new(bpe);

        let byte_level = ByteLevel::new(false, true, true);
        let pre = file
            .metadata
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.as_str())
            .unwrap_or("gpt2");
        let pre_tokenizer: PreTokenizerWrapper = if DIGIT_SPLITTING_PRE.contains(&pre) {
            Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
        } else {
            byte_level.into()
        };
        tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
        tokenizer.with_decoder(Some(ByteLevel::default()));

        let added = |wanted: i64, special: bool| -> Vec<AddedToken> {
            tokens
                .iter()
                .zip(&token_types)
                .filter(|(_, &ty)| ty == wanted)
                .map(|(token, _)| AddedToken::from(token.to_string(), special).normalized(false))
                .collect()
        };
        tokenizer
            .add_special_tokens(added(TOKEN_TYPE_CONTROL, true))
            .map_err(tokenizer_error)?;
        tokenizer
            .add_tokens(added(TOKEN_TYPE_USER_DEFINED, false))
            .map_err(tokenizer_error)?;

        let vocab_size = tokenizer.get_vocab_size(true);
        let bos_token_id = optional_id(file, "tokenizer.ggml.bos_token_id", vocab_size)?;
        let add_bos = match file.metadata.get("tokenizer.ggml.add_bos_token") {
            None => false,
            Some(_) => file.get_bool("tokenizer.ggml.add_bos_token")?,
        };
        if add_bos && bos_token_id.is_none() {
            return Err(GgufError::BosWithoutId);
        }
        Ok(Self {
            tokenizer,
            bos_token_id,
            eos_token_id: optional_id(file, "tokenizer.ggml.eos_token_id", vocab_size)?,
            add_bos,
        })
    }

    /// Encodes text to token ids, prepending BOS when the file asks for it (`add_bos`).
    ///
    /// # Errors
    /// [`GgufError::Tokenizer`].
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, GgufError> {
        let encoding = self
            .tokenizer
            .encode(text, false)
            .map_err(tokenizer_error)?;
        let mut ids = Vec::with_capacity(encoding.len() + 1);
        if self.add_bos {
            ids.extend(self.bos_token_id);
        }
        ids.extend_from_slice(encoding.get_ids());
        Ok(ids)
    }

    /// Decodes token ids to text (special tokens included).
    ///
    /// # Errors
    /// [`GgufError::Tokenizer`].
    pub fn decode(&self, ids: &[u32]) -> Result<String, GgufError> {
        self.tokenizer.decode(ids, false).map_err(tokenizer_error)
    }

    /// Number of token ids (the base vocabulary; added tokens of the file are part of it).
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }
}
