//! Seeded mutation suite: for every file format the auxiliary-model crate reads (safetensors + config.json,
//! GGUF, the tokenizer files, the token-ids JSON), at least 1,000 mutants of a valid file — truncation at
//! every structural boundary, byte flips, huge counts/lengths/dims, overlapping offsets, deep nesting — must
//! each give a typed error or a correct load, and never a panic (counted with `catch_unwind`).
//!
//! Figures are in docs/reliability.md. Seeds are fixed (`StdRng::seed_from_u64`), so a failure names the
//! mutant and replays.
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use crate::common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tint_aux::gguf::{GgmlType, GgufFile, GgufWriter, MetadataValue};
use tint_aux::tokenizer::AuxTokenizer;
use tint_aux::{load_model, AuxModel, TokenIds};

type B = common::TestBackend;

/// Every format gets at least this many mutants.
const MIN_MUTANTS: usize = 1000;

/// Values written over counts, lengths, dims and offsets.
const HUGE: [u64; 9] = [
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    1_000_000_000,
    1 << 40,
    1 << 62,
    1 << 63,
    1_000_000_000_000_000_000,
    u64::MAX,
];

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("tint-aux-mutation")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Outcome counts of one format's mutants.
#[derive(Debug, Default)]
struct Tally {
    mutants: usize,
    loaded: usize,
    errors: usize,
    panics: Vec<String>,
}

impl Tally {
    /// Runs `load` on one mutant (described by `what`), counting a load, a typed error or a panic.
    fn run<E: std::fmt::Display>(&mut self, what: &str, load: impl FnOnce() -> Result<(), E>) {
        self.mutants += 1;
        match catch_unwind(AssertUnwindSafe(load)) {
            Ok(Ok(())) => self.loaded += 1,
            Ok(Err(error)) => {
                // A typed error must say something.
                assert!(!error.to_string().is_empty(), "{what}: empty error message");
                self.errors += 1;
            }
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                self.panics.push(format!("{what}: {message}"));
            }
        }
    }

    fn finish(self, format: &str) {
        println!(
            "{format}: {} mutants, {} loaded, {} typed errors, {} panics",
            self.mutants,
            self.loaded,
            self.errors,
            self.panics.len()
        );
        assert!(
            self.mutants >= MIN_MUTANTS,
            "{format}: {} mutants",
            self.mutants
        );
        assert!(
            self.panics.is_empty(),
            "{format}: {} panics, e.g. {:?}",
            self.panics.len(),
            &self.panics[..self.panics.len().min(5)]
        );
    }
}

/// A byte-level mutation of `base`: flips, random truncation, a huge value over 4 or 8 bytes at one of
/// `fields` (or anywhere), or a duplicated slice.
fn byte_mutant(base: &[u8], fields: &[usize], rng: &mut StdRng) -> (String, Vec<u8>) {
    let mut bytes = base.to_vec();
    let kind = rng.random_range(0..5);
    let what = match kind {
        0 => {
            let n = rng.random_range(1..=4);
            for _ in 0..n {
                let at = rng.random_range(0..bytes.len());
                bytes[at] ^= rng.random_range(1..=255u8);
            }
            format!("{n} byte flips")
        }
        1 => {
            let at = rng.random_range(0..bytes.len());
            bytes.truncate(at);
            format!("truncated at {at}")
        }
        2 | 3 => {
            let at = if fields.is_empty() || kind == 3 {
                rng.random_range(0..bytes.len().saturating_sub(8).max(1))
            } else {
                fields[rng.random_range(0..fields.len())]
            };
            let value = HUGE[rng.random_range(0..HUGE.len())];
            let width = if rng.random_bool(0.5) { 8 } else { 4 };
            let raw = value.to_le_bytes();
            let at = at.min(bytes.len() - 1);
            let end = (at + width).min(bytes.len());
            let len = end - at;
            bytes[at..end].copy_from_slice(&raw[..len]);
            format!("{value} over {width} bytes at {at}")
        }
        _ => {
            let from = rng.random_range(0..bytes.len());
            let len = rng.random_range(1..=64).min(bytes.len() - from);
            let to = rng.random_range(0..bytes.len());
            let slice = bytes[from..from + len].to_vec();
            bytes.splice(to..to, slice);
            format!("{len} bytes from {from} inserted at {to}")
        }
    };
    (what, bytes)
}

// ---------------------------------------------------------------------------------------------------
// safetensors + config.json

/// Byte offsets of the safetensors structure: the 8-byte header length, the header's JSON tokens, the
/// data section and each tensor's data range.
fn safetensors_boundaries(bytes: &[u8]) -> Vec<usize> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let mut out: Vec<usize> = (0..=8).collect();
    // Every structural character of the header JSON.
    out.extend(
        bytes[8..8 + n]
            .iter()
            .enumerate()
            .filter(|(_, b)| b"{}[]:,\"".contains(b))
            .map(|(i, _)| 8 + i),
    );
    for (name, info) in header.as_object().unwrap() {
        if name == "__metadata__" {
            continue;
        }
        for off in info["data_offsets"].as_array().unwrap() {
            out.push(8 + n + off.as_u64().unwrap() as usize);
        }
    }
    out.push(bytes.len());
    out.sort();
    out.dedup();
    out
}

/// A safetensors file with its header JSON edited by `edit`.
fn with_header(bytes: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    edit(&mut header);
    let text = serde_json::to_vec(&header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(&bytes[8 + n..]);
    out
}

/// A header-level mutation: a huge or zero dim, overlapping or huge data offsets, a changed dtype, a
/// removed or renamed tensor, or an extra tensor.
fn header_mutant(bytes: &[u8], rng: &mut StdRng) -> (String, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let names: Vec<String> = header
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| *k != "__metadata__")
        .cloned()
        .collect();
    let name = names[rng.random_range(0..names.len())].clone();
    let other = names[rng.random_range(0..names.len())].clone();
    let kind = rng.random_range(0..6);
    let huge = HUGE[rng.random_range(0..HUGE.len())];
    let mutated = with_header(bytes, |h| {
        let obj = h.as_object_mut().unwrap();
        match kind {
            0 => {
                let shape = obj[&name]["shape"].as_array_mut().unwrap();
                if !shape.is_empty() {
                    let i = rng.random_range(0..shape.len());
                    shape[i] = serde_json::json!(if rng.random_bool(0.2) { 0 } else { huge });
                }
            }
            1 => {
                let theirs = obj[&other]["data_offsets"].clone();
                obj[&name]["data_offsets"] = theirs;
            }
            2 => {
                let i = rng.random_range(0..2);
                obj[&name]["data_offsets"][i] = serde_json::json!(huge);
            }
            3 => {
                let dtypes = ["F16", "BF16", "I64", "U8", "BOOL", "F64", "F8_E4M3", "XX"];
                obj[&name]["dtype"] = serde_json::json!(dtypes[rng.random_range(0..dtypes.len())]);
            }
            4 => {
                let info = obj.remove(&name).unwrap();
                if rng.random_bool(0.5) {
                    obj.insert(format!("{name}.extra"), info);
                }
            }
            _ => {
                let info = obj[&name].clone();
                obj.insert("h.99.attn.c_attn.weight".to_string(), info);
            }
        }
    });
    (
        format!("header mutation {kind} of {name:?} ({huge})"),
        mutated,
    )
}

/// A config.json mutation: a numeric field set to a hostile value, a field removed, or a type changed.
fn config_mutant(text: &str, rng: &mut StdRng) -> (String, String) {
    let mut config: serde_json::Value = serde_json::from_str(text).unwrap();
    let keys: Vec<String> = config.as_object().unwrap().keys().cloned().collect();
    let key = keys[rng.random_range(0..keys.len())].clone();
    let values = [
        serde_json::json!(0),
        serde_json::json!(-1),
        serde_json::json!(1_000_000_000u64),
        serde_json::json!(1_000_000_000_000_000_000u64),
        serde_json::json!(u64::MAX),
        serde_json::json!(1 << 31),
        serde_json::json!(1e300),
        serde_json::json!(-1e-5),
        serde_json::json!(0.0),
        serde_json::json!("text"),
        serde_json::json!(null),
        serde_json::json!([1, 2]),
        serde_json::json!(3),
    ];
    let obj = config.as_object_mut().unwrap();
    let what = if rng.random_bool(0.15) {
        obj.remove(&key);
        format!("{key} removed")
    } else {
        let value = values[rng.random_range(0..values.len())].clone();
        let what = format!("{key} = {value}");
        obj.insert(key, value);
        what
    };
    (what, serde_json::to_string(&config).unwrap())
}

fn check_model_dir(dir: &Path) -> Result<(), tint_aux::AuxError> {
    let model: AuxModel<B> = load_model(dir, &Default::default())?;
    // A load that succeeds must give a usable model.
    assert!(model.vocab_size() > 0 && model.n_layers() > 0);
    Ok(())
}

#[test]
fn safetensors_and_config_mutants_never_panic() {
    let mut rng = StdRng::seed_from_u64(20);
    let mut tally = Tally::default();
    for fixture in ["gpt2-tiny", "opt-post-ln-proj"] {
        let source = common::aux_fixture(fixture);
        let weights = std::fs::read(source.join("model.safetensors")).unwrap();
        let config = std::fs::read_to_string(source.join("config.json")).unwrap();
        let dir = scratch(fixture);
        let write = |config: &str, weights: &[u8]| {
            std::fs::write(dir.join("config.json"), config).unwrap();
            std::fs::write(dir.join("model.safetensors"), weights).unwrap();
        };
        // The unmutated files load.
        write(&config, &weights);
        check_model_dir(&dir).unwrap();
        // Truncation at every structural boundary.
        for at in safetensors_boundaries(&weights) {
            write(&config, &weights[..at]);
            tally.run(&format!("{fixture}: truncated at {at}"), || {
                check_model_dir(&dir)
            });
        }
        for i in 0..900 {
            let (what, config_text, weight_bytes) = match i % 3 {
                0 => {
                    let (what, bytes) = header_mutant(&weights, &mut rng);
                    (what, config.clone(), bytes)
                }
                1 => {
                    let (what, text) = config_mutant(&config, &mut rng);
                    (what, text, weights.clone())
                }
                _ => {
                    // Byte mutations concentrated on the header (the data is only values).
                    let n = u64::from_le_bytes(weights[..8].try_into().unwrap()) as usize;
                    let (what, mut bytes) =
                        byte_mutant(&weights[..8 + n], &(0..8).collect::<Vec<_>>(), &mut rng);
                    bytes.extend_from_slice(&weights[8 + n..]);
                    (what, config.clone(), bytes)
                }
            };
            write(&config_text, &weight_bytes);
            tally.run(&format!("{fixture}: {what}"), || check_model_dir(&dir));
        }
    }
    tally.finish("safetensors + config.json");
}

// ---------------------------------------------------------------------------------------------------
// GGUF

/// A tiny LLaMA GGUF (d_model 32, 2 blocks, vocab 97 byte-level tokens with 2 merges, one Q8_0 tensor
/// per block).
fn tiny_gguf() -> Vec<u8> {
    let (d, ff, vocab, layers) = (32usize, 32usize, 97usize, 2usize);
    let mut tokens: Vec<String> = (33u8..127).map(|b| (b as char).to_string()).collect();
    tokens.extend(["Ġ", "Ġt", "Ġ1"].map(String::from));
    let mut writer = GgufWriter::new()
        .metadata(
            "general.architecture",
            MetadataValue::String("llama".into()),
        )
        .metadata("llama.block_count", MetadataValue::U32(layers as u32))
        .metadata("llama.context_length", MetadataValue::U32(32))
        .metadata("llama.embedding_length", MetadataValue::U32(d as u32))
        .metadata("llama.feed_forward_length", MetadataValue::U32(ff as u32))
        .metadata("llama.attention.head_count", MetadataValue::U32(2))
        .metadata("llama.attention.head_count_kv", MetadataValue::U32(1))
        .metadata("llama.rope.freq_base", MetadataValue::F32(10000.0))
        .metadata(
            "llama.attention.layer_norm_rms_epsilon",
            MetadataValue::F32(1e-5),
        )
        .metadata("tokenizer.ggml.model", MetadataValue::String("gpt2".into()))
        .metadata("tokenizer.ggml.pre", MetadataValue::String("smollm".into()))
        .metadata(
            "tokenizer.ggml.tokens",
            MetadataValue::Array(tokens.into_iter().map(MetadataValue::String).collect()),
        )
        .metadata(
            "tokenizer.ggml.merges",
            MetadataValue::Array(vec![
                MetadataValue::String("Ġ t".into()),
                MetadataValue::String("Ġ 1".into()),
            ]),
        )
        .metadata("tokenizer.ggml.bos_token_id", MetadataValue::U32(3));
    let values = |n: usize| -> Vec<f32> { (0..n).map(|i| ((i % 7) as f32 - 3.0) * 0.05).collect() };
    writer = writer.tensor_f32("token_embd.weight", &[vocab, d], &values(vocab * d));
    writer = writer.tensor_f32("output_norm.weight", &[d], &vec![1.0; d]);
    for l in 0..layers {
        let t = |name: &str| format!("blk.{l}.{name}.weight");
        writer = writer
            .tensor_f32(&t("attn_norm"), &[d], &vec![1.0; d])
            .tensor_f32(&t("ffn_norm"), &[d], &vec![1.0; d])
            .tensor_f32(&t("attn_q"), &[d, d], &values(d * d))
            .tensor_f32(&t("attn_k"), &[d / 2, d], &values(d * d / 2))
            .tensor_f32(&t("attn_v"), &[d / 2, d], &values(d * d / 2))
            .tensor_f32(&t("attn_output"), &[d, d], &values(d * d));
        // One quantised tensor per block, so that the block decoders see mutants too.
        let q8: Vec<u8> = (0..ff * d / 32)
            .flat_map(|b| {
                let mut block = half::f16::from_f32(0.01 * (b + 1) as f32)
                    .to_le_bytes()
                    .to_vec();
                block.extend((0..32).map(|i| (i as i8 - 16) as u8));
                block
            })
            .collect();
        writer = writer
            .tensor(&t("ffn_gate"), &[d as u64, ff as u64], GgmlType::Q8_0, q8)
            .tensor_f32(&t("ffn_up"), &[ff, d], &values(ff * d))
            .tensor_f32(&t("ffn_down"), &[d, ff], &values(ff * d));
    }
    writer.to_bytes()
}

/// Offsets of every GGUF field (header counts, key/name lengths, type ids, array lengths, dims, tensor
/// offsets) and every field boundary, found by walking the file.
struct GgufLayout {
    boundaries: Vec<usize>,
    u64_fields: Vec<usize>,
    tensor_offsets: Vec<usize>,
}

fn gguf_layout(bytes: &[u8]) -> GgufLayout {
    let mut pos = 0usize;
    let mut layout = GgufLayout {
        boundaries: vec![0, 4],
        u64_fields: vec![],
        tensor_offsets: vec![],
    };
    let u32_at = |p: usize| u32::from_le_bytes(bytes[p..p + 4].try_into().unwrap());
    let u64_at = |p: usize| u64::from_le_bytes(bytes[p..p + 8].try_into().unwrap()) as usize;
    pos += 8;
    layout.boundaries.push(pos);
    let n_tensors = u64_at(pos);
    let n_meta = u64_at(pos + 8);
    layout.u64_fields.extend([pos, pos + 8]);
    pos += 16;
    fn value(
        pos: &mut usize,
        ty: u32,
        layout: &mut GgufLayout,
        u32_at: &dyn Fn(usize) -> u32,
        u64_at: &dyn Fn(usize) -> usize,
    ) {
        layout.boundaries.push(*pos);
        match ty {
            0 | 1 | 7 => *pos += 1,
            2 | 3 => *pos += 2,
            4..=6 => *pos += 4,
            10..=12 => *pos += 8,
            8 => {
                layout.u64_fields.push(*pos);
                *pos += 8 + u64_at(*pos);
            }
            9 => {
                let element = u32_at(*pos);
                layout.u64_fields.push(*pos + 4);
                let n = u64_at(*pos + 4);
                *pos += 12;
                for _ in 0..n {
                    value(pos, element, layout, u32_at, u64_at);
                }
            }
            _ => unreachable!(),
        }
        layout.boundaries.push(*pos);
    }
    for _ in 0..n_meta {
        layout.u64_fields.push(pos);
        pos += 8 + u64_at(pos);
        layout.boundaries.push(pos);
        let ty = u32_at(pos);
        pos += 4;
        value(&mut pos, ty, &mut layout, &u32_at, &u64_at);
    }
    for _ in 0..n_tensors {
        layout.u64_fields.push(pos);
        pos += 8 + u64_at(pos);
        layout.boundaries.push(pos);
        let n_dims = u32_at(pos) as usize;
        pos += 4;
        for _ in 0..n_dims {
            layout.u64_fields.push(pos);
            pos += 8;
        }
        layout.boundaries.push(pos);
        pos += 4;
        layout.tensor_offsets.push(pos);
        layout.u64_fields.push(pos);
        pos += 8;
        layout.boundaries.push(pos);
    }
    layout.boundaries.push(bytes.len());
    layout.boundaries.sort();
    layout.boundaries.dedup();
    layout
}

fn check_gguf(bytes: &[u8], path: &Path) -> Result<(), tint_aux::AuxError> {
    GgufFile::from_bytes(bytes.to_vec())?;
    std::fs::write(path, bytes).unwrap();
    let loaded = tint_aux::llama::load_llama_gguf::<B>(path, &Default::default())?;
    let ids = loaded.tokenizer.encode("t1 t")?;
    assert!(!ids.is_empty());
    Ok(())
}

/// A metadata array nested `depth` deep, as raw GGUF bytes (one metadata entry, no tensors).
fn nested_array_gguf(depth: usize) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    out.extend(1u64.to_le_bytes());
    out.extend(4u64.to_le_bytes());
    out.extend(b"deep");
    out.extend(9u32.to_le_bytes());
    for _ in 0..depth {
        out.extend(9u32.to_le_bytes()); // element type: array
        out.extend(1u64.to_le_bytes()); // one element
    }
    out.extend(0u32.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    out
}

#[test]
fn gguf_mutants_never_panic() {
    let base = tiny_gguf();
    let dir = scratch("gguf");
    let path = dir.join("m.gguf");
    check_gguf(&base, &path).expect("the unmutated GGUF loads");
    let layout = gguf_layout(&base);
    let mut rng = StdRng::seed_from_u64(21);
    let mut tally = Tally::default();
    // Truncation at every structural boundary of the header and metadata.
    for &at in &layout.boundaries {
        tally.run(&format!("truncated at {at}"), || {
            check_gguf(&base[..at], &path)
        });
    }
    // Every count, length, dim and offset set to every huge value.
    for &field in &layout.u64_fields {
        for value in [1u64 << 31, 1 << 62, u64::MAX] {
            let mut bytes = base.clone();
            bytes[field..field + 8].copy_from_slice(&value.to_le_bytes());
            tally.run(&format!("{value} at {field}"), || check_gguf(&bytes, &path));
        }
    }
    // Overlapping offsets: each tensor given the previous one's offset.
    for pair in layout.tensor_offsets.windows(2) {
        let mut bytes = base.clone();
        let previous = bytes[pair[0]..pair[0] + 8].to_vec();
        bytes[pair[1]..pair[1] + 8].copy_from_slice(&previous);
        tally.run(&format!("overlap at {}", pair[1]), || {
            check_gguf(&bytes, &path)
        });
    }
    // Deep nesting, up to the 40,000 levels that overflowed the stack.
    for depth in [1, 7, 8, 9, 100, 40_000] {
        let bytes = nested_array_gguf(depth);
        tally.run(&format!("nested {depth}"), || {
            GgufFile::from_bytes(bytes.clone()).map(|_| ())
        });
    }
    // Random mutants, most of them in the header (where the structure is).
    let header_end = layout.tensor_offsets.last().unwrap() + 8;
    while tally.mutants < MIN_MUTANTS + 200 {
        let (what, bytes) = if rng.random_bool(0.8) {
            let (what, mut head) = byte_mutant(&base[..header_end], &layout.u64_fields, &mut rng);
            head.extend_from_slice(&base[header_end..]);
            (what, head)
        } else {
            byte_mutant(&base, &layout.u64_fields, &mut rng)
        };
        tally.run(&what, || check_gguf(&bytes, &path));
    }
    tally.finish("GGUF");
}

// ---------------------------------------------------------------------------------------------------
// Tokenizer files

fn tiny_vocab_merges() -> (String, String) {
    let mut vocab = serde_json::Map::new();
    let mut tokens: Vec<String> = (33u8..127).map(|b| (b as char).to_string()).collect();
    tokens.extend(["Ġ", "Ġt", "Ġ1", "he", "the"].map(String::from));
    for (i, t) in tokens.iter().enumerate() {
        vocab.insert(t.clone(), serde_json::json!(i));
    }
    let vocab = serde_json::to_string(&serde_json::Value::Object(vocab)).unwrap();
    let merges = "#version: 0.2\nĠ t\nĠ 1\nh e\nt he\n".to_string();
    (vocab, merges)
}

fn check_tokenizer(
    tokenizer: Result<AuxTokenizer, tint_aux::AuxError>,
) -> Result<(), tint_aux::AuxError> {
    let tokenizer = tokenizer?;
    let ids = tokenizer.encode("the t1 he")?;
    tokenizer.decode(&ids)?;
    Ok(())
}

#[test]
fn tokenizer_mutants_never_panic() {
    let dir = scratch("tokenizer");
    let (vocab, merges) = tiny_vocab_merges();
    let (vocab_path, merges_path, json_path) = (
        dir.join("vocab.json"),
        dir.join("merges.txt"),
        dir.join("tokenizer.json"),
    );
    std::fs::write(&vocab_path, &vocab).unwrap();
    std::fs::write(&merges_path, &merges).unwrap();
    let reference = AuxTokenizer::from_vocab_merges(&vocab_path, &merges_path).unwrap();
    let json = reference.inner().to_string(false).unwrap();
    std::fs::write(&json_path, &json).unwrap();
    check_tokenizer(AuxTokenizer::from_tokenizer_json(&json_path)).unwrap();

    let mut rng = StdRng::seed_from_u64(22);
    let mut tally = Tally::default();
    let files: [(&Path, &str); 3] = [
        (&vocab_path, vocab.as_str()),
        (&merges_path, merges.as_str()),
        (&json_path, json.as_str()),
    ];
    let load = |which: usize| match which {
        2 => AuxTokenizer::from_tokenizer_json(&json_path),
        _ => AuxTokenizer::from_vocab_merges(&vocab_path, &merges_path),
    };
    let restore = || {
        for (path, text) in files {
            std::fs::write(path, text).unwrap();
        }
    };
    for (which, (path, text)) in files.iter().enumerate() {
        // Truncation at every structural character (every character of the small merges file).
        let boundaries: Vec<usize> = text
            .char_indices()
            .filter(|(_, c)| "{}[]:,\"\n ".contains(*c) || which == 1)
            .map(|(i, _)| i)
            .collect();
        for at in boundaries
            .into_iter()
            .step_by(if which == 2 { 3 } else { 1 })
        {
            std::fs::write(path, &text.as_bytes()[..at]).unwrap();
            tally.run(&format!("{} truncated at {at}", path.display()), || {
                check_tokenizer(load(which))
            });
        }
        restore();
    }
    while tally.mutants < MIN_MUTANTS + 200 {
        let which = rng.random_range(0..3);
        let (path, text) = files[which];
        let (what, bytes) = if which != 1 && rng.random_bool(0.5) {
            json_mutant(text, &mut rng)
        } else {
            byte_mutant(text.as_bytes(), &[], &mut rng)
        };
        std::fs::write(path, &bytes).unwrap();
        tally.run(&format!("{}: {what}", path.display()), || {
            check_tokenizer(load(which))
        });
        restore();
    }
    tally.finish("tokenizer files");
}

/// A JSON-level mutation of `text`: a value replaced by a hostile one (huge or negative number, wrong type,
/// deep nesting), or a key removed.
fn json_mutant(text: &str, rng: &mut StdRng) -> (String, Vec<u8>) {
    let mut value: serde_json::Value = serde_json::from_str(text).unwrap();
    // Choose a random node (as a JSON pointer), walking down at most three levels.
    let mut pointer = String::new();
    let mut node = &value;
    for _ in 0..rng.random_range(0..4) {
        match node {
            serde_json::Value::Object(map) if !map.is_empty() => {
                let key = map.keys().nth(rng.random_range(0..map.len())).unwrap();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                node = &map[key];
            }
            serde_json::Value::Array(items) if !items.is_empty() => {
                let i = rng.random_range(0..items.len());
                pointer.push_str(&format!("/{i}"));
                node = &items[i];
            }
            _ => break,
        }
    }
    let path = pointer.clone();
    let node = value.pointer_mut(&pointer).unwrap();
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let replacements = [
        serde_json::json!(u64::MAX),
        serde_json::json!(-1),
        serde_json::json!(1 << 31),
        serde_json::json!(1e300),
        serde_json::json!(""),
        serde_json::json!(null),
        serde_json::json!({}),
        serde_json::json!([]),
        serde_json::json!(["a", "b"]),
    ];
    let pick = rng.random_range(0..=replacements.len());
    if pick == replacements.len() {
        // Deep nesting as raw text (serde_json's value type could not hold it).
        *node = serde_json::json!("__DEEP__");
        let text = serde_json::to_string(&value)
            .unwrap()
            .replace("\"__DEEP__\"", &deep);
        return (format!("{path} = 100000-deep array"), text.into_bytes());
    }
    *node = replacements[pick].clone();
    (
        format!("{path} = {}", replacements[pick]),
        serde_json::to_vec(&value).unwrap(),
    )
}

// ---------------------------------------------------------------------------------------------------
// Token-ids JSON

#[test]
fn ids_json_mutants_never_panic() {
    let base = r#"{"input_ids": [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], "train_mask": [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]]}"#;
    let path = Path::new("ids.json");
    let check = |text: &[u8]| -> Result<(), tint_aux::AuxError> {
        let text = String::from_utf8_lossy(text);
        let ids = TokenIds::parse(&text, path)?;
        ids.check_vocab(11)?;
        ids.check_train_mask(path)?;
        Ok(())
    };
    check(base.as_bytes()).unwrap();
    let mut rng = StdRng::seed_from_u64(23);
    let mut tally = Tally::default();
    for at in 0..base.len() {
        tally.run(&format!("truncated at {at}"), || {
            check(&base.as_bytes()[..at])
        });
    }
    for id in HUGE.iter().map(|&v| v.to_string()).chain([
        "-1".to_string(),
        "1e3".to_string(),
        "2147483648".to_string(),
        "9223372036854775807".to_string(),
        "99999999999999999999999".to_string(),
        "1.0".to_string(),
    ]) {
        let text = base.replace("[[1,", &format!("[[{id},"));
        tally.run(&format!("id {id}"), || check(text.as_bytes()));
    }
    while tally.mutants < MIN_MUTANTS + 200 {
        let (what, bytes) = if rng.random_bool(0.5) {
            json_mutant(base, &mut rng)
        } else {
            byte_mutant(base.as_bytes(), &[], &mut rng)
        };
        tally.run(&what, || check(&bytes));
    }
    tally.finish("ids JSON");
}
