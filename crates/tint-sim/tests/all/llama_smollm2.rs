//! The LLaMA functional reference on SmolLM2-135M-Instruct (Q4_1 GGUF, tied embeddings, 9 query /
//! 3 KV heads, 30 layers).
//!
//! Needs the GGUF in the asset cache (`cargo xtask fetch smollm2`; `$TINT_CACHE` or
//! `<repo>/.cache/assets`). Without it the tests print a note and pass, unless
//! `TINT_REQUIRE_SMOLLM2=1` is set (CI), in which case they fail.
//!
//! The two 256-token tests are `#[ignore]`d (a minute or two each in a dev build) and run by
//! `.ci/run` in a step of their own: `smollm2_sotu_blocks_t256` checks that the reference's step
//! moves the NLL of three real blocks' evaluation halves linearly in `η`, and
//! `smollm2_simulator_sotu_block_t256` checks the constructed network against the reference on a
//! 256-token block. Run them with
//! `cargo test --workspace --test all -- --ignored llama_smollm2:: --nocapture` (under
//! `/usr/bin/time -v` for the peak RSS).
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use std::path::{Path, PathBuf};
use tint_sim::StepConfig;

use burn::backend::Flex;
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::AuxModel;
use tint_sim::llama::{LlamaReference, LlamaTintConfig};

/// First pass vs the auxiliary forward in f32 (issue #4's 1e-4 acceptance bound): the simulator
/// computes the same function through `Ds`-wide rows with different op orders; over 30 layers with
/// logits of order 10–30 it measures 7.06e-5 (the functional reference measures 0: same ops).
const SMOLLM2_FORWARD_TOL: f32 = 1e-4;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn gguf_path() -> Option<PathBuf> {
    let cache = std::env::var_os("TINT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache/assets"));
    let path = cache.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if path.is_file() {
        Some(path)
    } else {
        // CI fetches the model first and sets TINT_REQUIRE_SMOLLM2=1, so a missing file fails there
        // instead of passing silently.
        assert!(
            std::env::var_os("TINT_REQUIRE_SMOLLM2").is_none(),
            "TINT_REQUIRE_SMOLLM2 is set but {} is missing",
            path.display()
        );
        eprintln!(
            "skipping: {} not found (run `cargo xtask fetch smollm2`)",
            path.display()
        );
        None
    }
}

fn sotu_ids(path: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(repo_root().join("fixtures/text/sotu-1790-washington.txt"))
        .expect("SOTU fixture text");
    tint_aux::gguf_tokenizer(path)
        .expect("GGUF tokenizer")
        .encode(&text)
        .expect("tokenizes")
}

fn block(ids: &[u32]) -> Tensor<Flex, 2, Int> {
    let ids: Vec<i64> = ids.iter().map(|&t| t as i64).collect();
    let n = ids.len();
    Tensor::from_data(TensorData::new(ids, [1, n]), &Default::default())
}

fn all_finite(t: &Tensor<Flex, 3>) -> bool {
    t.to_data()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .all(|v| v.is_finite())
}

#[test]
fn smollm2_first_pass_equals_aux_forward_and_step_is_finite() {
    let Some(path) = gguf_path() else { return };
    let model: AuxModel<Flex> = tint_aux::load_model(&path, &Default::default()).unwrap();
    let ids = sotu_ids(&path);
    let input = block(&ids[..48]);
    let config = LlamaTintConfig {
        step: StepConfig {
            n_simulation_layers: Some(2),
            inner_lr: 1e-4,
            ..StepConfig::default()
        },
        ..Default::default()
    };
    let out = LlamaReference::new(&model, config)
        .unwrap()
        .forward_with_train_lengths(input.clone(), &[24])
        .unwrap();
    let expected = model.forward(input).unwrap();
    let first = max_abs_diff(out.first_logits.clone(), expected);
    eprintln!("SmolLM2 reference first pass vs auxiliary forward: {first:e}");
    assert!(
        first < SMOLLM2_FORWARD_TOL as f64,
        "first pass differs by {first}"
    );
    assert!(all_finite(&out.final_logits));
    let moved = (out.final_logits - out.first_logits)
        .abs()
        .max()
        .into_scalar();
    assert!(moved > 0.0, "the step must change the logits");
    assert!(out.final_loss.mean().is_finite());
}

/// The step's first order in `η`, on real text at a real length: the reference's first pass is the
/// auxiliary's forward (within [`SMOLLM2_FORWARD_TOL`]), and for small `η` the change of the
/// evaluation NLL is linear in `η` (a first-order Taylor step: `ΔL(η) = −η ⟨∇L_eval, G⟩ +
/// O(η²)`), so ten times the step size moves it ten times as far, within
/// [`SMOLLM2_LINEAR_RATIO_TOL`]. A wrong sign, scale or missing term of the step breaks the
/// ratio or the direction; run in CI with `--ignored` (`.ci/run`).
#[test]
#[ignore = "about a minute in a dev build; run by .ci/run with --ignored"]
fn smollm2_sotu_blocks_t256() {
    let Some(path) = gguf_path() else { return };
    let model: AuxModel<Flex> = tint_aux::load_model(&path, &Default::default()).unwrap();
    let ids = sotu_ids(&path);
    let (seq_length, train_length) = (256, 128);
    let mut moved = Vec::new();
    for lr in [1e-5, 1e-4] {
        let config = LlamaTintConfig {
            step: StepConfig {
                n_simulation_layers: Some(4),
                inner_lr: lr,
                ..StepConfig::default()
            },
            ..Default::default()
        };
        let reference = LlamaReference::new(&model, config).unwrap();
        for (b, chunk) in ids.chunks_exact(seq_length).take(3).enumerate() {
            let start = std::time::Instant::now();
            let out = reference
                .forward_with_train_lengths(block(chunk), &[train_length])
                .unwrap();
            assert!(all_finite(&out.final_logits));
            if lr == 1e-5 {
                let first = max_abs_diff(
                    out.first_logits.clone(),
                    model.forward(block(chunk)).unwrap(),
                );
                assert!(
                    first < SMOLLM2_FORWARD_TOL as f64,
                    "block {b}: first pass differs from the auxiliary forward by {first}"
                );
            }
            let (before, after) = (out.first_loss.mean(), out.final_loss.mean());
            moved.push(after - before);
            println!(
                "lr {lr:e} block {b}: eval NLL {before:.6} -> {after:.6} ({} targets, {:.1} s)",
                out.final_loss.n_targets[0],
                start.elapsed().as_secs_f64()
            );
        }
    }
    for b in 0..3 {
        let (small, large) = (moved[b], moved[3 + b]);
        let ratio = large / small;
        println!(
            "block {b}: the NLL moves {small:e} at 1e-5, {large:e} at 1e-4 (ratio {ratio:.3})"
        );
        assert!(
            small != 0.0 && (ratio - 10.0).abs() <= SMOLLM2_LINEAR_RATIO_TOL,
            "block {b}: the NLL moves {small:e} at 1e-5 and {large:e} at 1e-4 (ratio {ratio})"
        );
    }
}

/// How far from 10 the ratio of the NLL's moves at `η` = 1e-4 and 1e-5 may be: the second-order
/// term and float32 rounding of NLLs of ~3.5 moved by ~5e-4 (about 1e-6 each, 0.2 % of the small
/// move); measured 8.6–9.3 on the three blocks (2026-12-03, flex), 2.5 keeps a sign or scale error
/// (ratio ≤ 0 or ~1, ~100) out.
const SMOLLM2_LINEAR_RATIO_TOL: f64 = 2.5;

/// f32 with exact derivatives: simulator and reference compute the same step by different op
/// orders; measured 8.4e-5 on logits of order 10–30 that the step moves by ~0.7 (top 2 layers,
/// lr 1e-4); 1e-3 (0.15% of the step) leaves margin while a missing term fails.
const SMOLLM2_F32_EXACT_TOL: f64 = 1e-3;
/// f64 with finite differences (s = 1000): measured 2.8e-10; 1e-6 is the GPT-2 acceptance bound.
/// (In f32 the finite differences are not usable as an equality check on SmolLM2: the residual
/// stream has massive activations (max |h| ~ 2e4), so the step γ dy / s is a tiny fraction of |x|
/// and f32 cancellation makes the backward signals noisy in both implementations: the f32
/// reference differs from the f64 one by 0.19 for a step of 0.68, docs/tint-llama.md.)
const SMOLLM2_F64_TOL: f64 = 1e-6;

fn max_abs_diff(a: Tensor<Flex, 3>, b: Tensor<Flex, 3>) -> f64 {
    (a - b)
        .abs()
        .max()
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .unwrap()[0]
}

fn sotu_batch(ids: &[u32], batch_size: usize, seq_length: usize) -> Tensor<Flex, 2, Int> {
    let rows: Vec<i64> = (0..batch_size)
        .flat_map(|b| ids[b * 3 * seq_length..b * 3 * seq_length + seq_length].to_vec())
        .map(|t| t as i64)
        .collect();
    Tensor::from_data(
        TensorData::new(rows, [batch_size, seq_length]),
        &Default::default(),
    )
}

#[test]
fn smollm2_simulator_top2_equals_aux_forward_and_reference() {
    use burn::tensor::DType;
    use tint_sim::llama::{LlamaParams, LlamaSimulator, LlamaSimulatorConfig};
    use tint_sim::{DerivativeMode, Execution};
    let Some(path) = gguf_path() else { return };
    let model: AuxModel<Flex> = tint_aux::load_model(&path, &Default::default()).unwrap();
    let ids = sotu_ids(&path);
    // (dtype, derivatives, sequences, tolerance of the final logits, execution). The structured
    // execution runs the 28 lower blocks as plain blocks on the token columns (f32 only: the
    // f64 case is the slow one and the tiny fixtures check that path in f64).
    for (dtype, derivatives, batch_size, tol, execution) in [
        (
            DType::F32,
            DerivativeMode::Exact,
            2,
            SMOLLM2_F32_EXACT_TOL,
            Execution::Constructed,
        ),
        (
            DType::F32,
            DerivativeMode::Exact,
            2,
            SMOLLM2_F32_EXACT_TOL,
            Execution::Structured,
        ),
        (
            DType::F64,
            DerivativeMode::FiniteDifference,
            1,
            SMOLLM2_F64_TOL,
            Execution::Constructed,
        ),
    ] {
        let input_ids = sotu_batch(&ids, batch_size, 24);
        let train_lengths = [12, 16];
        let input =
            tint_sim::SimInput::with_train_lengths(input_ids.clone(), &train_lengths[..batch_size])
                .unwrap();
        let step = LlamaTintConfig {
            step: StepConfig {
                n_simulation_layers: Some(2),
                inner_lr: 1e-4,
                derivatives,
                ..StepConfig::default()
            },
            ..Default::default()
        };
        let params = LlamaParams::from_aux(&model).unwrap().cast(dtype);
        let config = LlamaSimulatorConfig {
            execution,
            ..LlamaSimulatorConfig::for_model(576, 9, step.clone())
        };
        let out = LlamaSimulator::from_params(params.clone(), config)
            .unwrap()
            .forward(&input)
            .unwrap();
        let reference = LlamaReference::from_params(params, step)
            .unwrap()
            .forward(&input)
            .unwrap();
        let cast = |t: Tensor<Flex, 3>| t.cast(DType::F64);
        let last = max_abs_diff(cast(out.final_logits), cast(reference.final_logits.clone()));
        let moved = max_abs_diff(
            cast(reference.first_logits.clone()),
            cast(reference.final_logits),
        );
        eprintln!(
            "SmolLM2 simulator (top 2 layers, {dtype:?}, {derivatives:?}, {execution:?}): final \
             logits vs reference {last:e}, the step moves them by {moved:e}"
        );
        assert!(
            last < tol,
            "{dtype:?}, {execution:?}: final logits differ by {last}"
        );
        assert!(moved > 100.0 * tol, "the step moves the logits by {moved}");
        if dtype == DType::F32 {
            let first = max_abs_diff(out.first_logits, model.forward(input_ids).unwrap());
            eprintln!(
                "SmolLM2 simulator ({execution:?}) first pass vs auxiliary forward: {first:e}"
            );
            assert!(
                first < SMOLLM2_FORWARD_TOL as f64,
                "first pass differs by {first}"
            );
        }
    }
}

/// The constructed network on real text at a real length: SmolLM2's top 4 layers (by default;
/// `TINT_SMOLLM2_N_SIM`) on a 256-token block of the SOTU address, 128 training tokens; its final
/// logits equal the functional reference's within [`SMOLLM2_F32_T256_TOL`], and the step moves
/// them far more than that. Run in CI with `--ignored` (`.ci/run`); under `/usr/bin/time -v` it
/// gives the simulator's peak RSS.
#[test]
#[ignore = "about two minutes in a dev build; run by .ci/run with --ignored"]
fn smollm2_simulator_sotu_block_t256() {
    use tint_sim::llama::{LlamaSimulator, LlamaSimulatorConfig};
    let Some(path) = gguf_path() else { return };
    let model: AuxModel<Flex> = tint_aux::load_model(&path, &Default::default()).unwrap();
    let ids = sotu_ids(&path);
    let n_sim: usize = std::env::var("TINT_SMOLLM2_N_SIM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    // TINT_SMOLLM2_EXACT=1: exact RMSNorm / SwiGLU derivatives instead of finite differences.
    let derivatives = if std::env::var_os("TINT_SMOLLM2_EXACT").is_some() {
        tint_sim::DerivativeMode::Exact
    } else {
        tint_sim::DerivativeMode::FiniteDifference
    };
    let step = LlamaTintConfig {
        step: StepConfig {
            n_simulation_layers: Some(n_sim),
            inner_lr: 1e-4,
            derivatives,
            ..StepConfig::default()
        },
        ..Default::default()
    };
    let start = std::time::Instant::now();
    let simulator = LlamaSimulator::new(
        &model,
        LlamaSimulatorConfig::for_model(576, 9, step.clone()),
    )
    .unwrap();
    let built = start.elapsed().as_secs_f64();
    let out = simulator
        .forward_with_train_lengths(block(&ids[..256]), &[128])
        .unwrap();
    let reference = LlamaReference::new(&model, step)
        .unwrap()
        .forward_with_train_lengths(block(&ids[..256]), &[128])
        .unwrap();
    let last = max_abs_diff(out.final_logits, reference.final_logits.clone());
    let moved = max_abs_diff(reference.first_logits, reference.final_logits);
    println!(
        "SmolLM2 simulator, top {n_sim} layers, {derivatives:?}, T = 256, train 128: built in {built:.1} s, ran in {:.1} s; \
         eval NLL {:.4} -> {:.4} (reference {:.4} -> {:.4}); final logits vs reference {last:e}, \
         moved by the step {moved:e}; {} parameters",
        start.elapsed().as_secs_f64() - built,
        out.first_loss.mean(),
        out.final_loss.mean(),
        reference.first_loss.mean(),
        reference.final_loss.mean(),
        simulator.num_params()
    );
    assert!(last < SMOLLM2_F32_T256_TOL, "final logits differ by {last}");
    assert!(
        moved > 100.0 * SMOLLM2_F32_T256_TOL,
        "the step moves the logits by {moved}"
    );
}

/// Constructed network vs functional reference in float32 with the same derivative mode, SmolLM2
/// top 4 layers, T = 256: the same step by different op orders (the `Ds`-wide rows); measured
/// 7.8e-5 with finite differences (2026-12-03, flex) on logits of order 10–30; 1e-3, as
/// [`SMOLLM2_F32_EXACT_TOL`] at 24 tokens, leaves margin while a missing term fails.
const SMOLLM2_F32_T256_TOL: f64 = 1e-3;
