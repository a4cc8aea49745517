//! Bad files and bad inputs give typed errors that name the file, tensor or limit; F16/BF16
//! checkpoints load.

use std::path::{Path, PathBuf};

use crate::common::*;
use burn::tensor::{Int, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors};
use tint_aux::tokenizer::AuxTokenizer;
use tint_aux::{load_model, AuxError, AuxModel};

/// A fresh scratch directory under cargo's per-target temp dir.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("tint-aux-bad-input")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A tensor as owned (dtype, shape, bytes).
type Owned = (Dtype, Vec<usize>, Vec<u8>);

fn read_tensors(path: &Path) -> Vec<(String, Owned)> {
    let bytes = std::fs::read(path).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let mut out: Vec<(String, Owned)> = tensors
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            (
                name,
                (view.dtype(), view.shape().to_vec(), view.data().to_vec()),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn write_tensors(path: &Path, tensors: &[(String, Owned)]) {
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, (dtype, shape, data))| {
            (
                name.clone(),
                safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// Copies the gpt2-tiny fixture into `dir`, with `edit` applied to its tensors.
fn gpt2_variant(name: &str, edit: impl FnOnce(&mut Vec<(String, Owned)>)) -> PathBuf {
    let source = aux_fixture("gpt2-tiny");
    let dir = scratch(name);
    std::fs::copy(source.join("config.json"), dir.join("config.json")).unwrap();
    let mut tensors = read_tensors(&source.join("model.safetensors"));
    edit(&mut tensors);
    write_tensors(&dir.join("model.safetensors"), &tensors);
    dir
}

fn load(dir: &Path) -> Result<AuxModel<TestBackend>, AuxError> {
    load_model(dir, &Default::default())
}

fn ids(values: Vec<i64>, shape: [usize; 2]) -> Tensor<TestBackend, 2, Int> {
    Tensor::from_data(TensorData::new(values, shape), &Default::default())
}

const C_ATTN: &str = "transformer.h.1.attn.c_attn.weight";

#[test]
fn missing_files_are_named() {
    let empty = scratch("empty");
    match load(&empty) {
        Err(AuxError::MissingFile { path, .. }) => assert!(path.ends_with("config.json")),
        other => panic!("expected MissingFile, got {other:?}"),
    }
    let config_only = scratch("config-only");
    std::fs::copy(
        aux_fixture("gpt2-tiny").join("config.json"),
        config_only.join("config.json"),
    )
    .unwrap();
    match load(&config_only) {
        Err(AuxError::MissingFile { path, .. }) => assert!(path.ends_with("model.safetensors")),
        other => panic!("expected MissingFile, got {other:?}"),
    }
    match AuxTokenizer::from_dir(&empty) {
        Err(AuxError::MissingFile { path, .. }) => assert!(path.ends_with("vocab.json")),
        other => panic!("expected MissingFile, got {other:?}"),
    }
}

#[test]
fn unknown_architecture_is_rejected() {
    let dir = scratch("unknown-arch");
    let config = std::fs::read_to_string(aux_fixture("gpt2-tiny").join("config.json")).unwrap();
    std::fs::write(
        dir.join("config.json"),
        config.replace("\"gpt2\"", "\"mamba\""),
    )
    .unwrap();
    match load(&dir) {
        Err(AuxError::UnknownArchitecture { model_type, .. }) => assert_eq!(model_type, "mamba"),
        other => panic!("expected UnknownArchitecture, got {other:?}"),
    }
}

#[test]
fn missing_tensor_is_named() {
    let dir = gpt2_variant("missing-tensor", |t| t.retain(|(name, _)| name != C_ATTN));
    match load(&dir) {
        Err(AuxError::MissingTensor { path, tensor }) => {
            assert_eq!(tensor, C_ATTN);
            assert!(path.ends_with("model.safetensors"));
        }
        other => panic!("expected MissingTensor, got {other:?}"),
    }
}

#[test]
fn wrong_shape_is_named() {
    let dir = gpt2_variant("wrong-shape", |t| {
        let entry = t.iter_mut().find(|(name, _)| name == C_ATTN).unwrap();
        entry.1 .1 = vec![96, 32];
    });
    match load(&dir) {
        Err(AuxError::TensorShape {
            tensor,
            expected,
            found,
            ..
        }) => {
            assert_eq!(tensor, C_ATTN);
            assert_eq!(expected, vec![32, 96]);
            assert_eq!(found, vec![96, 32]);
        }
        other => panic!("expected TensorShape, got {other:?}"),
    }
}

#[test]
fn wrong_dtype_is_named() {
    let dir = gpt2_variant("wrong-dtype", |t| {
        let entry = t.iter_mut().find(|(name, _)| name == C_ATTN).unwrap();
        entry.1 .0 = Dtype::I32;
    });
    match load(&dir) {
        Err(AuxError::TensorDtype { tensor, dtype, .. }) => {
            assert_eq!(tensor, C_ATTN);
            assert_eq!(dtype, "I32");
        }
        other => panic!("expected TensorDtype, got {other:?}"),
    }
}

/// Rewrites every F32 tensor as `half_dtype` in one copy and as F32 holding the same rounded values in
/// another: both must give identical logits (conversion to f32 is exact).
fn check_half_precision(half_dtype: Dtype) {
    let to_half = |x: f32| -> ([u8; 2], f32) {
        match half_dtype {
            Dtype::F16 => {
                let h = half::f16::from_f32(x);
                (h.to_le_bytes(), h.to_f32())
            }
            _ => {
                let h = half::bf16::from_f32(x);
                (h.to_le_bytes(), h.to_f32())
            }
        }
    };
    let mut rounded_f32 = Vec::new();
    let half_dir = gpt2_variant(&format!("{half_dtype:?}"), |tensors| {
        for (name, (dtype, shape, data)) in tensors.iter_mut() {
            let mut half_bytes = Vec::new();
            let mut f32_bytes = Vec::new();
            for c in data.chunks_exact(4) {
                let (h, r) = to_half(f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                half_bytes.extend_from_slice(&h);
                f32_bytes.extend_from_slice(&r.to_le_bytes());
            }
            rounded_f32.push((name.clone(), (Dtype::F32, shape.clone(), f32_bytes)));
            *dtype = half_dtype;
            *data = half_bytes;
        }
    });
    let rounded_dir = gpt2_variant(&format!("{half_dtype:?}-rounded"), |tensors| {
        *tensors = rounded_f32
    });
    let input = ids((0..12).map(|i| (i * 37) % 512).collect(), [1, 12]);
    let half = load(&half_dir).unwrap().forward(input.clone()).unwrap();
    let rounded = load(&rounded_dir).unwrap().forward(input.clone()).unwrap();
    half.into_data().assert_eq(&rounded.into_data(), true);
}

#[test]
fn f16_and_bf16_checkpoints_load_exactly() {
    check_half_precision(Dtype::F16);
    check_half_precision(Dtype::BF16);
}

#[test]
fn out_of_vocab_token_and_long_sequence_are_rejected() {
    let model = load(&aux_fixture("gpt2-tiny")).unwrap();
    assert_eq!(model.vocab_size(), 512);
    match model.forward(ids(vec![1, 2, 512, 3], [2, 2])) {
        Err(AuxError::TokenIdOutOfRange {
            token_id,
            batch,
            position,
            vocab_size,
        }) => assert_eq!((token_id, batch, position, vocab_size), (512, 1, 0, 512)),
        other => panic!("expected TokenIdOutOfRange, got {other:?}"),
    }
    assert!(matches!(
        model.forward(ids(vec![1, -1], [1, 2])),
        Err(AuxError::TokenIdOutOfRange { token_id: -1, .. })
    ));
    let too_long = model.max_positions() + 1;
    match model.forward(ids(vec![0; too_long], [1, too_long])) {
        Err(AuxError::SequenceTooLong {
            seq_length,
            max_positions,
        }) => assert_eq!((seq_length, max_positions), (33, 32)),
        other => panic!("expected SequenceTooLong, got {other:?}"),
    }
    // The longest allowed sequence runs.
    let longest = model.max_positions();
    assert!(model.forward(ids(vec![5; longest], [1, longest])).is_ok());
    assert!(matches!(
        model.forward(ids(vec![], [1, 0])),
        Err(AuxError::EmptyInput { .. })
    ));

    // OPT: the limit is max_position_embeddings, not the table's 2 extra rows.
    let opt = load(&aux_fixture("opt-pre-ln")).unwrap();
    assert!(matches!(
        opt.forward(ids(vec![4; 33], [1, 33])),
        Err(AuxError::SequenceTooLong {
            max_positions: 32,
            ..
        })
    ));
}

#[test]
fn tokenizer_json_and_vocab_merges_agree() {
    let dir = official_micro_gpt2();
    let from_json = AuxTokenizer::from_dir(&dir).unwrap();
    let from_bpe =
        AuxTokenizer::from_vocab_merges(&dir.join("vocab.json"), &dir.join("merges.txt")).unwrap();
    let text = "The quick brown fox jumps over the lazy dog. Ünïcödé 123!";
    let a = from_json.encode(text).unwrap();
    let b = from_bpe.encode(text).unwrap();
    assert_eq!(a, b);
    assert!(a.len() > 5);
    assert_eq!(from_json.decode(&a).unwrap(), text);
    assert_eq!(from_bpe.decode(&b).unwrap(), text);
    let model = load(&dir).unwrap();
    assert!(a.iter().all(|&id| (id as usize) < model.vocab_size()));
}

/// Prefix reuse refuses the ids the plain forward refuses, and a refused context leaves the cache
/// as it was: the next context still reuses the stored prefix and gets the whole-context logits.
#[test]
fn prefix_reuse_rejects_bad_ids_and_keeps_its_cache() {
    let dir = repo_root().join("fixtures/llama/tiny");
    let model = load(&dir).unwrap();
    let vocab = model.vocab_size() as u32;
    let mut cache = tint_aux::PrefixCache::default();
    let context: Vec<u32> = (0..10).map(|i| (i * 5 + 1) % vocab).collect();
    model
        .last_position_logits_reusing(&context, &mut cache)
        .unwrap();

    assert!(matches!(
        model.last_position_logits_reusing(&[], &mut cache),
        Err(AuxError::EmptyInput { .. })
    ));
    let mut out_of_vocab = context.clone();
    out_of_vocab.push(vocab);
    match model.last_position_logits_reusing(&out_of_vocab, &mut cache) {
        Err(AuxError::TokenIdOutOfRange {
            token_id, position, ..
        }) => assert_eq!((token_id, position), (vocab as i64, 10)),
        other => panic!("expected TokenIdOutOfRange, got {other:?}"),
    }
    let too_long = vec![1u32; model.max_positions() + 1];
    assert!(matches!(
        model.last_position_logits_reusing(&too_long, &mut cache),
        Err(AuxError::SequenceTooLong { .. })
    ));
    assert_eq!(
        (cache.reused_positions(), cache.computed_positions()),
        (0, 10),
        "refused contexts touch nothing"
    );

    let mut longer = context.clone();
    longer.push(2);
    let reused = model
        .last_position_logits_reusing(&longer, &mut cache)
        .unwrap();
    assert_eq!(cache.reused_positions(), 10);
    let whole = model
        .last_position_logits(ids(longer.iter().map(|&t| t as i64).collect(), [1, 11]))
        .unwrap();
    // Same bound and reason as the parity test's PREFIX_REUSE_TOL.
    let diff = (reused - whole).abs().max().into_scalar();
    assert!(diff <= 1e-5, "{diff}");
}
