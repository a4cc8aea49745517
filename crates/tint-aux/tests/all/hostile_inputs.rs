//! Probe of issue 20: each hostile input that crashed, or gave a silent wrong answer, replayed with the
//! typed error it must now give. (Results written atomically: tint-eval `atomic_write` tests; archive and R
//! data readers: their mutation tests; `--tint-hidden-size`: tint-sim config validation; the logits
//! finiteness checks: xtask `logits`. See docs/reliability.md.)

use crate::common;

use std::path::{Path, PathBuf};

use burn::tensor::{Int, Tensor, TensorData};
use safetensors::SafeTensors;
use tint_aux::gguf::{GgufError, GgufFile, GgufWriter, MetadataValue};
use tint_aux::llama::{load_llama_gguf, LlamaConfig};
use tint_aux::{check_finite, first_non_finite_weight, load_model, AuxError, AuxModel, TokenIds};

type B = common::TestBackend;

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("tint-aux-hostile")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `fixtures/aux/<fixture>` copied into a scratch directory with its config edited.
fn with_config(fixture: &str, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let source = common::aux_fixture(fixture);
    let dir = scratch(name);
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(source.join("config.json")).unwrap())
            .unwrap();
    edit(&mut config);
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::copy(
        source.join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    dir
}

fn load(dir: &Path) -> Result<AuxModel<B>, AuxError> {
    load_model(dir, &Default::default())
}

#[test]
fn token_ids_at_and_above_2_pow_31_are_vocabulary_errors_not_panics() {
    for id in [1i64 << 31, (1 << 31) + 5, 1 << 40, i64::MAX] {
        let ids = TokenIds::parse(
            &format!(r#"{{"input_ids": [[1, {id}]]}}"#),
            Path::new("ids.json"),
        )
        .unwrap();
        let err = ids.check_vocab(512).unwrap_err();
        assert!(
            matches!(err, AuxError::TokenIdOutOfRange { token_id, position: 1, vocab_size: 512, .. } if token_id == id),
            "{err}"
        );
    }
    // Beyond i64: a parse error naming the file, not a panic.
    let err = TokenIds::parse(
        r#"{"input_ids": [[18446744073709551616]]}"#,
        Path::new("x.json"),
    )
    .unwrap_err();
    assert!(
        matches!(err, AuxError::InvalidIds { ref path, .. } if path == Path::new("x.json")),
        "{err}"
    );
}

#[test]
fn a_billion_layers_is_refused_before_any_allocation() {
    for (fixture, key) in [
        ("gpt2-tiny", "n_layer"),
        ("opt-pre-ln", "num_hidden_layers"),
    ] {
        for layers in [1_000_000_000u64, 1_000_000_000_000_000_000] {
            let dir = with_config(fixture, &format!("{key}-{layers}"), |c| {
                c[key] = serde_json::json!(layers)
            });
            let err = load(&dir).unwrap_err();
            assert!(
                matches!(
                    err,
                    AuxError::ConfigMismatch { .. } | AuxError::InvalidConfig { .. }
                ),
                "{key} = {layers}: {err}"
            );
        }
    }
}

#[test]
fn size_arithmetic_overflows_are_config_errors() {
    // 4 * n_embd of GPT-2, 3 * n_embd, and OPT's max_position_embeddings + 2.
    let dir = with_config("gpt2-tiny", "n_embd-overflow", |c| {
        c["n_embd"] = serde_json::json!(1u64 << 62);
        c["n_head"] = serde_json::json!(1);
    });
    let err = load(&dir).unwrap_err();
    assert!(matches!(err, AuxError::InvalidConfig { .. }), "{err}");
    assert!(err.to_string().contains("overflow"), "{err}");
    let dir = with_config("opt-pre-ln", "positions-overflow", |c| {
        c["max_position_embeddings"] = serde_json::json!(u64::MAX)
    });
    let err = load(&dir).unwrap_err();
    assert!(err.to_string().contains("max_position_embeddings"), "{err}");
    // A GGUF dimension of 2^62: the byte count overflows.
    let bytes = GgufWriter::new()
        .tensor(
            "t",
            &[1 << 62, 1],
            tint_aux::gguf::GgmlType::F32,
            vec![0; 4],
        )
        .to_bytes();
    let err = GgufFile::from_bytes(bytes).unwrap_err();
    assert!(matches!(err, GgufError::BadTensorShape { .. }), "{err}");
}

#[test]
fn gguf_arrays_nested_40000_deep_hit_the_depth_limit() {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    bytes.extend(1u64.to_le_bytes());
    bytes.extend(4u64.to_le_bytes());
    bytes.extend(b"deep");
    bytes.extend(9u32.to_le_bytes());
    for _ in 0..40_000 {
        bytes.extend(9u32.to_le_bytes());
        bytes.extend(1u64.to_le_bytes());
    }
    let err = GgufFile::from_bytes(bytes).unwrap_err();
    assert!(
        matches!(err, GgufError::LimitExceeded { limit, .. } if limit == u64::from(tint_aux::gguf::MAX_ARRAY_DEPTH)),
        "{err}"
    );
}

#[test]
fn a_u8_array_spanning_the_file_is_refused_by_count() {
    // 16 MiB of U8 elements: above the value limit, refused before the elements are read.
    let n = 16usize << 20;
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    bytes.extend(1u64.to_le_bytes());
    bytes.extend(4u64.to_le_bytes());
    bytes.extend(b"blob");
    bytes.extend(9u32.to_le_bytes());
    bytes.extend(0u32.to_le_bytes());
    bytes.extend((n as u64).to_le_bytes());
    bytes.resize(bytes.len() + n, 7);
    let err = GgufFile::from_bytes(bytes).unwrap_err();
    assert!(matches!(err, GgufError::LimitExceeded { .. }), "{err}");
    // A count beyond the file is truncation, whatever the element type.
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(0u64.to_le_bytes());
    bytes.extend(1u64.to_le_bytes());
    bytes.extend(1u64.to_le_bytes());
    bytes.extend(b"k");
    bytes.extend(9u32.to_le_bytes());
    bytes.extend(10u32.to_le_bytes()); // u64 elements
    bytes.extend(100u64.to_le_bytes());
    bytes.resize(bytes.len() + 400, 0); // room for 50 of them
    let err = GgufFile::from_bytes(bytes).unwrap_err();
    assert!(
        matches!(err, GgufError::Truncated { needed: 800, .. }),
        "{err}"
    );
}

#[test]
fn overlapping_and_misaligned_gguf_tensors_are_refused() {
    let base = GgufWriter::new()
        .tensor_f32("a", &[8], &[1.0; 8])
        .tensor_f32("b", &[8], &[2.0; 8])
        .to_bytes();
    GgufFile::from_bytes(base.clone()).unwrap();
    let file = GgufFile::from_bytes(base.clone()).unwrap();
    let b_offset = file.tensor_info("b").unwrap().offset;
    // The offset field of "b" is the last 8 bytes of its tensor info, before the data section.
    let at = base
        .windows(8)
        .rposition(|w| w == b_offset.to_le_bytes())
        .unwrap();
    let mut overlap = base.clone();
    overlap[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
    let err = GgufFile::from_bytes(overlap).unwrap_err();
    assert!(matches!(err, GgufError::OverlappingTensors { .. }), "{err}");
    let mut misaligned = base;
    misaligned[at..at + 8].copy_from_slice(&4u64.to_le_bytes());
    let err = GgufFile::from_bytes(misaligned).unwrap_err();
    assert!(matches!(err, GgufError::MisalignedTensor { .. }), "{err}");
}

#[test]
fn nan_and_infinite_weights_are_found_and_named() {
    let source = common::aux_fixture("gpt2-tiny");
    let dir = scratch("nan-weights");
    std::fs::copy(source.join("config.json"), dir.join("config.json")).unwrap();
    let bytes = std::fs::read(source.join("model.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let mut owned: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, v.shape().to_vec(), v.data().to_vec()))
        .collect();
    for (name, _, data) in &mut owned {
        if name == "transformer.h.1.mlp.c_fc.weight" {
            data[..4].copy_from_slice(&f32::NAN.to_le_bytes());
            data[4..8].copy_from_slice(&f32::INFINITY.to_le_bytes());
        }
    }
    let views: Vec<_> = owned
        .iter()
        .map(|(n, s, d)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d)
                    .unwrap(),
            )
        })
        .collect();
    std::fs::write(
        dir.join("model.safetensors"),
        safetensors::serialize(views, None).unwrap(),
    )
    .unwrap();
    let model = load(&dir).unwrap();
    let ids = Tensor::<B, 2, Int>::from_data(
        TensorData::new(vec![1i64, 2, 3], [1, 3]),
        &Default::default(),
    );
    let logits = model.forward(ids).unwrap();
    let err = check_finite(&logits, "logits", || first_non_finite_weight(&model)).unwrap_err();
    let AuxError::NonFinite { cause, count, .. } = &err else {
        panic!("{err}")
    };
    assert!(*count > 0);
    assert_eq!(
        cause.as_deref(),
        Some(
            format!(
                "weight `transformer.h.1.mlp.c_fc.weight` in {} (2 of 4096 values non-finite)",
                dir.join("model.safetensors").display()
            )
            .as_str()
        ),
        "{err}"
    );
}

#[test]
fn negative_epsilon_and_infinite_rope_theta_are_config_errors() {
    for eps in [-1e-5, 0.0] {
        let dir = with_config("gpt2-tiny", &format!("eps{eps}"), |c| {
            c["layer_norm_epsilon"] = serde_json::json!(eps)
        });
        let err = load(&dir).unwrap_err();
        assert!(err.to_string().contains("layer_norm_epsilon"), "{err}");
    }
    let config = LlamaConfig::new(64, 2, 4, 2, 96, 97).with_rope_theta(f64::INFINITY);
    let err = config.validate(Path::new("c.json")).unwrap_err();
    assert!(err.to_string().contains("rope_theta"), "{err}");
    let config = LlamaConfig::new(64, 2, 4, 2, 96, 97).with_rms_norm_eps(f64::NAN);
    let err = config.validate(Path::new("c.json")).unwrap_err();
    assert!(err.to_string().contains("rms_norm_eps"), "{err}");
}

#[test]
fn a_config_with_fewer_layers_than_the_checkpoint_is_an_error() {
    let dir = with_config("gpt2-tiny", "fewer-layers", |c| {
        c["n_layer"] = serde_json::json!(1)
    });
    let err = load(&dir).unwrap_err();
    let AuxError::UnusedTensors { count, names, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(*count, 12, "{err}");
    assert!(names[0].starts_with("transformer.h.1."), "{err}");
}

/// The tiny LLaMA fixture as a GGUF whose `llama.block_count` says one block fewer than it holds.
#[test]
fn a_gguf_block_count_below_the_blocks_is_an_error() {
    let source = common::repo_root().join("fixtures/llama/tiny_tied");
    let bytes = std::fs::read(source.join("model.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let mut tokens: Vec<MetadataValue> = (33u8..127)
        .map(|b| MetadataValue::String((b as char).to_string()))
        .collect();
    tokens.extend(["Ġ", "Ġt", "Ġ1"].map(|t| MetadataValue::String(t.into())));
    let mut writer = GgufWriter::new()
        .metadata(
            "general.architecture",
            MetadataValue::String("llama".into()),
        )
        .metadata("llama.block_count", MetadataValue::U32(1)) // the file holds 2
        .metadata("llama.context_length", MetadataValue::U32(32))
        .metadata("llama.embedding_length", MetadataValue::U32(64))
        .metadata("llama.feed_forward_length", MetadataValue::U32(96))
        .metadata("llama.attention.head_count", MetadataValue::U32(4))
        .metadata("llama.attention.head_count_kv", MetadataValue::U32(2))
        .metadata(
            "llama.attention.layer_norm_rms_epsilon",
            MetadataValue::F32(1e-5),
        )
        .metadata("tokenizer.ggml.model", MetadataValue::String("gpt2".into()))
        .metadata("tokenizer.ggml.tokens", MetadataValue::Array(tokens));
    for (hf_name, view) in tensors.tensors() {
        let values: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let name = hf_name
            .replace("model.embed_tokens", "token_embd")
            .replace("model.norm", "output_norm")
            .replace("model.layers.", "blk.")
            .replace("input_layernorm", "attn_norm")
            .replace("post_attention_layernorm", "ffn_norm")
            .replace("self_attn.q_proj", "attn_q")
            .replace("self_attn.k_proj", "attn_k")
            .replace("self_attn.v_proj", "attn_v")
            .replace("self_attn.o_proj", "attn_output")
            .replace("mlp.gate_proj", "ffn_gate")
            .replace("mlp.up_proj", "ffn_up")
            .replace("mlp.down_proj", "ffn_down");
        writer = writer.tensor_f32(&name, view.shape(), &values);
    }
    let path = scratch("block-count").join("m.gguf");
    std::fs::write(&path, writer.to_bytes()).unwrap();
    let err = load_llama_gguf::<B>(&path, &Default::default()).unwrap_err();
    let AuxError::UnusedTensors { count, names, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(*count, 9, "{err}");
    assert!(names.iter().all(|n| n.starts_with("blk.1.")), "{err}");
}

#[test]
fn useless_train_masks_are_errors() {
    for mask in ["[[0, 0, 0, 0]]", "[[0, 0, 1, 1]]"] {
        let ids = TokenIds::parse(
            &format!(r#"{{"input_ids": [[1, 2, 3, 4]], "train_mask": {mask}}}"#),
            Path::new("ids.json"),
        )
        .unwrap();
        let err = ids.check_train_mask(Path::new("ids.json")).unwrap_err();
        assert!(matches!(err, AuxError::InvalidIds { .. }), "{mask}: {err}");
    }
}

/// Issue 66: a tensor name repeated in the safetensors header (the safetensors reader keeps one
/// silently) is refused by name, with the file; the unedited copy loads.
#[test]
fn a_tensor_name_repeated_in_the_safetensors_header_is_refused_by_name() {
    let dir = with_config("gpt2-tiny", "duplicate-tensor-name", |_| {});
    assert!(load(&dir).is_ok(), "the unedited copy must load");
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let length = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + length]).unwrap();
    let (name, entry) = header
        .iter()
        .find(|(k, _)| k.as_str() != "__metadata__")
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    // The first entry again, at the end of the object: same dtype, shape and byte range.
    let text = serde_json::to_string(&header).unwrap();
    let repeated = format!(
        "{},{}:{}}}",
        &text[..text.len() - 1],
        serde_json::to_string(&name).unwrap(),
        entry
    );
    // Keep the data section where it was: pad the header with spaces to a multiple of 8.
    let mut new_header = repeated.into_bytes();
    while new_header.len() % 8 != 0 {
        new_header.push(b' ');
    }
    let mut edited = (new_header.len() as u64).to_le_bytes().to_vec();
    edited.extend_from_slice(&new_header);
    edited.extend_from_slice(&bytes[8 + length..]);
    std::fs::write(&path, edited).unwrap();
    match load(&dir) {
        Err(AuxError::DuplicateTensor { path: p, name: n }) => {
            assert_eq!((p, n), (path, name));
        }
        Err(other) => panic!("expected DuplicateTensor, got {other}"),
        Ok(_) => panic!("a repeated tensor name must be refused"),
    }
}

/// Issue 66, finding 21: a config size that disagrees with the weights names the config field that
/// set the expected dimension (GPT-2 and LLaMA `config.json`).
#[test]
fn a_config_size_that_disagrees_with_the_weights_names_its_field() {
    for (field, value, needle) in [
        (
            "vocab_size",
            256,
            "expected [256, 32]; 256 is the config's vocab_size",
        ),
        ("n_embd", 16, "16 is the config's n_embd"),
    ] {
        let dir = with_config("gpt2-tiny", &format!("size-{field}"), |c| {
            c[field] = serde_json::json!(value)
        });
        let err = load(&dir).unwrap_err();
        assert!(matches!(err, AuxError::TensorShape { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{field}: {err}");
    }
    let source = crate::llama_tiny::llama_fixture("tiny");
    let dir = scratch("size-intermediate");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(source.join("config.json")).unwrap())
            .unwrap();
    config["intermediate_size"] = serde_json::json!(80);
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::copy(
        source.join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    let err = load(&dir).unwrap_err();
    assert!(
        err.to_string()
            .contains("80 is the config's intermediate_size"),
        "{err}"
    );
}
