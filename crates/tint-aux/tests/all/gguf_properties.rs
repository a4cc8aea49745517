//! Property-based test of the GGUF reader and LLaMA loader (issue 66 item 6): the tiny LLaMA's
//! GGUF (as llama.cpp's converter writes it, `llama_tiny::tiny_gguf`) rewritten with one generated
//! change to its metadata or tensor table and loaded by `load_model`. Changes that keep the model
//! the file means (tensors stored in another order, an extra `general.*` key) must load to the same
//! logits to the bit; every other (a required key missing, of another type or another size, a
//! repeated key, a tensor missing, repeated, unknown or of other dimensions) must be refused with
//! a typed error. Never a panic, never a load of other weights.

use std::path::{Path, PathBuf};

use burn::tensor::{Int, Tensor, TensorData};
use proptest::prelude::*;
use tint_aux::gguf::{GgufFile, GgufWriter, MetadataValue};
use tint_aux::{load_model, AuxError};

use crate::common::TestBackend;
use crate::llama_tiny::tiny_gguf;

/// Metadata keys the loader needs (sizes, counts, norms, rotary base).
const REQUIRED: [&str; 8] = [
    "general.architecture",
    "llama.block_count",
    "llama.embedding_length",
    "llama.feed_forward_length",
    "llama.attention.head_count",
    "llama.attention.head_count_kv",
    "llama.context_length",
    "llama.attention.layer_norm_rms_epsilon",
];

/// A change to the file.
#[derive(Debug, Clone)]
enum Change {
    /// Tensors stored in another order: same model.
    Reorder(Vec<usize>),
    /// An extra descriptive key: same model.
    GeneralKey(String),
    /// A required key left out.
    MissingKey(usize),
    /// A required key as a string.
    KeyAsText(usize),
    /// A size or count off by a non-zero amount (the tensors no longer fit it).
    SizeOff(usize, i64),
    /// A metadata key written twice.
    RepeatedKey(usize),
    /// A tensor left out.
    MissingTensor(usize),
    /// A tensor written twice.
    RepeatedTensor(usize),
    /// A tensor nothing reads.
    UnknownTensor,
    /// A tensor's dimensions swapped or changed (with its data).
    Dims(usize, Vec<u64>),
}

impl Change {
    fn keeps_the_model(&self) -> bool {
        matches!(self, Change::Reorder(_) | Change::GeneralKey(_))
    }
}

fn change(n_tensors: usize) -> impl Strategy<Value = Change> {
    prop_oneof![
        Just((0..n_tensors).collect::<Vec<_>>())
            .prop_shuffle()
            .prop_map(Change::Reorder),
        "[a-z]{1,8}".prop_map(Change::GeneralKey),
        (0..REQUIRED.len()).prop_map(Change::MissingKey),
        (0..REQUIRED.len()).prop_map(Change::KeyAsText),
        // Sizes and counts: block count, widths, head counts (not the context length, which
        // only bounds the input, nor the norm's epsilon).
        (1usize..6, prop_oneof![-2i64..0, 1i64..3]).prop_map(|(k, d)| Change::SizeOff(k, d)),
        (0..REQUIRED.len()).prop_map(Change::RepeatedKey),
        (0..n_tensors).prop_map(Change::MissingTensor),
        (0..n_tensors).prop_map(Change::RepeatedTensor),
        Just(Change::UnknownTensor),
        (0..n_tensors, prop::collection::vec(1u64..200, 1..3))
            .prop_map(|(i, d)| Change::Dims(i, d)),
    ]
}

/// The tiny GGUF with `change` applied, and what it means (a dimension change to the same
/// dimensions keeps the model).
fn rewrite(original: &GgufFile, change: &Change) -> (Vec<u8>, Meaning) {
    let mut keeps = change.keeps_the_model();
    let mut tied_head = false;
    let mut metadata: Vec<(String, MetadataValue)> = original
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut tensors: Vec<(String, Vec<u64>, _, Vec<u8>)> = original
        .tensors
        .iter()
        .map(|t| {
            let bytes = original.tensor_bytes(&t.name).unwrap().to_vec();
            (t.name.clone(), t.dims.clone(), t.ty, bytes)
        })
        .collect();
    let position = |metadata: &[(String, MetadataValue)], key: &str| {
        metadata.iter().position(|(k, _)| k == key).unwrap()
    };
    match change {
        Change::Reorder(order) => tensors = order.iter().map(|&i| tensors[i].clone()).collect(),
        Change::GeneralKey(value) => {
            metadata.push(("general.note".into(), MetadataValue::String(value.clone())))
        }
        Change::MissingKey(k) => {
            let at = position(&metadata, REQUIRED[*k]);
            metadata.remove(at);
        }
        Change::KeyAsText(k) => {
            let at = position(&metadata, REQUIRED[*k]);
            metadata[at].1 = MetadataValue::String("12".into());
            // The architecture as text is what it is; another name is refused.
            if *k == 0 {
                metadata[at].1 = MetadataValue::String("llama2".into());
            }
        }
        Change::SizeOff(k, delta) => {
            let at = position(&metadata, REQUIRED[*k]);
            let value = metadata[at].1.as_u64().unwrap() as i64 + delta;
            metadata[at].1 = MetadataValue::U32(value.max(0) as u32);
        }
        Change::RepeatedKey(k) => {
            let at = position(&metadata, REQUIRED[*k]);
            let entry = metadata[at].clone();
            metadata.push(entry);
        }
        Change::MissingTensor(i) => {
            // Without `output.weight` the file means a model whose head is tied to the embedding
            // (llama.cpp's convention, SmolLM2's file): another model, loaded as such.
            if tensors[*i].0 == "output.weight" {
                tied_head = true;
            }
            tensors.remove(*i);
        }
        Change::RepeatedTensor(i) => {
            let entry = tensors[*i].clone();
            tensors.push(entry);
        }
        Change::UnknownTensor => {
            let mut extra = tensors[0].clone();
            extra.0 = "blk.0.attn_extra.weight".into();
            tensors.push(extra);
        }
        Change::Dims(i, dims) => {
            // The same dimensions drawn again change nothing (the tensor keeps its values).
            keeps = *dims == tensors[*i].1;
            if !keeps {
                let n: u64 = dims.iter().product();
                let t = &mut tensors[*i];
                t.1 = dims.clone();
                t.3 = vec![0u8; n as usize * 4];
            }
        }
    }
    let mut writer = GgufWriter::new();
    for (key, value) in metadata {
        writer = writer.metadata(&key, value);
    }
    for (name, dims, ty, bytes) in tensors {
        writer = writer.tensor(&name, &dims, ty, bytes);
    }
    let meaning = match (keeps, tied_head) {
        (true, _) => Meaning::Same,
        (false, true) => Meaning::TiedHead,
        (false, false) => Meaning::Refused,
    };
    (writer.to_bytes(), meaning)
}

/// What a changed file means.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Meaning {
    /// The fixture's model: the same logits.
    Same,
    /// The fixture's model with its LM head tied to the embedding: a load, other logits.
    TiedHead,
    /// Nothing a loader may build: a typed error.
    Refused,
}

/// The tensor a change names, if it names one.
fn named(original: &GgufFile, change: &Change) -> String {
    match change {
        Change::MissingTensor(i) | Change::RepeatedTensor(i) | Change::Dims(i, _) => {
            original.tensors[*i].name.clone()
        }
        _ => String::new(),
    }
}

/// Next-token logits of the model in `path` on a fixed input.
fn logits(path: &Path) -> Result<Vec<f32>, AuxError> {
    let model = load_model::<TestBackend>(path, &Default::default())?;
    let ids = Tensor::<TestBackend, 2, Int>::from_data(
        TensorData::new((0..10i64).map(|i| (i * 13 + 3) % 97).collect(), [1, 10]),
        &Default::default(),
    );
    Ok(model.forward(ids)?.into_data().to_vec().unwrap())
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tint-gguf-prop-{}-{name}.gguf", std::process::id()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn a_changed_gguf_loads_the_same_model_or_is_refused(change in change(N_TENSORS)) {
        let original_bytes = tiny_gguf("tiny", "gpt2");
        let original = GgufFile::from_bytes(original_bytes.clone()).unwrap();
        prop_assume!(original.tensors.len() == N_TENSORS);
        let reference = scratch("reference");
        std::fs::write(&reference, &original_bytes).unwrap();
        let expected = logits(&reference).unwrap();
        let (bytes, meaning) = rewrite(&original, &change);
        let changed = scratch("changed");
        std::fs::write(&changed, bytes).unwrap();
        let what = format!("{change:?} ({})", named(&original, &change));
        match (logits(&changed), meaning) {
            (Ok(got), Meaning::Same) => prop_assert!(got == expected, "{what}: other logits"),
            (Ok(got), Meaning::TiedHead) => prop_assert!(got != expected, "{what}: same logits"),
            (Err(_), Meaning::Refused) => {}
            (Ok(_), Meaning::Refused) => prop_assert!(false, "{what} was loaded"),
            (Err(e), _) => prop_assert!(false, "{what} was refused: {e}"),
        }
    }
}

/// Tensors of the tiny untied LLaMA: embedding, final norm, LM head, 9 per block for 2 blocks.
const N_TENSORS: usize = 21;

/// Generated files (each a load and a forward of the tiny LLaMA, a few milliseconds).
const CASES: u32 = 300;
