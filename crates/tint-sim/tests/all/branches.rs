//! Independent branches as parallel tasks (`tint_ops::branches`): on flex with more than one rayon
//! thread every engine runs the sequences of a batch as parallel tasks (`tint_sim::sequences`), and
//! the simulators run the MLP chunks, the backward and descent halves of a module and the Q/K/V
//! projections as parallel tasks. The outputs must equal those of one op stream (what a one-thread
//! pool, and every GPU backend, runs), for the GPT-2 simulator in both executions, its functional
//! reference, the LLaMA simulator and the LLaMA reference, for a single sequence and for batches
//! with optional gradient and ICL masks narrowed per sequence.
#![allow(clippy::print_stderr)] // measured differences are reported on the terminal

use std::path::PathBuf;

use crate::common::*;
use burn::tensor::Tensor;
use tint_ops::branches::runs_in_parallel;
use tint_sim::llama::LlamaTintConfig;
use tint_sim::llama::{LlamaParams, LlamaReference, LlamaSimulator, LlamaSimulatorConfig};
use tint_sim::{
    Execution, FunctionalReference, SimError, SimInput, SimOutput, StepConfig, TintConfig,
    TintSimulator,
};

/// f32 logits of order 1–10: each sequence runs the same ops on the same values in both forms; only
/// a batched product's blocking (and so its summation order) may differ from the single sequence's,
/// a few ulps (~1e-6) of the logits. A sequence mixed with another, dropped or reordered moves them
/// by O(1).
const F32_TOL: f64 = 1e-5;
/// Every compared step must move the final logits by at least this much.
const MIN_UPDATE: f64 = 0.01;

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool")
}

/// Runs `forward` in a one-thread pool (the batch as one op stream) and in a two-thread pool
/// (sequences as parallel tasks) and compares logits and losses.
fn check(name: &str, forward: &(dyn Fn() -> Result<SimOutput<TestBackend>, SimError> + Sync)) {
    let device = Default::default();
    let batched = pool(1).install(|| {
        assert!(!runs_in_parallel::<TestBackend>(&device));
        forward().unwrap()
    });
    let parallel = pool(2).install(|| {
        assert!(runs_in_parallel::<TestBackend>(&device));
        forward().unwrap()
    });
    let diff = |a: &Tensor<TestBackend, 3>, b: &Tensor<TestBackend, 3>| {
        assert_eq!(a.dims(), b.dims(), "{name}: shapes");
        max_abs_diff(&a.clone().into_data(), &b.clone().into_data())
    };
    let update = diff(&batched.first_logits, &batched.final_logits);
    let first = diff(&batched.first_logits, &parallel.first_logits);
    let last = diff(&batched.final_logits, &parallel.final_logits);
    eprintln!("{name}: first {first:e}, final {last:e}, update {update:e}");
    assert!(update >= MIN_UPDATE, "{name}: update {update} too small");
    assert!(
        first <= F32_TOL && last <= F32_TOL,
        "{name}: {first} / {last}"
    );
    for (a, b) in [
        (&batched.first_loss, &parallel.first_loss),
        (&batched.final_loss, &parallel.final_loss),
    ] {
        assert_eq!(a.n_targets, b.n_targets, "{name}: scored targets");
        for (x, y) in a.nll_sum.iter().zip(&b.nll_sum) {
            assert!(
                (x - y).abs() <= F32_TOL * x.abs().max(1.0),
                "{name}: nll {x} vs {y}"
            );
        }
    }
}

/// Three sequences with different training lengths; the second case adds a label-only gradient
/// mask and an ICL attention mask (a block-causal pattern) to exercise their per-sequence slices;
/// the third is one sequence (only the branches inside a step run in parallel).
fn inputs(vocab: usize, seq_length: usize) -> Vec<(&'static str, SimInput<TestBackend>)> {
    let device = Default::default();
    let ids = SeededRng::new(7).ids::<TestBackend>(3, seq_length, vocab);
    let plain = train_lengths_input(ids.clone(), &[4, seq_length - 2, 6]);
    let gradient: Vec<bool> = (0..3 * seq_length).map(|k| k % 3 != 1).collect();
    let icl: Vec<bool> = (0..3 * seq_length * seq_length)
        .map(|k| {
            let (b, i, j) = (
                k / (seq_length * seq_length),
                k / seq_length % seq_length,
                k % seq_length,
            );
            j <= i && (i - j < 5 + b || j == 0)
        })
        .collect();
    let masked = train_lengths_input(ids, &[5, 7, seq_length - 1])
        .with_gradient_mask(bool_tensor(gradient, [3, seq_length], &device))
        .with_icl_mask(bool_tensor(icl, [3, seq_length, seq_length], &device));
    let single = train_lengths_input(
        SeededRng::new(9).ids::<TestBackend>(1, seq_length, vocab),
        &[seq_length / 2],
    );
    vec![
        ("plain", plain),
        ("masked", masked),
        ("one sequence", single),
    ]
}

#[test]
fn gpt2_engines_give_the_same_batch_sequence_by_sequence() {
    let aux = micro_params();
    let step = StepConfig {
        inner_lr: 0.05,
        n_simulation_layers: Some(1),
        ..StepConfig::default()
    };
    for (what, input) in inputs(4096, 12) {
        for execution in [Execution::Structured, Execution::Constructed] {
            let config = TintConfig {
                step: step.clone(),
                execution,
                ..TintConfig::for_model(32, 8, 8)
            };
            let sim = TintSimulator::new(&aux, config).unwrap();
            check(&format!("GPT-2 {execution:?}, {what}"), &|| {
                sim.forward(&input)
            });
        }
        let config = TintConfig {
            step: step.clone(),
            ..TintConfig::for_model(32, 8, 8)
        };
        let reference = FunctionalReference::new(aux.clone(), config).unwrap();
        check(&format!("GPT-2 reference, {what}"), &|| {
            reference.forward(&input)
        });
    }
}

#[test]
fn llama_engines_give_the_same_batch_sequence_by_sequence() {
    // The tiny LLaMA fixture: D = 64, 2 layers, 4 query heads, 2 KV heads, SwiGLU.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/llama/tiny");
    let model = tint_aux::load_model::<TestBackend>(&dir, &Default::default()).unwrap();
    let params = LlamaParams::from_aux(&model).unwrap();
    let step = LlamaTintConfig {
        step: StepConfig {
            n_simulation_layers: Some(1),
            inner_lr: 0.05,
            ..StepConfig::default()
        },
        ..Default::default()
    };
    let reference = LlamaReference::from_params(params.clone(), step.clone()).unwrap();
    for (batch_size, lengths) in [(3, &[6, 9, 3][..]), (1, &[7][..])] {
        let input = SimInput::with_train_lengths(llama_ids(batch_size, 10, 0), lengths).unwrap();
        for execution in [Execution::Structured, Execution::Constructed] {
            let config = LlamaSimulatorConfig {
                execution,
                ..LlamaSimulatorConfig::for_model(64, 4, step.clone())
            };
            let sim = LlamaSimulator::from_params(params.clone(), config).unwrap();
            check(&format!("LLaMA {execution:?}, B = {batch_size}"), &|| {
                sim.forward(&input)
            });
        }
        check(&format!("LLaMA reference, B = {batch_size}"), &|| {
            reference.forward(&input)
        });
    }
}

/// Inputs whose masks do not match the ids are refused before the batch is split (an error naming
/// the shapes, not a panic in a per-sequence slice).
#[test]
fn mismatched_masks_are_refused_before_the_split() {
    let aux = micro_params();
    let sim = TintSimulator::new(&aux, TintConfig::for_model(32, 8, 8)).unwrap();
    let device = Default::default();
    let ids = SeededRng::new(3).ids::<TestBackend>(3, 8, 4096);
    let input = SimInput::new(ids, bool_tensor(vec![true; 16], [2, 8], &device));
    let err = pool(2).install(|| sim.forward(&input)).unwrap_err();
    assert!(
        err.to_string().contains("train_mask has shape [2, 8]"),
        "{err}"
    );
}
