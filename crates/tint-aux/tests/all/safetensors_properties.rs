//! Property-based tests of the safetensors checkpoint reader (issue 66 item 6): the tiny GPT-2's
//! file rebuilt with structured changes — tensors stored in another order, metadata, ignorable
//! buffers added or the unknown tensors, dtypes, shapes, byte ranges, header lengths, repeated and
//! missing names that change its meaning — and loaded through `load_model`. An oracle says which
//! changes keep the model the file means: those must load to the same logits to the bit; every
//! other must be refused with a typed error. Never a panic, never a load of other weights.

use std::path::{Path, PathBuf};

use burn::tensor::{Int, Tensor, TensorData};
use proptest::prelude::*;

use crate::common::{aux_fixture, TestBackend};
use tint_aux::{load_model, AuxError};

/// One stored tensor: name, dtype, shape and bytes.
#[derive(Debug, Clone)]
struct Stored {
    name: String,
    dtype: String,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

/// The fixture's tensors in file order.
fn original() -> Vec<Stored> {
    let bytes = std::fs::read(aux_fixture("gpt2-tiny").join("model.safetensors")).unwrap();
    let length = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + length]).unwrap();
    let data = &bytes[8 + length..];
    let mut stored: Vec<(usize, Stored)> = header
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .map(|(name, entry)| {
            let offsets: Vec<usize> =
                serde_json::from_value(entry["data_offsets"].clone()).unwrap();
            let stored = Stored {
                name: name.clone(),
                dtype: entry["dtype"].as_str().unwrap().to_string(),
                shape: serde_json::from_value(entry["shape"].clone()).unwrap(),
                bytes: data[offsets[0]..offsets[1]].to_vec(),
            };
            (offsets[0], stored)
        })
        .collect();
    stored.sort_by_key(|(begin, _)| *begin);
    stored.into_iter().map(|(_, s)| s).collect()
}

/// A change to the file, and whether the model it means stays the fixture's.
#[derive(Debug, Clone)]
enum Change {
    /// Tensors stored in another order (header and data): same model.
    Reorder(Vec<usize>),
    /// A `__metadata__` entry: same model.
    Metadata(String),
    /// GPT-2's causal-mask buffer of a block, which the loader ignores by name: same model.
    IgnorableBuffer(usize),
    /// A tensor nothing reads.
    UnknownTensor,
    /// A tensor's dtype named otherwise.
    Dtype(usize, &'static str),
    /// A tensor's shape changed (same number of values or not).
    Shape(usize, Vec<usize>),
    /// A tensor's end offset moved by a non-zero amount.
    Offset(usize, i64),
    /// The header length prefix off by a non-zero amount.
    HeaderLength(i64),
    /// A tensor's name twice in the header.
    Repeated(usize),
    /// A tensor left out.
    Missing(usize),
}

impl Change {
    fn keeps_the_model(&self) -> bool {
        matches!(
            self,
            Change::Reorder(_) | Change::Metadata(_) | Change::IgnorableBuffer(_)
        )
    }
}

fn change(n: usize) -> impl Strategy<Value = Change> {
    prop_oneof![
        Just((0..n).collect::<Vec<_>>())
            .prop_shuffle()
            .prop_map(Change::Reorder),
        "[a-z]{1,8}".prop_map(Change::Metadata),
        (0usize..2).prop_map(Change::IgnorableBuffer),
        Just(Change::UnknownTensor),
        (
            0..n,
            prop::sample::select(vec![
                "F16", "BF16", "F64", "I64", "U8", "BOOL", "F8_E4M3", "Q4"
            ])
        )
            .prop_map(|(i, d)| Change::Dtype(i, d)),
        (0..n, prop::collection::vec(0usize..200, 0..4)).prop_map(|(i, s)| Change::Shape(i, s)),
        (0..n, prop_oneof![-8i64..0, 1i64..9]).prop_map(|(i, d)| Change::Offset(i, d * 4)),
        prop_oneof![-16i64..0, 1i64..17].prop_map(Change::HeaderLength),
        (0..n).prop_map(Change::Repeated),
        (0..n).prop_map(Change::Missing),
    ]
}

/// The file of `tensors` with `change` applied, and whether it still means the fixture's model
/// (a shape change to the same shape, for one, keeps it).
fn rebuild(mut tensors: Vec<Stored>, change: &Change) -> (Vec<u8>, bool) {
    let mut keeps = change.keeps_the_model();
    let mut metadata = "{\"format\":\"pt\"}".to_string();
    let mut repeated = None;
    let (mut offset_change, mut length_change) = (None, 0i64);
    match change {
        Change::Reorder(order) => tensors = order.iter().map(|&i| tensors[i].clone()).collect(),
        Change::Metadata(value) => metadata = format!("{{\"format\":\"pt\",\"note\":{value:?}}}"),
        Change::IgnorableBuffer(block) => tensors.push(Stored {
            name: format!("transformer.h.{block}.attn.bias"),
            dtype: "F32".into(),
            shape: vec![1, 1, 4, 4],
            bytes: vec![0; 64],
        }),
        Change::UnknownTensor => tensors.push(Stored {
            name: "transformer.h.0.attn.extra".into(),
            dtype: "F32".into(),
            shape: vec![2],
            bytes: vec![0; 8],
        }),
        Change::Dtype(i, dtype) => tensors[*i].dtype = (*dtype).to_string(),
        Change::Shape(i, shape) => {
            keeps = *shape == tensors[*i].shape;
            tensors[*i].shape = shape.clone();
        }
        Change::Offset(i, delta) => offset_change = Some((*i, *delta)),
        Change::HeaderLength(delta) => length_change = *delta,
        Change::Repeated(i) => repeated = Some(*i),
        Change::Missing(i) => {
            tensors.remove(*i);
        }
    }
    let mut entries = vec![format!("\"__metadata__\":{metadata}")];
    let mut data = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        let begin = data.len();
        data.extend_from_slice(&t.bytes);
        let mut end = data.len() as i64;
        if let Some((j, delta)) = offset_change {
            if i == j {
                end += delta;
            }
        }
        let entry = format!(
            "{:?}:{{\"dtype\":{:?},\"shape\":{:?},\"data_offsets\":[{begin},{end}]}}",
            t.name, t.dtype, t.shape
        );
        entries.push(entry.clone());
        if repeated == Some(i) {
            entries.push(entry);
        }
    }
    let header = format!("{{{}}}", entries.join(","));
    let length = (header.len() as i64 + length_change).max(0) as u64;
    let mut file = length.to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data);
    (file, keeps)
}

/// Next-token logits of `dir`'s model on a fixed input.
fn logits(dir: &Path) -> Result<Vec<f32>, AuxError> {
    let model = load_model::<TestBackend>(dir, &Default::default())?;
    let ids = Tensor::<TestBackend, 2, Int>::from_data(
        TensorData::new((0..12i64).map(|i| (i * 37 + 5) % 512).collect(), [1, 12]),
        &Default::default(),
    );
    Ok(model.forward(ids)?.into_data().to_vec().unwrap())
}

/// A scratch model directory with the fixture's config.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tint-safetensors-prop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        aux_fixture("gpt2-tiny").join("config.json"),
        dir.join("config.json"),
    )
    .unwrap();
    dir
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn a_changed_checkpoint_loads_the_same_model_or_is_refused(change in change(28)) {
        let tensors = original();
        prop_assume!(tensors.len() == 28);
        let expected = logits(&aux_fixture("gpt2-tiny")).unwrap();
        let dir = scratch();
        let (file, keeps) = rebuild(tensors, &change);
        std::fs::write(dir.join("model.safetensors"), file).unwrap();
        match (logits(&dir), keeps) {
            (Ok(got), true) => prop_assert!(got == expected, "{change:?}: other logits"),
            (Err(_), false) => {}
            (Ok(_), false) => prop_assert!(false, "{change:?} was loaded"),
            (Err(e), true) => prop_assert!(false, "{change:?} was refused: {e}"),
        }
    }
}

/// Generated files (each a load and a forward of the tiny GPT-2, a few milliseconds).
const CASES: u32 = 300;
