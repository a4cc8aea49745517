//! The GGUF reader on small files written by the test: every metadata value type, alignment, dim order,
//! hand-written quantised blocks, and typed errors for truncated or corrupted files.

use half::f16;
use tint_aux::gguf::{GgmlType, GgufError, GgufFile, GgufWriter, MetadataValue};
use tint_aux::llama::load_llama_gguf;
use tint_aux::AuxError;

type TestBackend = burn::backend::Flex;

fn all_value_types() -> Vec<(&'static str, MetadataValue)> {
    use MetadataValue as V;
    vec![
        ("t.u8", V::U8(200)),
        ("t.i8", V::I8(-5)),
        ("t.u16", V::U16(60000)),
        ("t.i16", V::I16(-30000)),
        ("t.u32", V::U32(4_000_000_000)),
        ("t.i32", V::I32(-2_000_000_000)),
        ("t.f32", V::F32(1.25)),
        ("t.bool", V::Bool(true)),
        ("t.string", V::String("héllo".into())),
        ("t.u64", V::U64(u64::MAX)),
        ("t.i64", V::I64(i64::MIN)),
        ("t.f64", V::F64(-0.1)),
        ("t.array", V::Array(vec![V::I32(1), V::I32(-2), V::I32(3)])),
        (
            "t.nested",
            V::Array(vec![
                V::Array(vec![V::String("a".into())]),
                V::Array(vec![V::String("b".into()), V::String("c".into())]),
            ]),
        ),
    ]
}

/// A Q8_0 block with d = 0.5 and q = i − 16, so element i is (i − 16) / 2.
fn q8_0_block() -> Vec<u8> {
    let mut block = f16::from_f32(0.5).to_le_bytes().to_vec();
    block.extend((0..32).map(|i| (i as i8 - 16) as u8));
    block
}

/// A Q4_1 block with d = 0.25, m = −1 and nibble of element i equal to i % 16, so element i is (i % 16)/4 − 1.
fn q4_1_block() -> Vec<u8> {
    let mut block = f16::from_f32(0.25).to_le_bytes().to_vec();
    block.extend(f16::from_f32(-1.0).to_le_bytes());
    block.extend((0..16u8).map(|j| (j << 4) | j));
    block
}

/// A Q4_0 block with d = 3 and nibble j in byte j's low half, 15 − j in its high half.
fn q4_0_block() -> Vec<u8> {
    let mut block = f16::from_f32(3.0).to_le_bytes().to_vec();
    block.extend((0..16u8).map(|j| ((15 - j) << 4) | j));
    block
}

fn sample_writer() -> GgufWriter {
    let mut writer = GgufWriter::new().metadata("general.alignment", MetadataValue::U32(64));
    for (key, value) in all_value_types() {
        writer = writer.metadata(key, value);
    }
    writer
        // Row-major [2, 3]: GGUF dims [3, 2].
        .tensor_f32("matrix", &[2, 3], &[0.0, 1.0, 2.0, 10.0, 11.0, 12.0])
        .tensor(
            "q8",
            &[32, 2],
            GgmlType::Q8_0,
            [q8_0_block(), q8_0_block()].concat(),
        )
        .tensor("q4_1", &[32], GgmlType::Q4_1, q4_1_block())
        .tensor("q4_0", &[32], GgmlType::Q4_0, q4_0_block())
}

#[test]
fn metadata_of_every_type_round_trips() {
    let file = GgufFile::from_bytes(sample_writer().to_bytes()).unwrap();
    assert_eq!(file.version, 3);
    for (key, value) in all_value_types() {
        assert_eq!(file.get(key).unwrap(), &value, "{key}");
    }
    assert_eq!(file.get_u64("t.u32").unwrap(), 4_000_000_000);
    assert_eq!(file.get_str("t.string").unwrap(), "héllo");
    assert_eq!(file.get_f64("t.f32").unwrap(), 1.25);
    assert!(file.get_bool("t.bool").unwrap());
    assert_eq!(file.get_array("t.array").unwrap().len(), 3);
}

#[test]
fn alignment_dim_order_and_tensor_data() {
    let file = GgufFile::from_bytes(sample_writer().to_bytes()).unwrap();
    assert_eq!(file.alignment, 64);
    assert_eq!(file.data_offset % 64, 0);
    let matrix = file.tensor_info("matrix").unwrap();
    assert_eq!(matrix.dims, vec![3, 2], "GGUF stores innermost first");
    let matrix = file.tensor_f32("matrix").unwrap();
    assert_eq!(matrix.shape, vec![2, 3]);
    assert_eq!(matrix.data, vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
    for info in &file.tensors {
        assert_eq!(info.offset % 64, 0, "{} is aligned", info.name);
    }

    let q8 = file.tensor_f32("q8").unwrap();
    assert_eq!(q8.shape, vec![2, 32]);
    for i in 0..64 {
        assert_eq!(q8.data[i], ((i % 32) as f32 - 16.0) / 2.0, "q8 element {i}");
    }
    let q4_1 = file.tensor_f32("q4_1").unwrap();
    for i in 0..32 {
        assert_eq!(
            q4_1.data[i],
            (i % 16) as f32 * 0.25 - 1.0,
            "q4_1 element {i}"
        );
    }
    let q4_0 = file.tensor_f32("q4_0").unwrap();
    for j in 0..16 {
        assert_eq!(q4_0.data[j], 3.0 * (j as f32 - 8.0), "q4_0 low nibble {j}");
        assert_eq!(
            q4_0.data[j + 16],
            3.0 * (7.0 - j as f32),
            "q4_0 high nibble {j}"
        );
    }
}

#[test]
fn default_alignment_is_32() {
    let bytes = GgufWriter::new()
        .metadata("x", MetadataValue::U8(1))
        .tensor_f32("v", &[3], &[1.0, 2.0, 3.0])
        .to_bytes();
    let file = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!((file.alignment, file.data_offset % 32), (32, 0));
    assert_eq!(file.tensor_f32("v").unwrap().data, vec![1.0, 2.0, 3.0]);
}

#[test]
fn every_truncation_is_a_typed_error() {
    let bytes = sample_writer().to_bytes();
    for len in 0..bytes.len() {
        match GgufFile::from_bytes(bytes[..len].to_vec()) {
            Err(GgufError::Truncated { .. }) | Err(GgufError::TensorOutOfBounds { .. }) => {}
            other => panic!("prefix of {len} bytes: {other:?}"),
        }
    }
    // Cutting inside the header or metadata is reported as truncation, naming the field.
    let err = GgufFile::from_bytes(bytes[..30].to_vec()).unwrap_err();
    assert!(
        matches!(&err, GgufError::Truncated { offset: 24, .. }),
        "{err}"
    );
}

/// Offset of the tensor-info fields (n_dims) of `name` in `bytes`.
fn tensor_info_offset(bytes: &[u8], name: &str) -> usize {
    let mut needle = (name.len() as u64).to_le_bytes().to_vec();
    needle.extend(name.as_bytes());
    bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .unwrap()
        + needle.len()
}

#[test]
fn corrupt_files_are_typed_errors() {
    let bytes = sample_writer().to_bytes();

    let mut bad = bytes.clone();
    bad[..4].copy_from_slice(b"GGML");
    assert!(
        matches!(GgufFile::from_bytes(bad), Err(GgufError::BadMagic { found }) if &found == b"GGML")
    );

    for version in [1u32, 4] {
        let mut bad = bytes.clone();
        bad[4..8].copy_from_slice(&version.to_le_bytes());
        assert!(matches!(
            GgufFile::from_bytes(bad),
            Err(GgufError::UnsupportedVersion { version: v }) if v == version
        ));
    }

    // The "matrix" info: n_dims u32, dims 2 × u64, type u32, offset u64.
    let at = tensor_info_offset(&bytes, "matrix");
    let mut bad = bytes.clone();
    bad[at + 24..at + 32].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(
        matches!(GgufFile::from_bytes(bad), Err(GgufError::TensorOutOfBounds { tensor, .. }) if tensor == "matrix")
    );

    let mut bad = bytes.clone();
    bad[at + 4..at + 12].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        GgufFile::from_bytes(bad),
        Err(GgufError::BadTensorShape { .. })
    ));

    let mut bad = bytes.clone();
    bad[at + 20..at + 24].copy_from_slice(&99u32.to_le_bytes());
    let err = GgufFile::from_bytes(bad).unwrap_err();
    assert!(
        matches!(&err, GgufError::UnknownTensorType { type_id: 99, tensor } if tensor == "matrix"),
        "{err}"
    );

    // An unknown metadata value type: the type id of the first key ("general.alignment", 17 bytes).
    let mut bad = bytes.clone();
    let type_at = 24 + 8 + "general.alignment".len();
    bad[type_at..type_at + 4].copy_from_slice(&77u32.to_le_bytes());
    assert!(matches!(
        GgufFile::from_bytes(bad),
        Err(GgufError::UnknownValueType { type_id: 77, .. })
    ));

    // A non-power-of-two alignment.
    let bad = GgufWriter::new()
        .metadata("general.alignment", MetadataValue::U32(48))
        .to_bytes();
    assert!(matches!(
        GgufFile::from_bytes(bad),
        Err(GgufError::BadAlignment { alignment: 48 })
    ));
}

#[test]
fn known_but_unsupported_types_and_missing_things_are_typed_errors() {
    let file = GgufFile::from_bytes(
        GgufWriter::new()
            .metadata(
                "general.architecture",
                MetadataValue::String("llama".into()),
            )
            .metadata("n", MetadataValue::String("not a number".into()))
            .tensor("k_quant", &[256], GgmlType::Q4K, vec![0; 144])
            .to_bytes(),
    )
    .unwrap();
    let err = file.tensor_f32("k_quant").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsupported type Q4_K in tensor \"k_quant\" (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)"
    );
    assert!(matches!(
        file.tensor_f32("nope"),
        Err(GgufError::MissingTensor { .. })
    ));
    assert!(
        matches!(file.get_u64("nope"), Err(GgufError::MissingMetadata { key }) if key == "nope")
    );
    assert!(matches!(
        file.get_u64("n"),
        Err(GgufError::MetadataType {
            expected: "unsigned integer",
            found: "string",
            ..
        })
    ));

    // A llama file without its hyper-parameters fails with the missing key.
    let path = std::env::temp_dir().join(format!("tint-gguf-missing-{}.gguf", std::process::id()));
    std::fs::write(&path, file_bytes_without_block_count()).unwrap();
    let err = load_llama_gguf::<TestBackend>(&path, &Default::default()).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(
        matches!(&err, AuxError::Gguf(GgufError::MissingMetadata { key }) if key == "llama.embedding_length"),
        "{err}"
    );
    assert!(matches!(
        load_llama_gguf::<TestBackend>(
            std::path::Path::new("/nonexistent/x.gguf"),
            &Default::default()
        ),
        Err(AuxError::Gguf(GgufError::Io { .. }))
    ));
}

fn file_bytes_without_block_count() -> Vec<u8> {
    GgufWriter::new()
        .metadata(
            "general.architecture",
            MetadataValue::String("llama".into()),
        )
        .to_bytes()
}
