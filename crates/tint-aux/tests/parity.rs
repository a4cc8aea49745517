//! Parity with HF transformers on the tiny fixtures of scripts/make_aux_fixtures.py and on the
//! official micro GPT-2 of the TinT golden files.

mod common;

use burn::tensor::Tensor;
use common::*;
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
