//! The updated model of the functional references ([`TintStep::updated`]): the weights a step
//! leaves, run by plain forwards. Two properties, on the committed micro GPT-2 and the tiny LLaMA:
//!
//! * its plain forward on the training sequence is the step's final forward (same code, same
//!   tensors);
//! * trained on the demonstrations alone (the in-context classification setting of
//!   tests/all/query_independence.rs), its plain forward on `[demos ; query]` equals the step run on
//!   `[demos ; query]` with the demonstrations as the training part, for any query: what lets an
//!   evaluation train once per demonstration set and score every query by plain forwards.
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use crate::common::*;
use burn::tensor::{DType, Int, Tensor, TensorData};
use tint_sim::llama::{LlamaParams, LlamaReference, LlamaTintConfig};
use tint_sim::{FunctionalReference, SimInput, StepConfig, TintConfig, TintStep};

/// Demonstrations: three of four tokens each (three "words" and a label word).
const DEMO_LEN: usize = 12;
/// Positions of the demonstrations' label words (the label-only loss's targets).
const LABEL_TARGETS: [usize; 3] = [3, 7, 11];
/// Query tokens after the demonstrations.
const QUERY_LEN: usize = 6;
/// The updated model's plain forward vs the step's final forward on the same ids: the same ops
/// on the same tensors in the same order (measured: 0, equal to the last bit in f32 and f64); the
/// bound only leaves room for a backend that reorders a reduction between two calls.
const SAME_CODE_TOL: f64 = 1e-6;
/// Trained on the demonstrations alone vs on `[demos ; query]` with the demonstrations as the
/// training part, f64: the query rows contribute exact zeros to the update, but the two steps run
/// on sequences of different lengths, so the weight-gradient sums may be ordered differently:
/// f64 round-off (1e-16) amplified by the finite differences (s = 1000). Measured: 3e-16 (micro
/// GPT-2), 6e-15 (tiny LLaMA, logits of order 10). A query-dependent term would be of the order
/// of the update (≥ [`MIN_UPDATE`]).
const TRAIN_ONCE_F64_TOL: f64 = 1e-9;
/// The same in f32 (the evaluations' precision): f32 round-off (6e-8) amplified by the finite
/// differences (s = 1000, docs/construction.md §9.4). Measured: 2e-7 (micro GPT-2), 4e-6 (tiny
/// LLaMA, logits of order 10); the bound is 25 times the larger and 500 times below the update.
const TRAIN_ONCE_F32_TOL: f64 = 1e-4;
/// The step must move the logits by at least this much, so that the equalities above are not
/// those of two unchanged models.
const MIN_UPDATE: f64 = 0.05;

fn ids(tokens: &[i64]) -> Tensor<TestBackend, 2, Int> {
    Tensor::from_data(
        TensorData::new(tokens.to_vec(), [1, tokens.len()]),
        &Default::default(),
    )
}

fn tokens(seed: u64, n: usize, vocab: usize) -> Vec<i64> {
    let mut rng = SeededRng::new(seed);
    (0..n)
        .map(|_| (rng.next_u64() % vocab as u64) as i64)
        .collect()
}

/// `sequence` with its first `DEMO_LEN` tokens as the training part, label-only or full-context.
fn demo_input(sequence: &[i64], label_only: bool) -> SimInput<TestBackend> {
    let len = sequence.len();
    let mut input = SimInput::with_train_lengths(ids(sequence), &[DEMO_LEN]).unwrap();
    if label_only {
        let mask: Vec<bool> = (0..len).map(|t| LABEL_TARGETS.contains(&t)).collect();
        input = input.with_gradient_mask(bool_tensor(mask, [1, len], &Default::default()));
    }
    input
}

fn data(t: Tensor<TestBackend, 3>) -> TensorData {
    t.into_data()
}

/// Both properties for one engine (`name`) over a vocabulary of `vocab` tokens.
fn check(name: &str, engine: &dyn TintStep<TestBackend>, vocab: usize, train_once_tol: f64) {
    let demos = tokens(62, DEMO_LEN, vocab);
    for label_only in [true, false] {
        let name = format!("{name}, label_only {label_only}");
        // Same sequence: plain forward of the updated weights == the step's final logits.
        let input = demo_input(&demos, label_only);
        let (output, updated) = engine.updated(&input).expect("a reference").unwrap();
        let plain = updated.logits(ids(&demos)).unwrap();
        let same = max_abs_diff(&data(plain), &data(output.final_logits.clone()));
        let update = max_abs_diff(&data(output.first_logits), &data(output.final_logits));
        eprintln!("{name}: update {update:e}, plain forward vs final logits {same:e}");
        assert!(update >= MIN_UPDATE, "{name}: update {update} too small");
        assert!(
            same <= SAME_CODE_TOL,
            "{name}: plain forward differs by {same}"
        );
        // Trained once on the demonstrations, scored on several queries.
        for seed in [63, 64, 65] {
            let sequence = [demos.clone(), tokens(seed, QUERY_LEN, vocab)].concat();
            let per_query = engine.forward(&demo_input(&sequence, label_only)).unwrap();
            let once = updated.logits(ids(&sequence)).unwrap();
            let between = max_abs_diff(&data(once), &data(per_query.final_logits));
            eprintln!("{name}, query {seed}: train once vs per query {between:e}");
            assert!(
                between <= train_once_tol,
                "{name}, query {seed}: the update trained once differs by {between}"
            );
        }
    }
    // One update per sequence: a batch is refused.
    let two = Tensor::cat(vec![ids(&demos), ids(&demos)], 0);
    let batch = SimInput::with_train_lengths(two, &[DEMO_LEN, DEMO_LEN]).unwrap();
    assert!(engine.updated(&batch).expect("a reference").is_err());
}

fn gpt2_reference(dtype: DType) -> FunctionalReference<TestBackend> {
    let config = TintConfig {
        step: StepConfig {
            inner_lr: 0.02,
            ..StepConfig::default()
        },
        ..TintConfig::for_model(32, 8, 8)
    };
    FunctionalReference::new(micro_params().cast(dtype), config).unwrap()
}

#[test]
fn micro_gpt2_updated_model_scores_like_the_step() {
    check(
        "micro GPT-2 f64",
        &gpt2_reference(DType::F64),
        4096,
        TRAIN_ONCE_F64_TOL,
    );
    check(
        "micro GPT-2 f32",
        &gpt2_reference(DType::F32),
        4096,
        TRAIN_ONCE_F32_TOL,
    );
}

#[test]
fn micro_gpt2_plain_forward_checks_its_input() {
    let reference = gpt2_reference(DType::F32);
    // The unchanged weights' plain forward is the step's first pass.
    let sequence = tokens(7, 20, 4096);
    let first = reference
        .forward(&demo_input(&sequence, false))
        .unwrap()
        .first_logits;
    let plain = reference.logits(ids(&sequence)).unwrap();
    assert!(max_abs_diff(&data(plain), &data(first)) <= SAME_CODE_TOL);
    // Ids outside the vocabulary or longer than the positions are typed errors.
    assert!(reference.logits(ids(&[1, 4096])).is_err());
    assert!(reference.logits(ids(&tokens(8, 65, 4096))).is_err());
}

#[test]
fn tiny_llama_updated_model_scores_like_the_step() {
    let dir = repo_root().join("fixtures/llama/tiny");
    let model = tint_aux::load_model::<TestBackend>(&dir, &Default::default()).unwrap();
    let config = LlamaTintConfig {
        step: StepConfig {
            inner_lr: 0.1,
            ..StepConfig::default()
        },
        ..LlamaTintConfig::default()
    };
    for (dtype, tol) in [
        (DType::F64, TRAIN_ONCE_F64_TOL),
        (DType::F32, TRAIN_ONCE_F32_TOL),
    ] {
        let params = LlamaParams::from_aux(&model).unwrap().cast(dtype);
        let reference = LlamaReference::from_params(params, config.clone()).unwrap();
        check(&format!("tiny LLaMA {dtype:?}"), &reference, 97, tol);
    }
}
