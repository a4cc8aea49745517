//! Which config field sets a tensor's dimensions, so that a shape error names the field a user edits
//! (issue 66, finding 21): `expected [4096, 32] … 32 is the config's n_embd`.

use crate::weight_file::TensorNaming;
use crate::{AuxConfig, AuxError};

/// A config value that sets tensor dimensions: how the config file names it, and its value.
pub(crate) type SizeField = (String, usize);

/// `err`, with the config fields that give each expected dimension the file's tensor lacks when it
/// is an [`AuxError::TensorShape`]; any other error as it is.
pub(crate) fn name_size_fields(err: AuxError, fields: &[SizeField]) -> AuxError {
    let AuxError::TensorShape {
        path,
        tensor,
        expected,
        found,
        set_by: _,
    } = err
    else {
        return err;
    };
    let mut named = Vec::new();
    for (axis, &want) in expected.iter().enumerate() {
        if found.get(axis) == Some(&want) {
            continue;
        }
        let names: Vec<&str> = fields
            .iter()
            .filter(|(_, value)| *value == want)
            .map(|(name, _)| name.as_str())
            .collect();
        if !names.is_empty() {
            named.push(format!("{want} is the config's {}", names.join(" and ")));
        }
    }
    named.dedup();
    AuxError::TensorShape {
        path,
        tensor,
        expected,
        found,
        set_by: named.join("; ").into(),
    }
}

impl AuxConfig {
    /// The config fields (HF names) that set tensor dimensions, with their values.
    pub(crate) fn size_fields(&self) -> Vec<SizeField> {
        let field = |name: &str, value: usize| (name.to_string(), value);
        match self {
            AuxConfig::Gpt2(c) => vec![
                field("vocab_size", c.vocab_size),
                field("n_positions", c.n_positions),
                field("n_embd", c.n_embd),
                field("3 × n_embd", 3 * c.n_embd),
                match c.n_inner {
                    Some(inner) => field("n_inner", inner),
                    None => field("4 × n_embd (n_inner unset)", c.d_ff()),
                },
            ],
            AuxConfig::Opt(c) => {
                let mut fields = vec![
                    field("vocab_size", c.vocab_size),
                    field("max_position_embeddings + 2", c.max_position_embeddings + 2),
                    field("hidden_size", c.hidden_size),
                    field("ffn_dim", c.ffn_dim),
                ];
                if let Some(proj) = c.word_embed_proj_dim {
                    fields.push(field("word_embed_proj_dim", proj));
                }
                fields
            }
        }
    }
}

/// The LLaMA config values that set tensor dimensions, named as the file's config does: HF
/// `config.json` keys, or GGUF `llama.*` metadata keys.
pub(crate) fn llama_size_fields(
    config: &crate::llama::LlamaConfig,
    naming: &TensorNaming,
) -> Vec<SizeField> {
    let hd = config.head_dim();
    let names: [&str; 5] = if *naming == TensorNaming::LlamaGguf {
        [
            "llama.vocab_size (or the tokenizer's token count)",
            "llama.embedding_length",
            "llama.feed_forward_length",
            "llama.attention.head_count × head_dim",
            "llama.attention.head_count_kv × head_dim",
        ]
    } else {
        [
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_attention_heads × head_dim",
            "num_key_value_heads × head_dim",
        ]
    };
    let values = [
        config.vocab_size,
        config.d_model,
        config.d_ff,
        config.n_heads * hd,
        config.n_kv_heads * hd,
    ];
    names
        .iter()
        .zip(values)
        .map(|(name, value)| (name.to_string(), value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn shape_error(expected: Vec<usize>, found: Vec<usize>) -> AuxError {
        AuxError::TensorShape {
            path: PathBuf::from("m/model.safetensors"),
            tensor: "wte.weight".into(),
            expected,
            found,
            set_by: "".into(),
        }
    }

    #[test]
    fn the_differing_dimension_names_its_field() {
        let fields = vec![("vocab_size".to_string(), 4096), ("n_embd".to_string(), 32)];
        let err = name_size_fields(shape_error(vec![4096, 32], vec![4096, 64]), &fields);
        assert_eq!(
            err.to_string(),
            "tensor \"wte.weight\" in m/model.safetensors has shape [4096, 64], expected \
             [4096, 32]; 32 is the config's n_embd"
        );
        // No field has the value: the message stays as it was.
        let err = name_size_fields(shape_error(vec![7], vec![8]), &fields);
        assert_eq!(
            err.to_string(),
            "tensor \"wte.weight\" in m/model.safetensors has shape [8], expected [7]"
        );
        // Other errors pass through.
        let other = AuxError::InvalidOption { reason: "y".into() };
        assert!(matches!(
            name_size_fields(other, &fields),
            AuxError::InvalidOption { .. }
        ));
    }
}
