//! The LLaMA implementation against HF transformers on tiny random models (fixtures/llama/tiny*, made by
//! scripts/make_llama_fixtures.py), the GGUF loading path on the same weights, invariants and bad input.

use std::path::{Path, PathBuf};

use burn::tensor::{Int, Tensor, TensorData, Tolerance};
use safetensors::SafeTensors;
use tint_aux::gguf::{GgufError, GgufWriter, MetadataValue};
use tint_aux::llama::{
    load_llama_gguf, load_llama_hf, permute_rotary_rows, LlamaConfig, LlamaModel,
};
use tint_aux::AuxError;

type TestBackend = burn::backend::Flex;

/// f32 forward of a 2-layer model with logits of order 10: HF (PyTorch) and burn sum in different orders,
/// which moves logits by a few 1e-6; 1e-4 is the bound.
const TINY_LOGITS_TOL: f32 = 1e-4;

pub(crate) fn llama_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/llama")
        .join(name)
}

fn read_f32(tensors: &SafeTensors<'_>, name: &str) -> (Vec<f32>, Vec<usize>) {
    let view = tensors.tensor(name).unwrap();
    let data = view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (data, view.shape().to_vec())
}

fn read_i64(tensors: &SafeTensors<'_>, name: &str) -> (Vec<i64>, Vec<usize>) {
    let view = tensors.tensor(name).unwrap();
    let data = view
        .data()
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (data, view.shape().to_vec())
}

struct Golden {
    input_ids: Tensor<TestBackend, 2, Int>,
    logits: TensorData,
}

fn golden(name: &str) -> Golden {
    let bytes = std::fs::read(llama_fixture(name).join("golden.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let (ids, ids_shape) = read_i64(&tensors, "input_ids");
    let (logits, logits_shape) = read_f32(&tensors, "logits");
    Golden {
        input_ids: Tensor::from_data(TensorData::new(ids, ids_shape), &Default::default()),
        logits: TensorData::new(logits, logits_shape),
    }
}

fn check_against_golden(model: &LlamaModel<TestBackend>, name: &str) {
    let golden = golden(name);
    let logits = model.forward(golden.input_ids).unwrap();
    logits
        .to_data()
        .assert_approx_eq::<f32>(&golden.logits, Tolerance::absolute(TINY_LOGITS_TOL));
}

#[test]
fn tiny_untied_gqa_matches_hf() {
    let (model, config) =
        load_llama_hf::<TestBackend>(&llama_fixture("tiny"), &Default::default()).unwrap();
    assert_eq!((config.n_heads, config.n_kv_heads), (4, 2));
    assert_eq!(
        config.rope_theta, 500.0,
        "rope_parameters.rope_theta must be read"
    );
    assert!(model.lm_head.is_some());
    check_against_golden(&model, "tiny");
}

#[test]
fn tiny_tied_matches_hf() {
    let (model, config) =
        load_llama_hf::<TestBackend>(&llama_fixture("tiny_tied"), &Default::default()).unwrap();
    assert!(config.tie_word_embeddings && model.lm_head.is_none());
    check_against_golden(&model, "tiny_tied");
}

/// Byte-level vocabulary of 97 tokens for the GGUF written below: the 94 printable ASCII bytes, `Ġ` (space),
/// and two merges `Ġt`, `Ġ1`.
fn tiny_vocab() -> Vec<MetadataValue> {
    let mut tokens: Vec<String> = (33u8..127).map(|b| (b as char).to_string()).collect();
    tokens.extend(["Ġ", "Ġt", "Ġ1"].map(String::from));
    tokens.into_iter().map(MetadataValue::String).collect()
}

/// Writes the tiny HF model as an F32 GGUF the way llama.cpp's converter does (rotary rows of q/k permuted).
pub(crate) fn tiny_gguf(name: &str, pre: &str) -> Vec<u8> {
    tiny_gguf_with_bos(name, pre, Some(3), None)
}

/// [`tiny_gguf`] with the BOS id `bos` (absent: `None`) and `add_bos_token` (absent: `None`).
fn tiny_gguf_with_bos(name: &str, pre: &str, bos: Option<u32>, add_bos: Option<bool>) -> Vec<u8> {
    let dir = llama_fixture(name);
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let u32_of = |k: &str| MetadataValue::U32(config[k].as_u64().unwrap() as u32);
    let mut writer = GgufWriter::new()
        .metadata(
            "general.architecture",
            MetadataValue::String("llama".into()),
        )
        .metadata("general.alignment", MetadataValue::U32(64))
        .metadata("llama.block_count", u32_of("num_hidden_layers"))
        .metadata("llama.context_length", u32_of("max_position_embeddings"))
        .metadata("llama.embedding_length", u32_of("hidden_size"))
        .metadata("llama.feed_forward_length", u32_of("intermediate_size"))
        .metadata("llama.attention.head_count", u32_of("num_attention_heads"))
        .metadata(
            "llama.attention.head_count_kv",
            u32_of("num_key_value_heads"),
        )
        .metadata("llama.rope.freq_base", MetadataValue::F32(500.0))
        .metadata(
            "llama.attention.layer_norm_rms_epsilon",
            MetadataValue::F32(1e-5),
        )
        .metadata("tokenizer.ggml.model", MetadataValue::String("gpt2".into()))
        .metadata("tokenizer.ggml.pre", MetadataValue::String(pre.into()))
        .metadata("tokenizer.ggml.tokens", MetadataValue::Array(tiny_vocab()))
        .metadata(
            "tokenizer.ggml.merges",
            MetadataValue::Array(vec![
                MetadataValue::String("Ġ t".into()),
                MetadataValue::String("Ġ 1".into()),
            ]),
        )
        .metadata("tokenizer.ggml.eos_token_id", MetadataValue::U32(4));
    if let Some(bos) = bos {
        writer = writer.metadata("tokenizer.ggml.bos_token_id", MetadataValue::U32(bos));
    }
    if let Some(add_bos) = add_bos {
        writer = writer.metadata("tokenizer.ggml.add_bos_token", MetadataValue::Bool(add_bos));
    }
    let n_heads = config["num_attention_heads"].as_u64().unwrap() as usize;
    let n_kv_heads = config["num_key_value_heads"].as_u64().unwrap() as usize;
    for (hf_name, _) in tensors.tensors() {
        let (mut data, shape) = read_f32(&tensors, &hf_name);
        let gguf_name = hf_name
            .replace("model.embed_tokens", "token_embd")
            .replace("model.norm", "output_norm")
            .replace("lm_head", "output")
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
        if gguf_name.ends_with("attn_q.weight") {
            data = permute_rotary_rows(&data, n_heads, shape[1]);
        } else if gguf_name.ends_with("attn_k.weight") {
            data = permute_rotary_rows(&data, n_kv_heads, shape[1]);
        }
        writer = writer.tensor_f32(&gguf_name, &shape, &data);
    }
    writer.to_bytes()
}

pub(crate) fn write_temp(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("tint-llama-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn gguf_path_undoes_the_rotary_permutation_and_matches_hf() {
    for name in ["tiny", "tiny_tied"] {
        let path = write_temp(&format!("{name}.gguf"), &tiny_gguf(name, "gpt2"));
        let loaded = load_llama_gguf::<TestBackend>(&path, &Default::default()).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(loaded.config.tie_word_embeddings, name == "tiny_tied");
        check_against_golden(&loaded.model, name);
    }
}

#[test]
fn gguf_tokenizer_follows_the_pre_tokenizer_type() {
    let id = |t: &str| t.as_bytes()[0] as u32 - 33; // index of a printable byte in tiny_vocab
    let (space, space_t, space_1) = (94, 95, 96);
    let path = write_temp("tok-gpt2.gguf", &tiny_gguf("tiny", "gpt2"));
    let gpt2 = load_llama_gguf::<TestBackend>(&path, &Default::default())
        .unwrap()
        .tokenizer;
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        (gpt2.bos_token_id, gpt2.eos_token_id, gpt2.add_bos),
        (Some(3), Some(4), false)
    );
    // GPT-2's regex keeps " 12" together, so the merge "Ġ 1" applies.
    assert_eq!(
        gpt2.encode("a to 12").unwrap(),
        vec![id("a"), space_t, id("o"), space_1, id("2")]
    );
    assert_eq!(
        gpt2.decode(&gpt2.encode("a to 12").unwrap()).unwrap(),
        "a to 12"
    );

    let path = write_temp("tok-smollm.gguf", &tiny_gguf("tiny", "smollm"));
    let smollm = load_llama_gguf::<TestBackend>(&path, &Default::default())
        .unwrap()
        .tokenizer;
    std::fs::remove_file(&path).unwrap();
    // The smollm pre-tokenizer isolates digits first: " 12" is "Ġ", "1", "2".
    assert_eq!(
        smollm.encode("a to 12").unwrap(),
        vec![id("a"), space_t, id("o"), space, id("1"), id("2")]
    );
}

#[test]
fn trace_agrees_with_forward_and_attention_is_causal() {
    let device = Default::default();
    let config = LlamaConfig::new(32, 2, 4, 1, 48, 50).with_rope_theta(1000.0);
    let model = config.init::<TestBackend>(&device).unwrap();
    let ids = [[3i64, 17, 4, 42, 9, 0]];
    let input = Tensor::<TestBackend, 2, Int>::from_data(ids, &device);
    let logits = model.forward(input.clone()).unwrap();
    let trace = model.forward_trace(input).unwrap();
    // Same ops in the same order: identical up to float noise.
    const TRACE_TOL: f32 = 1e-6;
    trace
        .logits
        .to_data()
        .assert_approx_eq::<f32>(&logits.to_data(), Tolerance::absolute(TRACE_TOL));
    assert_eq!(trace.layers.len(), 2);
    assert_eq!(trace.layers[0].attention.probs.dims(), [1, 4, 6, 6]);
    assert_eq!(trace.layers[0].attention.key.dims(), [1, 1, 6, 8]);
    assert_eq!(trace.layers[1].mlp.hidden.dims(), [1, 6, 48]);

    // Changing the last token leaves every earlier position's logits unchanged.
    let mut changed = ids;
    changed[0][5] = 11;
    let logits2 = model.forward(Tensor::from_data(changed, &device)).unwrap();
    logits2
        .clone()
        .slice([0..1, 0..5])
        .to_data()
        .assert_approx_eq::<f32>(
            &logits.clone().slice([0..1, 0..5]).to_data(),
            Tolerance::absolute(TRACE_TOL),
        );
    let last_diff = (logits2.slice([0..1, 5..6]) - logits.slice([0..1, 5..6]))
        .abs()
        .max()
        .into_scalar();
    assert!(last_diff > 1e-4, "the last position must see its own token");
}

#[test]
fn bad_input_and_bad_configs_are_typed_errors() {
    let device = Default::default();
    let model = LlamaConfig::new(16, 1, 2, 2, 8, 10)
        .with_max_positions(4)
        .init::<TestBackend>(&device)
        .unwrap();
    let ids = |v: Vec<i64>| {
        let s = v.len();
        Tensor::<TestBackend, 2, Int>::from_data(TensorData::new(v, [1, s]), &device)
    };
    assert!(matches!(
        model.forward(ids(vec![1, 10, 2])),
        Err(AuxError::TokenIdOutOfRange {
            token_id: 10,
            position: 1,
            vocab_size: 10,
            ..
        })
    ));
    assert!(matches!(
        model.forward(ids(vec![1, -1])),
        Err(AuxError::TokenIdOutOfRange { token_id: -1, .. })
    ));
    assert!(matches!(
        model.forward(ids(vec![1; 5])),
        Err(AuxError::SequenceTooLong {
            seq_length: 5,
            max_positions: 4
        })
    ));
    assert!(matches!(
        model.forward(Tensor::<TestBackend, 2, Int>::zeros([1, 0], &device)),
        Err(AuxError::EmptyInput { .. })
    ));
    for bad in [
        LlamaConfig::new(16, 1, 3, 3, 8, 10), // 16 % 3 != 0
        LlamaConfig::new(16, 1, 4, 3, 8, 10), // 4 % 3 != 0
        LlamaConfig::new(12, 1, 4, 4, 8, 10), // head_dim 3 is odd
        LlamaConfig::new(16, 1, 2, 2, 8, 0),  // empty vocabulary
    ] {
        assert!(matches!(
            bad.init::<TestBackend>(&device),
            Err(AuxError::InvalidConfig { .. })
        ));
    }
}

#[test]
fn bad_hf_directories_are_typed_errors() {
    let dir = std::env::temp_dir().join(format!("tint-llama-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    assert!(matches!(
        load_llama_hf::<TestBackend>(&dir, &Default::default()),
        Err(AuxError::MissingFile { .. })
    ));
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(llama_fixture("tiny/config.json")).unwrap())
            .unwrap();
    config["rope_parameters"]["rope_type"] = "yarn".into();
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    assert!(matches!(
        load_llama_hf::<TestBackend>(&dir, &Default::default()),
        Err(AuxError::InvalidConfig { .. })
    ));
    config["rope_parameters"]["rope_type"] = "default".into();
    config["num_hidden_layers"] = 3.into(); // the checkpoint has 2 layers
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::copy(
        llama_fixture("tiny/model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    let err = load_llama_hf::<TestBackend>(&dir, &Default::default()).unwrap_err();
    assert!(
        matches!(&err, AuxError::MissingTensor { tensor, .. } if tensor.starts_with("model.layers.2.")),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Counts the parameters a mapper visits, by group.
struct CountParams(std::collections::BTreeMap<String, usize>);

impl tint_aux::params::ParamMapper<TestBackend> for CountParams {
    fn map<const D: usize>(
        &mut self,
        info: &tint_aux::params::ParamInfo,
        param: burn::module::Param<Tensor<TestBackend, D>>,
    ) -> burn::module::Param<Tensor<TestBackend, D>> {
        *self.0.entry(info.group.name().to_string()).or_default() += 1;
        param
    }
}

#[test]
fn aux_model_dispatch_loads_llama_dirs_and_gguf_files() {
    let device = Default::default();
    let model = tint_aux::load_model::<TestBackend>(&llama_fixture("tiny"), &device).unwrap();
    assert_eq!(
        (model.model_type(), model.n_layers(), model.hidden_size()),
        ("llama", 2, 64)
    );
    let tiny = golden("tiny");
    let trace = model.forward_traced(tiny.input_ids.clone()).unwrap();
    trace
        .logits
        .to_data()
        .assert_approx_eq::<f32>(&tiny.logits, Tolerance::absolute(TINY_LOGITS_TOL));
    assert_eq!(trace.layers[1].mlp_activation.dims(), [2, 7, 96]);
    assert!(matches!(
        model.forward(Tensor::from_data([[0i64, 97]], &device)),
        Err(AuxError::TokenIdOutOfRange { token_id: 97, .. })
    ));

    let mut counter = CountParams(Default::default());
    let _ = model.map_named_params(&mut counter);
    // 2 layers: 2 norms each + the final norm; one q/k/v/o each; 3 MLP matrices each; embedding + lm_head.
    let expected: std::collections::BTreeMap<String, usize> = [
        ("attn_k", 2),
        ("attn_o", 2),
        ("attn_q", 2),
        ("attn_v", 2),
        ("embed", 2),
        ("ln", 5),
        ("mlp", 6),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(counter.0, expected);

    let path = write_temp("dispatch.gguf", &tiny_gguf("tiny_tied", "gpt2"));
    let model = tint_aux::load_model::<TestBackend>(&path, &device).unwrap();
    let tokenizer = tint_aux::gguf_tokenizer(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(tokenizer.vocab_size(), 97);
    let tied = golden("tiny_tied");
    model
        .forward(tied.input_ids)
        .unwrap()
        .to_data()
        .assert_approx_eq::<f32>(&tied.logits, Tolerance::absolute(TINY_LOGITS_TOL));
}

/// Issue 66: the file's `add_bos_token` is honoured by the text tokenizer (BOS first), and a BOS
/// id outside the vocabulary, or `add_bos_token` without a BOS id, is refused by key.
#[test]
fn gguf_bos_flags_are_honoured_or_refused() {
    let tokens = |bos, add_bos, tag: &str| {
        let path = write_temp(tag, &tiny_gguf_with_bos("tiny", "gpt2", bos, add_bos));
        let result = tint_aux::llama::gguf_tokenizer(&path);
        std::fs::remove_file(&path).unwrap();
        result
    };
    let plain = tokens(Some(3), None, "bos-absent.gguf").unwrap();
    let with_bos = tokens(Some(3), Some(true), "bos-true.gguf").unwrap();
    assert_eq!((plain.bos(), with_bos.bos()), (None, Some(3)));
    let text = plain.encode("a to 12").unwrap();
    assert_eq!(
        with_bos.encode("a to 12").unwrap(),
        [vec![3], text.clone()].concat()
    );
    assert_eq!(
        tokens(Some(3), Some(false), "bos-false.gguf")
            .unwrap()
            .encode("a to 12")
            .unwrap(),
        text
    );
    match tokens(Some(5000), None, "bos-oov.gguf") {
        Err(AuxError::Gguf(GgufError::TokenOutOfVocabulary {
            key,
            value,
            vocab_size,
        })) => {
            assert_eq!((key.as_str(), value), ("tokenizer.ggml.bos_token_id", 5000));
            assert!(vocab_size < 5000);
        }
        other => panic!("expected TokenOutOfVocabulary, got {other:?}"),
    }
    assert!(matches!(
        tokens(None, Some(true), "bos-missing.gguf"),
        Err(AuxError::Gguf(GgufError::BosWithoutId))
    ));
}
