//! SmolLM2-135M-Instruct (Q4_1 GGUF) against HF transformers' dequantised model: logits at a few positions
//! of a fixed text and the token ids (fixtures/llama/smollm2_golden.safetensors, made by
//! scripts/make_llama_fixtures.py).
//!
//! Needs the GGUF in the asset cache (`cargo xtask fetch smollm2`; `$TINT_CACHE` or `<repo>/.cache/assets`).
//! Without it the test prints a note and passes.
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use std::path::{Path, PathBuf};

use burn::tensor::{Int, Tensor, TensorData};
use safetensors::SafeTensors;
use tint_aux::llama::load_llama_gguf;

type TestBackend = burn::backend::Flex;

/// 30 f32 layers with logits of order 10–30: summation-order differences between PyTorch and burn
/// accumulate to a few 1e-5; 1e-3 is the bound.
const SMOLLM2_LOGITS_TOL: f32 = 1e-3;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn gguf_path() -> PathBuf {
    let cache = std::env::var_os("TINT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache/assets"));
    cache.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
}

fn read_i64(tensors: &SafeTensors<'_>, name: &str) -> Vec<i64> {
    tensors
        .tensor(name)
        .unwrap()
        .data()
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

#[test]
fn smollm2_gguf_matches_hf_transformers() {
    let path = gguf_path();
    if !path.is_file() {
        // CI fetches the model first and sets TINT_REQUIRE_SMOLLM2=1, so a missing file fails there
        // instead of passing silently.
        assert!(
            std::env::var_os("TINT_REQUIRE_SMOLLM2").is_none(),
            "TINT_REQUIRE_SMOLLM2 is set but {} is missing",
            path.display()
        );
        eprintln!(
            "skipping SmolLM2 parity: {} not found (run `cargo xtask fetch smollm2`)",
            path.display()
        );
        return;
    }
    let fixtures = repo_root().join("fixtures/llama");
    let golden_bytes = std::fs::read(fixtures.join("smollm2_golden.safetensors")).unwrap();
    let golden = SafeTensors::deserialize(&golden_bytes).unwrap();
    let text = std::fs::read_to_string(fixtures.join("smollm2_text.txt")).unwrap();
    let expected_ids = read_i64(&golden, "input_ids");
    let positions = read_i64(&golden, "positions");
    let logits_view = golden.tensor("logits").unwrap();
    let expected_logits: Vec<f32> = logits_view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();

    let device = Default::default();
    let loaded = load_llama_gguf::<TestBackend>(&path, &device).unwrap();
    let config = &loaded.config;
    assert_eq!(
        (
            config.n_layers,
            config.d_model,
            config.n_heads,
            config.n_kv_heads,
            config.d_ff
        ),
        (30, 576, 9, 3, 1536)
    );
    assert!(config.tie_word_embeddings);
    assert_eq!(config.rope_theta, 100000.0);

    let ids: Vec<i64> = loaded
        .tokenizer
        .encode(&text)
        .unwrap()
        .into_iter()
        .map(i64::from)
        .collect();
    assert_eq!(ids, expected_ids, "token ids differ from HF's");
    // transformers' own GGUF tokenizer (`hf_gguf_ids`) ignores the GGUF's `smollm` pre-tokenizer
    // (digits one by one), so it agrees with us only up to the first number; the script checks
    // that the two HF tokenizations agree there, and here we check ours against transformers'.
    let prefix = &text[..text.find(" In 1790").expect("the fixture text has a year")];
    let prefix_ids: Vec<i64> = loaded
        .tokenizer
        .encode(prefix)
        .unwrap()
        .into_iter()
        .map(i64::from)
        .collect();
    let hf_gguf_ids = read_i64(&golden, "hf_gguf_ids");
    assert!(prefix_ids.len() > 10 && prefix_ids.len() < hf_gguf_ids.len());
    assert_eq!(
        prefix_ids,
        hf_gguf_ids[..prefix_ids.len()],
        "ids differ from transformers' GGUF tokenizer before the first digit"
    );
    assert_eq!(
        loaded
            .tokenizer
            .decode(&loaded.tokenizer.encode(&text).unwrap())
            .unwrap(),
        text
    );

    // Control tokens (type 3) are matched whole; BOS/EOS come from the metadata.
    let tokenizer = &loaded.tokenizer;
    assert_eq!(
        (
            tokenizer.bos_token_id,
            tokenizer.eos_token_id,
            tokenizer.add_bos
        ),
        (Some(1), Some(2), false)
    );
    assert_eq!(tokenizer.encode("<|im_start|>user").unwrap()[0], 1);
    assert_eq!(tokenizer.vocab_size(), config.vocab_size);

    let n = ids.len();
    let input = Tensor::<TestBackend, 2, Int>::from_data(TensorData::new(ids, [1, n]), &device);
    let logits = loaded.model.forward(input).unwrap(); // [1, n, vocab]
    let vocab = config.vocab_size;
    let rows: Vec<Tensor<TestBackend, 3>> = positions
        .iter()
        .map(|&p| logits.clone().slice([0..1, p as usize..p as usize + 1]))
        .collect();
    let ours = Tensor::cat(rows, 1)
        .reshape([positions.len(), vocab])
        .into_data()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(ours.len(), expected_logits.len());
    let max_diff = ours
        .iter()
        .zip(&expected_logits)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    eprintln!(
        "SmolLM2 max |logit difference| vs HF over {} positions: {max_diff:.2e}",
        positions.len()
    );
    assert!(
        max_diff <= SMOLLM2_LOGITS_TOL,
        "max |logit difference| {max_diff} > {SMOLLM2_LOGITS_TOL}"
    );
}
