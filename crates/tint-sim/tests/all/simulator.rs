//! The constructed TinT simulator against the auxiliary forward pass, the functional reference
//! (docs/construction.md §9) and the official golden outputs.
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use crate::common::*;
use burn::tensor::DType;
use tint_aux::AuxModel;
use tint_sim::StepConfig;
use tint_sim::{
    Activation, AuxDims, AuxParams, FunctionalReference, LossGradientKind, SimInput, TintConfig,
    TintSimulator,
};

/// Columns of the golden logits kept in the fixture.
const VOCAB_SLICE: usize = 64;
/// First pass in f32: the same forward computed through `Ds`-wide rows; the official code achieves
/// 1.5e-7 on these logits, 1e-4 is the acceptance bound.
const FIRST_PASS_TOL: f64 = 1e-4;
/// f32 final logits: the finite differences (s = 1000) amplify round-off to ~2e-3 for an update of
/// ~0.6 (docs/construction.md §9.4); 5e-3 is the acceptance bound.
const FINAL_F32_TOL: f64 = 5e-3;
/// f64 with exact gates: round-off amplified by s stays ~1e-11; 1e-6 is the acceptance bound.
const FINAL_F64_TOL: f64 = 1e-6;
/// The f32 bound 5e-3 is meant relative to an update "of order 1" (issue #4): every comparison
/// needs the step to move the logits by at least 0.3, so 5e-3 is at most ~1.7% of the update.
const MIN_UPDATE: f64 = 0.3;
/// Inner learning rates chosen so that every configuration moves the logits by at least
/// [`MIN_UPDATE`] (measured updates are printed by each test).
const MICRO_INNER_LR: f64 = 0.02;
const S3_INNER_LR: f64 = 1e-3;
/// The OPT fixture's weights are small (init std 0.02), so it needs larger steps.
const OPT_ONE_STEP_INNER_LR: f64 = 0.2;
const OPT_THREE_STEPS_INNER_LR: f64 = 0.1;
const QUADRATIC_INNER_LR: f64 = 0.02;
const MEAN_EMBEDDING_INNER_LR: f64 = 0.02;

fn golden_config() -> TintConfig {
    TintConfig {
        step: StepConfig {
            inner_lr: 0.01,
            ..StepConfig::default()
        },
        official_compat: true,
        reuse_forward_blocks: true,
        reuse_backward_blocks: true,
        restrict_prefixes: true,
        ..TintConfig::for_model(32, 8, 8)
    }
}

fn fixture() -> Fixture {
    Fixture::open(repo_root().join("crates/tint-sim/tests/fixtures/micro_s4_golden.safetensors"))
}

#[test]
fn golden_f32_matches_official_tint() {
    let device = Default::default();
    let fx = fixture();
    let sim = TintSimulator::new(&micro_params(), golden_config()).unwrap();
    let input = golden_input::<TestBackend>(&fx, &device);
    let out = sim.forward(&input).unwrap();
    // The simulated first pass against tint-aux's plain GPT-2 forward, over the whole vocabulary.
    let model = tint_aux::load_model::<TestBackend>(&micro_model_dir(), &device).unwrap();
    let plain = model.forward(input.input_ids.clone()).unwrap();
    let first_vs_aux = max_abs_diff(&out.first_logits.clone().into_data(), &plain.into_data());
    eprintln!("simulator f32 first pass vs tint-aux GPT-2 forward: {first_vs_aux:e}");
    assert!(
        first_vs_aux < FIRST_PASS_TOL,
        "first pass differs from the auxiliary forward by {first_vs_aux}"
    );
    let first = vocab_slice(out.first_logits, VOCAB_SLICE);
    let first_err = max_abs_diff(&first, &fx.data("tint_original_logits_f32"));
    let final_err = max_abs_diff(
        &vocab_slice(out.final_logits, VOCAB_SLICE),
        &fx.data("tint_final_logits_f32"),
    );
    eprintln!("simulator f32 vs official TinT: first {first_err:e}, final {final_err:e}");
    assert!(
        first_err < FIRST_PASS_TOL,
        "first pass differs by {first_err}"
    );
    assert!(
        final_err < FINAL_F32_TOL,
        "final logits differ by {final_err}"
    );
}

#[test]
fn golden_f64_matches_official_tint_with_exact_gates() {
    let device = Default::default();
    let fx = fixture();
    let sim = TintSimulator::new(&micro_params().cast(DType::F64), golden_config()).unwrap();
    let out = sim
        .forward(&golden_input::<TestBackend>(&fx, &device))
        .unwrap();
    assert_eq!(out.final_logits.dtype(), DType::F64);
    let err = max_abs_diff(
        &vocab_slice(out.final_logits, VOCAB_SLICE),
        &fx.data("tint_final_logits_f64_gate30"),
    );
    eprintln!("simulator f64 vs official TinT (gate 30): {err:e}");
    assert!(err < FINAL_F64_TOL, "final logits differ by {err}");
}

/// A seeded random S = 3 model: D = 24, P = 8, Ds = 96, Hs = 16 (head 6 = aux head size), 3 layers.
fn s3_model() -> (AuxParams<TestBackend>, TintConfig) {
    let dims = AuxDims {
        d_model: 24,
        n_heads: 4,
        n_layers: 3,
        d_inner: 96,
        vocab_size: 64,
        n_positions: 16,
    };
    let aux = SeededRng::new(3).aux_params(dims, Activation::GeluNew);
    let config = TintConfig {
        step: StepConfig {
            inner_lr: S3_INNER_LR,
            ..StepConfig::default()
        },
        ..TintConfig::for_model(24, 8, 6)
    };
    (aux, config)
}

/// Seeded uniform token ids with per-sequence training lengths.
fn random_input(
    seed: u64,
    batch_size: usize,
    seq_length: usize,
    vocab: usize,
    lengths: &[usize],
) -> SimInput<TestBackend> {
    let ids = SeededRng::new(seed).ids(batch_size, seq_length, vocab);
    train_lengths_input(ids, lengths)
}

/// The pre-LN OPT fixture (D = 32, 4 heads, 2 layers, ffn 64 = 2 chunks, ReLU, vocabulary 512,
/// positions offset by 2) and its simulator parameters.
fn opt_model() -> (AuxModel<TestBackend>, AuxParams<TestBackend>) {
    let model = tint_aux::load_model::<TestBackend>(
        &repo_root().join("fixtures/aux/opt-pre-ln"),
        &Default::default(),
    )
    .expect("OPT fixture loads");
    let aux = AuxParams::from_aux(&model).expect("pre-LN OPT converts");
    (model, aux)
}

/// Simulator and functional reference with the same switches, in f32 and f64; with `model`, the f32
/// simulated first pass is also compared with the plain auxiliary forward of tint-aux.
fn check_against_reference(
    aux: &AuxParams<TestBackend>,
    config: TintConfig,
    input: &SimInput<TestBackend>,
    model: Option<&AuxModel<TestBackend>>,
) {
    for dtype in [DType::F32, DType::F64] {
        check_dtype_against_reference(aux, config.clone(), input, model, dtype);
    }
}

/// [`check_against_reference`] for one dtype (f32: [`FINAL_F32_TOL`], f64: [`FINAL_F64_TOL`]).
fn check_dtype_against_reference(
    aux: &AuxParams<TestBackend>,
    config: TintConfig,
    input: &SimInput<TestBackend>,
    model: Option<&AuxModel<TestBackend>>,
    dtype: DType,
) {
    let aux = aux.cast(dtype);
    let sim = TintSimulator::new(&aux, config.clone())
        .unwrap()
        .forward(input)
        .unwrap();
    let reference = FunctionalReference::new(aux, config)
        .unwrap()
        .forward(input)
        .unwrap();
    if let (Some(model), DType::F32) = (model, dtype) {
        let plain = model.forward(input.input_ids.clone()).unwrap();
        let err = max_abs_diff(&sim.first_logits.clone().into_data(), &plain.into_data());
        eprintln!("F32: first pass vs auxiliary forward {err:e}");
        assert!(
            err < FIRST_PASS_TOL,
            "first pass differs from the auxiliary forward by {err}"
        );
    }
    let first = max_abs_diff(
        &sim.first_logits.clone().into_data(),
        &reference.first_logits.clone().into_data(),
    );
    let last = max_abs_diff(
        &sim.final_logits.clone().into_data(),
        &reference.final_logits.clone().into_data(),
    );
    let update = max_abs_diff(
        &reference.first_logits.into_data(),
        &reference.final_logits.into_data(),
    );
    eprintln!("{dtype:?}: first {first:e}, final {last:e}, update {update:e}");
    assert!(
        update >= MIN_UPDATE,
        "the update {update} is not of order 1 (needs >= {MIN_UPDATE})"
    );
    let tol = if dtype == DType::F64 {
        FINAL_F64_TOL
    } else {
        FINAL_F32_TOL
    };
    assert!(first < FIRST_PASS_TOL, "first pass differs by {first}");
    assert!(last < tol, "{dtype:?}: final logits differ by {last}");
}

#[test]
fn s4_micro_top_layer_two_steps_matches_reference() {
    let config = TintConfig {
        step: StepConfig {
            inner_lr: MICRO_INNER_LR,
            n_simulation_layers: Some(1),
            n_forward_backward: 2,
            ..golden_config().step.clone()
        },
        official_compat: false,
        reuse_forward_blocks: false,
        reuse_backward_blocks: false,
        ..golden_config()
    };
    let model =
        tint_aux::load_model::<TestBackend>(&micro_model_dir(), &Default::default()).unwrap();
    check_against_reference(
        &micro_params(),
        config,
        &random_input(1, 2, 12, 4096, &[6, 9]),
        Some(&model),
    );
}

#[test]
fn s4_micro_top_layer_three_steps_reuse_on_matches_reference() {
    let config = TintConfig {
        step: StepConfig {
            inner_lr: MICRO_INNER_LR,
            n_simulation_layers: Some(1),
            n_forward_backward: 3,
            ..golden_config().step.clone()
        },
        official_compat: false,
        reuse_forward_blocks: true,
        reuse_backward_blocks: true,
        ..golden_config()
    };
    check_against_reference(
        &micro_params(),
        config,
        &random_input(2, 2, 12, 4096, &[7, 10]),
        None,
    );
}

#[test]
fn s3_random_three_steps_reuse_off_matches_reference() {
    let (aux, config) = s3_model();
    let config = TintConfig {
        step: StepConfig {
            n_simulation_layers: Some(2),
            n_forward_backward: 3,
            ..config.step.clone()
        },
        official_compat: true,
        reuse_forward_blocks: false,
        reuse_backward_blocks: false,
        ..config
    };
    check_against_reference(&aux, config, &random_input(3, 2, 10, 64, &[5, 10]), None);
}

#[test]
fn s3_random_all_layers_one_step_matches_reference() {
    let (aux, config) = s3_model();
    let config = TintConfig {
        reuse_forward_blocks: true,
        reuse_backward_blocks: true,
        ..config
    };
    check_against_reference(&aux, config, &random_input(4, 1, 16, 64, &[8]), None);
}

#[test]
fn opt_top_layer_one_step_matches_reference() {
    let (model, aux) = opt_model();
    let config = TintConfig {
        step: StepConfig {
            inner_lr: OPT_ONE_STEP_INNER_LR,
            n_simulation_layers: Some(1),
            ..StepConfig::default()
        },
        ..TintConfig::for_model(32, 8, 8)
    };
    check_against_reference(
        &aux,
        config,
        &random_input(5, 2, 12, 512, &[6, 9]),
        Some(&model),
    );
}

#[test]
fn opt_top_layer_three_steps_reuse_on_matches_reference() {
    let (model, aux) = opt_model();
    let config = TintConfig {
        step: StepConfig {
            inner_lr: OPT_THREE_STEPS_INNER_LR,
            n_simulation_layers: Some(1),
            n_forward_backward: 3,
            ..StepConfig::default()
        },
        reuse_forward_blocks: true,
        reuse_backward_blocks: true,
        restrict_prefixes: true,
        ..TintConfig::for_model(32, 8, 8)
    };
    check_against_reference(
        &aux,
        config,
        &random_input(6, 2, 12, 512, &[8, 12]),
        Some(&model),
    );
}

#[test]
fn opt_top_layer_three_steps_reuse_off_matches_reference() {
    let (model, aux) = opt_model();
    let config = TintConfig {
        step: StepConfig {
            inner_lr: OPT_THREE_STEPS_INNER_LR,
            n_simulation_layers: Some(1),
            n_forward_backward: 3,
            ..StepConfig::default()
        },
        official_compat: true,
        ..TintConfig::for_model(32, 8, 8)
    };
    check_against_reference(
        &aux,
        config,
        &random_input(7, 1, 16, 512, &[10]),
        Some(&model),
    );
}

/// The non-default loss gradients (docs/construction.md §7: official `use_quad` and neither flag) through the
/// simulator and the functional reference, in f32 and f64, on the micro GPT-2 (top layer, 2 steps).
/// Both implementations share `loss::loss_gradient`, which tests/all/loss_gradient.rs checks against
/// plain loops; here the rest of the step (backward, descent, final forward) is compared.
#[test]
fn non_default_loss_gradients_match_reference() {
    for (kind, inner_lr) in [
        (LossGradientKind::Quadratic, QUADRATIC_INNER_LR),
        (LossGradientKind::MeanEmbedding, MEAN_EMBEDDING_INNER_LR),
    ] {
        eprintln!("{kind:?}:");
        let config = TintConfig {
            step: StepConfig {
                inner_lr,
                loss_gradient: kind,
                n_simulation_layers: Some(1),
                n_forward_backward: 2,
                ..golden_config().step.clone()
            },
            official_compat: false,
            ..golden_config()
        };
        check_against_reference(
            &micro_params(),
            config,
            &random_input(8, 2, 12, 4096, &[6, 9]),
            None,
        );
    }
}

#[test]
fn icl_and_gradient_masks_match_reference() {
    let device = Default::default();
    let (aux, config) = s3_model();
    let input = random_input(9, 2, 8, 64, &[8, 8]);
    // Label-only loss: only targets at odd positions; ICL mask: block-diagonal pairs of 4 tokens plus causal.
    let gradient: Vec<bool> = (0..16).map(|i| i % 2 == 1).collect();
    let icl: Vec<bool> = (0..2 * 64)
        .map(|k| {
            let (i, j) = ((k % 64) / 8, k % 8);
            i / 4 == j / 4 || j < 2
        })
        .collect();
    let input = input
        .with_gradient_mask(bool_tensor(gradient, [2, 8], &device))
        .with_icl_mask(bool_tensor(icl, [2, 8, 8], &device));
    let config = TintConfig {
        official_compat: true,
        ..config
    };
    check_against_reference(&aux, config, &input, None);
}
