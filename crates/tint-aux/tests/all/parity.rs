//! Parity with HF transformers on the tiny fixtures of scripts/make_aux_fixtures.py and on the
//! official micro GPT-2 of the TinT golden files.

use crate::common::*;
use burn::tensor::Tensor;
use tint_aux::{load_model, AuxModel};

/// The parity bound for float32 logits. Our matmul and reduction orders differ from PyTorch's;
/// on these 2-layer models the observed differences are ~1e-6.
const LOGIT_TOL: f32 = 1e-4;
/// Same bound for hidden states and attention probabilities (values of order 1).
const ACTIVATION_TOL: f32 = 1e-4;
/// `last_position_logits` against the last row of the full forward: the same f32 operations on the
/// same row, except that the head's matmul has one row instead of `seq_length` (gemm may block
/// the sums differently); logits of order 10, sums over at most 64 terms.
const LAST_ROW_TOL: f32 = 1e-5;

/// The last-position logits equal the last row of the full forward.
fn check_last_position(
    name: &str,
    model: &AuxModel<TestBackend>,
    ids: Tensor<TestBackend, 2, burn::tensor::Int>,
) {
    let full = model.forward(ids.clone()).unwrap();
    let [batch_size, seq_length, vocab_size] = full.dims();
    let last = model.last_position_logits(ids).unwrap();
    assert_eq!(last.dims(), [batch_size, 1, vocab_size], "{name}");
    let want = full.slice([0..batch_size, seq_length - 1..seq_length, 0..vocab_size]);
    let diff = (last - want).abs().max().into_scalar();
    assert!(
        diff <= LAST_ROW_TOL,
        "{name}: last-position logits differ by {diff}"
    );
}

fn check_fixture(name: &str) {
    let device = Default::default();
    let dir = aux_fixture(name);
    let model: AuxModel<TestBackend> = load_model(&dir, &device).expect("fixture loads");
    let golden = Golden::open(dir.join("golden.safetensors"));
    let trace = model.forward_traced(golden.ids("input_ids")).unwrap();
    check_last_position(name, &model, golden.ids("input_ids"));

    let diff = max_abs_diff(trace.logits, &golden.f32("logits"));
    assert!(diff <= LOGIT_TOL, "{name}: logits differ by {diff}");

    let block_inputs: Vec<Tensor<TestBackend, 3>> =
        trace.layers.iter().map(|l| l.block_input.clone()).collect();
    let diff = max_abs_diff(
        Tensor::stack::<4>(block_inputs, 0),
        &golden.f32("block_inputs"),
    );
    assert!(
        diff <= ACTIVATION_TOL,
        "{name}: block inputs differ by {diff}"
    );

    let probs: Vec<Tensor<TestBackend, 4>> =
        trace.layers.iter().map(|l| l.attn_probs.clone()).collect();
    let diff = max_abs_diff(Tensor::stack::<5>(probs, 0), &golden.f32("attentions"));
    assert!(
        diff <= ACTIVATION_TOL,
        "{name}: attention probabilities differ by {diff}"
    );
}

#[test]
fn gpt2_matches_transformers() {
    check_fixture("gpt2-tiny");
}

#[test]
fn opt_pre_ln_matches_transformers() {
    check_fixture("opt-pre-ln");
}

#[test]
fn opt_post_ln_matches_transformers() {
    check_fixture("opt-post-ln");
}

#[test]
fn opt_post_ln_with_projections_matches_transformers() {
    check_fixture("opt-post-ln-proj");
}

#[test]
fn official_micro_gpt2_matches_reference_logits() {
    let device = Default::default();
    let model: AuxModel<TestBackend> = load_model(&official_micro_gpt2(), &device).unwrap();
    let subset =
        Golden::open(repo_root().join("fixtures/official-tint/micro_s4/golden_subset.safetensors"));
    let logits = model.forward(subset.ids("input_ids")).unwrap();
    let want = subset.f32("ref_original_logits_f32_vocab_slice");
    let [batch_size, seq_length, _] = logits.dims();
    let sliced = logits
        .clone()
        .slice([0..batch_size, 0..seq_length, 0..want.1[2]]);
    let diff = max_abs_diff(sliced, &want);
    assert!(diff <= LOGIT_TOL, "in-repo subset: logits differ by {diff}");

    // The full golden file, when the shared fixtures sit next to the repository.
    if let Some(shared) = shared_official() {
        let full = Golden::open(shared.join("micro_s4/golden.safetensors"));
        let diff = max_abs_diff(logits, &full.f32("ref_original_logits_f32"));
        assert!(diff <= LOGIT_TOL, "shared golden: logits differ by {diff}");
    }
}

#[test]
fn llama_last_position_logits_are_the_last_row_of_the_forward() {
    for name in ["tiny", "tiny_tied"] {
        let dir = repo_root().join("fixtures/llama").join(name);
        let model: AuxModel<TestBackend> = load_model(&dir, &Default::default()).unwrap();
        let golden = Golden::open(dir.join("golden.safetensors"));
        check_last_position(name, &model, golden.ids("input_ids"));
    }
}

/// `last_position_logits_reusing` against `last_position_logits` of the whole context: the same
/// f32 operations, except that the attention products and projections of the recomputed
/// positions run over fewer rows (gemm may block the sums differently); logits of order 10, sums
/// over at most 64 terms, two layers.
const PREFIX_REUSE_TOL: f32 = 1e-5;

/// Scores a sequence of contexts that share prefixes (a longer one, a diverging one, the same one
/// again, one shorter than the stored one) through one [`PrefixCache`], each against the plain
/// last-position logits; returns the cache's (reused, computed) position counts.
fn check_prefix_reuse(name: &str, model: &AuxModel<TestBackend>, ids: &[u32]) -> (usize, usize) {
    let n = ids.len();
    assert!(n >= 8, "{name}: fixture too short");
    let other = |t: u32| (t + 1) % model.vocab_size() as u32;
    let mut diverging = ids[..n / 2].to_vec();
    diverging.extend(ids[n / 2..].iter().map(|&t| other(t)));
    let contexts = [
        ids[..n / 2].to_vec(),
        ids.to_vec(),
        diverging.clone(),
        diverging,
        ids[..n / 4].to_vec(),
        ids.to_vec(),
    ];
    let mut cache = tint_aux::PrefixCache::default();
    let device = Default::default();
    for (i, context) in contexts.iter().enumerate() {
        let got = model
            .last_position_logits_reusing(context, &mut cache)
            .unwrap();
        let tensor = tint_aux::model::sequence_ids::<TestBackend>(context, &device);
        let want = model.last_position_logits(tensor).unwrap();
        assert_eq!(got.dims(), want.dims(), "{name} context {i}");
        let diff = (got - want).abs().max().into_scalar();
        assert!(
            diff <= PREFIX_REUSE_TOL,
            "{name} context {i}: logits with a reused prefix differ by {diff}"
        );
    }
    (cache.reused_positions(), cache.computed_positions())
}

/// `n` token ids spread over the vocabulary (deterministic).
fn spread_ids(n: usize, vocab_size: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 37 + 11) % vocab_size) as u32)
        .collect()
}

#[test]
fn reusing_a_prefix_gives_the_logits_of_the_whole_context() {
    for name in ["tiny", "tiny_tied"] {
        let dir = repo_root().join("fixtures/llama").join(name);
        let model: AuxModel<TestBackend> = load_model(&dir, &Default::default()).unwrap();
        let ids = spread_ids(24, model.vocab_size());
        let n = ids.len();
        let (reused, computed) = check_prefix_reuse(name, &model, &ids);
        // n/2 | n/2 reused + n/2 | n/2 + n/2 | n - 1 + 1 | n/4 - 1 + 1 | n/4 + 3n/4.
        let want_reused = n / 2 + n / 2 + (n - 1) + (n / 4 - 1) + n / 4;
        assert_eq!(reused, want_reused, "{name}: reused positions");
        assert_eq!(reused + computed, n / 2 + 3 * n + n / 4 + n, "{name}");
    }
    // GPT-2 runs every context whole and stores nothing.
    let model: AuxModel<TestBackend> =
        load_model(&aux_fixture("gpt2-tiny"), &Default::default()).unwrap();
    let ids: Vec<u32> = (0..16)
        .map(|i| (i * 7 + 3) % model.vocab_size() as u32)
        .collect();
    assert_eq!(check_prefix_reuse("gpt2", &model, &ids).0, 0);
}
