//! Parameter counts, save/load, OPT support and error handling of the constructed simulator.

use crate::common::*;
use burn::tensor::{DType, Int, Tensor, TensorData};
use tint_sim::param_count::official_param_count;
use tint_sim::StepConfig;
use tint_sim::{FunctionalReference, SimError, SimInput, TintConfig, TintSimulator};

fn micro_config() -> TintConfig {
    TintConfig {
        step: StepConfig {
            inner_lr: 0.01,
            ..StepConfig::default()
        },
        reuse_forward_blocks: true,
        reuse_backward_blocks: true,
        restrict_prefixes: true,
        ..TintConfig::for_model(32, 8, 8)
    }
}

fn small_input(seq_length: usize) -> SimInput<TestBackend> {
    let device = Default::default();
    let ids: Vec<i64> = (0..2 * seq_length as i64)
        .map(|i| (i * 37 + 11) % 4096)
        .collect();
    let ids =
        Tensor::<TestBackend, 2, Int>::from_data(TensorData::new(ids, [2, seq_length]), &device);
    SimInput::with_train_lengths(ids, &[seq_length / 2, seq_length - 2]).unwrap()
}

#[test]
fn constructed_micro_model_has_the_official_parameter_count() {
    let aux = micro_params();
    let sim = TintSimulator::new(&aux, micro_config()).unwrap();
    // docs/construction.md §13: the official code prints 1,206,166 for the micro_s4 setting.
    assert_eq!(sim.num_params(), 1_206_166);
    let variants = [
        TintConfig {
            step: StepConfig {
                n_simulation_layers: Some(1),
                ..micro_config().step.clone()
            },
            ..micro_config()
        },
        TintConfig {
            step: StepConfig {
                n_forward_backward: 2,
                ..micro_config().step.clone()
            },
            reuse_forward_blocks: false,
            reuse_backward_blocks: false,
            ..micro_config()
        },
        TintConfig {
            step: StepConfig {
                n_simulation_layers: Some(1),
                n_forward_backward: 3,
                ..micro_config().step.clone()
            },
            reuse_forward_blocks: false,
            ..micro_config()
        },
    ];
    for config in variants {
        let sim = TintSimulator::new(&aux, config.clone()).unwrap();
        let analytic = official_param_count(&aux.dims(), &config, aux.max_seq_length()).unwrap();
        assert_eq!(sim.num_params(), analytic.total, "{config:?}");
    }
}

#[test]
fn saved_and_loaded_simulator_gives_identical_logits() {
    let device = Default::default();
    let config = TintConfig {
        step: StepConfig {
            n_simulation_layers: Some(1),
            ..micro_config().step.clone()
        },
        ..micro_config()
    };
    let sim = TintSimulator::new(&micro_params(), config).unwrap();
    let dir = std::env::temp_dir().join(format!("tint-sim-save-{}", std::process::id()));
    sim.save(&dir).unwrap();
    let loaded = TintSimulator::<TestBackend>::load(&dir, &device).unwrap();
    let input = small_input(12);
    let a = sim.forward(&input).unwrap();
    let b = loaded.forward(&input).unwrap();
    assert_eq!(loaded.config(), sim.config());
    assert_eq!(a.final_logits.into_data(), b.final_logits.into_data());
    assert_eq!(a.first_logits.into_data(), b.first_logits.into_data());
    std::fs::remove_dir_all(&dir).ok();
    let missing = TintSimulator::<TestBackend>::load(&dir, &device).unwrap_err();
    assert!(matches!(missing, SimError::Io { .. }), "{missing}");
}

#[test]
fn opt_pre_ln_simulator_matches_reference() {
    let device = Default::default();
    let model =
        tint_aux::load_model::<TestBackend>(&repo_root().join("fixtures/aux/opt-pre-ln"), &device)
            .unwrap();
    let aux = tint_sim::AuxParams::from_aux(&model)
        .unwrap()
        .cast(DType::F64);
    // OPT: D = 32, 4 heads, ffn 64 (2 chunks), ReLU, positions offset by 2.
    let config = TintConfig {
        step: StepConfig {
            inner_lr: 0.01,
            n_forward_backward: 2,
            ..StepConfig::default()
        },
        ..TintConfig::for_model(32, 8, 8)
    };
    let ids: Vec<i64> = (0..20).map(|i| (i * 53 + 7) % 512).collect();
    let ids = Tensor::<TestBackend, 2, Int>::from_data(TensorData::new(ids, [2, 10]), &device);
    let input = SimInput::with_train_lengths(ids, &[5, 7]).unwrap();
    let sim = TintSimulator::new(&aux, config.clone())
        .unwrap()
        .forward(&input)
        .unwrap();
    let reference = FunctionalReference::new(aux, config)
        .unwrap()
        .forward(&input)
        .unwrap();
    let first_vs_aux = max_abs_diff(
        &sim.first_logits.clone().into_data(),
        &model
            .forward(input.input_ids.clone())
            .unwrap()
            .cast(DType::F64)
            .into_data(),
    );
    // f64 simulator against the f32 aux forward: f32 round-off of an O(1) forward.
    assert!(
        first_vs_aux < 1e-4,
        "first pass differs from the OPT forward by {first_vs_aux}"
    );
    let err = max_abs_diff(
        &sim.final_logits.into_data(),
        &reference.final_logits.clone().into_data(),
    );
    let update = max_abs_diff(
        &reference.first_logits.into_data(),
        &reference.final_logits.into_data(),
    );
    assert!(update > 1e-3, "update too small to test: {update}");
    // f64 with exact gates (acceptance bound 1e-6).
    assert!(err < 1e-6, "final logits differ by {err}");
}

/// Post-LN OPT converts (docs/construction.md §16; its numerics: tests/all/opt_post_ln.rs and
/// tests/all/executions.rs); a pre-LN OPT without a final LayerNorm is still refused, by a typed error.
#[test]
fn post_ln_opt_converts_without_a_final_layer_norm() {
    let device = Default::default();
    let model =
        tint_aux::load_model::<TestBackend>(&repo_root().join("fixtures/aux/opt-post-ln"), &device)
            .unwrap();
    let aux = tint_sim::AuxParams::from_aux(&model).unwrap();
    assert_eq!(aux.norm_placement, tint_sim::params::NormPlacement::PostLn);
    assert!(aux.ln_f.is_none() && aux.lm_head.is_none());
    let tint_aux::AuxModel::Opt(mut opt) = model else {
        panic!("an OPT fixture")
    };
    opt.config.do_layer_norm_before = true;
    let err = tint_sim::AuxParams::from_aux(&tint_aux::AuxModel::Opt(opt)).unwrap_err();
    assert!(
        matches!(&err, SimError::UnsupportedModel(m) if m.contains("without a final LayerNorm")),
        "{err}"
    );
}

/// Each violated rule gives `InvalidConfig` whose message names the rule and the offending values
/// (micro GPT-2: D = 32, H = 4, 2 layers; the base config has P = 8, Ds = 160, Hs = 20).
#[test]
fn constraint_violations_are_reported() {
    let aux = micro_params();
    let cases: Vec<(TintConfig, &[&str])> = vec![
        (
            TintConfig {
                num_prefixes: 5,
                ..micro_config()
            },
            &["num_prefixes P = 5", "divide the model width D = 32"],
        ),
        (
            TintConfig {
                hidden_size: 128,
                ..micro_config()
            },
            &["hidden_size Ds = 128", "P = 8", "D (D/P + 1) = 160"],
        ),
        (
            TintConfig {
                num_prefixes: 16,
                hidden_size: 96,
                num_heads: 12,
                ..micro_config()
            },
            &["hidden_size Ds = 96", "at least 4 D = 128"],
        ),
        (
            TintConfig {
                num_heads: 7,
                ..micro_config()
            },
            &["num_heads Hs = 7", "divide hidden_size Ds = 160"],
        ),
        (
            TintConfig {
                num_heads: 32,
                ..micro_config()
            },
            &["head size Ds/Hs = 5", "divide D = 32"],
        ),
        (
            TintConfig {
                num_heads: 40,
                ..micro_config()
            },
            &[
                "num_heads Hs = 40",
                "auxiliary heads H = 4",
                "D/(Ds/Hs) = 8",
            ],
        ),
        (
            TintConfig {
                step: StepConfig {
                    n_simulation_layers: Some(3),
                    ..micro_config().step.clone()
                },
                ..micro_config()
            },
            &["n_simulation_layers = 3", "1..=2"],
        ),
        (
            TintConfig {
                step: StepConfig {
                    n_simulation_layers: Some(0),
                    ..micro_config().step.clone()
                },
                ..micro_config()
            },
            &["n_simulation_layers = 0", "1..=2"],
        ),
        (
            TintConfig {
                step: StepConfig {
                    n_forward_backward: 0,
                    ..micro_config().step.clone()
                },
                ..micro_config()
            },
            &["n_forward_backward", "at least 1"],
        ),
        (
            TintConfig {
                step: StepConfig {
                    inner_lr: f64::NAN,
                    ..micro_config().step.clone()
                },
                ..micro_config()
            },
            &["inner_lr = NaN", "not finite"],
        ),
        (
            TintConfig {
                step: StepConfig {
                    scale_embeddings: 0.0,
                    ..micro_config().step.clone()
                },
                ..micro_config()
            },
            &["scale_embeddings = 0", "> 0"],
        ),
        (
            TintConfig {
                epsilon: -1e-5,
                ..micro_config()
            },
            &["epsilon = -0.00001", "> 0"],
        ),
    ];
    for (config, expected) in cases {
        let err = TintSimulator::new(&aux, config.clone()).unwrap_err();
        assert!(
            matches!(err, SimError::InvalidConfig { .. }),
            "{config:?}: {err}"
        );
        let message = err.to_string();
        assert!(
            message.starts_with("invalid TinT configuration: "),
            "{message}"
        );
        for part in expected {
            assert!(message.contains(part), "{message:?} does not name {part:?}");
        }
    }
    let err = FunctionalReference::new(
        aux,
        TintConfig {
            step: StepConfig {
                n_forward_backward: 0,
                ..micro_config().step.clone()
            },
            ..micro_config()
        },
    )
    .unwrap_err();
    assert!(matches!(err, SimError::InvalidConfig { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "invalid TinT configuration: n_forward_backward = 0 must be at least 1"
    );
}

#[test]
fn mismatched_inputs_are_reported() {
    let device = Default::default();
    let sim = TintSimulator::new(&micro_params(), micro_config()).unwrap();
    let reference = FunctionalReference::new(micro_params(), micro_config()).unwrap();
    let input = small_input(8);
    let wrong_mask = SimInput::new(
        input.input_ids.clone(),
        bool_tensor(vec![true; 2 * 7], [2, 7], &device),
    );
    let out_of_vocab = SimInput::with_train_lengths(
        Tensor::<TestBackend, 2, Int>::from_data(
            TensorData::new(vec![4096i64, 1, 2, 3], [1, 4]),
            &device,
        ),
        &[2],
    )
    .unwrap();
    let too_long = small_input(65);
    let wrong_icl =
        input
            .clone()
            .with_icl_mask(bool_tensor(vec![true; 2 * 8 * 7], [2, 8, 7], &device));
    for bad in [wrong_mask, out_of_vocab, too_long, wrong_icl] {
        let err = sim.forward(&bad).unwrap_err();
        assert!(matches!(err, SimError::InvalidInput(_)), "{err}");
        let err = reference.forward(&bad).unwrap_err();
        assert!(matches!(err, SimError::InvalidInput(_)), "{err}");
    }
    let ids = input.input_ids.clone();
    assert!(matches!(
        SimInput::with_train_lengths(ids.clone(), &[1]),
        Err(SimError::InvalidInput(_))
    ));
    assert!(matches!(
        SimInput::with_train_lengths(ids, &[1, 9]),
        Err(SimError::InvalidInput(_))
    ));
}
