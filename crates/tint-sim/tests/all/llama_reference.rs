//! The LLaMA functional reference on the tiny random LLaMA fixtures (grouped-query attention,
//! rotary embeddings, untied and tied LM heads): exactness against burn-autodiff SGD, the lr = 0
//! identity, finite differences against exact derivatives, descent, and typed errors.

use std::path::PathBuf;
use tint_sim::StepConfig;

use burn::backend::{Autodiff, Flex};
use burn::module::Param;
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Int, Tensor, TensorData, Tolerance};
use tint_aux::loss::next_token_nll;
use tint_aux::{
    sgd_update, AuxModel, DynEvalConfig, LossMask, LossReduction, ParamGroup, ParamInfo,
    ParamMapper, ParamSelection,
};
use tint_sim::llama::{LlamaParams, LlamaReference, LlamaTintConfig, LlamaUpdates};
use tint_sim::llama::{LlamaSimulator, LlamaSimulatorConfig};
use tint_sim::{AttentionBackwardMode, DerivativeMode, SimError, SimInput};

type Ad = Autodiff<Flex>;

/// f32 forward of the same function by two code paths (aux model vs reference): a few ulps of
/// logits of order 1–10 after 2 layers.
const F32_FORWARD_TOL: f32 = 1e-4;
/// f64 exact reference vs burn-autodiff SGD: both compute the same derivatives with different
/// summation orders; round-off ~1e-15 relative on logits of order 10 and a few hundred
/// accumulations, so 1e-9 leaves ample margin while any missing or wrong term (the update moves
/// logits by > 1e-2) fails.
const F64_EXACT_TOL: f64 = 1e-9;
/// f64 finite differences with s = 1e6 vs exact derivatives: first-order error O(|dz|/s) with
/// |dz| ≲ 10 gives ~1e-5 relative on an update of ~0.1, i.e. ≲ 1e-6 on logits; round-off
/// 1e-16 · s ≈ 1e-10.
const FD_VS_EXACT_TOL: f64 = 1e-5;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/llama")
        .join(name)
}

fn load<B: Backend>(name: &str) -> AuxModel<B> {
    tint_aux::load_model::<B>(&fixture(name), &Default::default()).expect("tiny LLaMA loads")
}

/// Casts every parameter to float64 (detached: `sgd_update` marks what trains).
struct CastF64;

impl<B: Backend> ParamMapper<B> for CastF64 {
    fn map<const D: usize>(
        &mut self,
        _: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        param.map(|t| t.cast(DType::F64))
    }
}

/// Deterministic token ids in `0..97` (the fixtures' vocabulary).
fn ids<B: Backend>(seq_length: usize, seed: usize) -> Tensor<B, 2, Int> {
    let ids: Vec<i64> = (0..seq_length)
        .map(|t| ((t * 37 + seed * 11 + 5) % 97) as i64)
        .collect();
    Tensor::from_data(TensorData::new(ids, [1, seq_length]), &Default::default())
}

fn values<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f64> {
    t.into_data().convert::<f64>().to_vec().unwrap()
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Autodiff SGD on the summed loss of every target, on the parameters TinT updates on every
/// layer (values, outputs, MLPs, norm gains).
fn summed_sgd_on_tint_params(lr: f64, steps: usize) -> DynEvalConfig {
    DynEvalConfig {
        lr,
        steps,
        reduction: LossReduction::Sum,
        params: ParamSelection {
            top_layers: None,
            groups: Some(vec![
                ParamGroup::AttnValue,
                ParamGroup::AttnOutput,
                ParamGroup::Mlp,
                ParamGroup::LayerNorm,
            ]),
        },
        loss_mask: LossMask::AllTokens,
        ..Default::default()
    }
}

fn exact_top_layer_config(lr: f64, steps: usize) -> LlamaTintConfig {
    LlamaTintConfig {
        step: StepConfig {
            n_simulation_layers: Some(1),
            n_forward_backward: steps,
            inner_lr: lr,
            derivatives: DerivativeMode::Exact,
            ..StepConfig::default()
        },
        updates: LlamaUpdates {
            attn_value: true,
            attn_output: true,
            mlp: true,
            norm_gains: false,
        },
    }
}

#[test]
fn lr_zero_reproduces_the_aux_forward() {
    for name in ["tiny", "tiny_tied"] {
        let model = load::<Flex>(name);
        let input = ids::<Flex>(12, 1);
        let expected = model.forward(input.clone()).unwrap().into_data();
        for n_sim in [1, 2] {
            let config = LlamaTintConfig {
                step: StepConfig {
                    inner_lr: 0.0,
                    n_simulation_layers: Some(n_sim),
                    n_forward_backward: 2,
                    ..StepConfig::default()
                },
                updates: LlamaUpdates {
                    norm_gains: true,
                    ..Default::default()
                },
            };
            let out = LlamaReference::new(&model, config)
                .unwrap()
                .forward_with_train_lengths(input.clone(), &[7])
                .unwrap();
            let tol = Tolerance::<f32>::absolute(F32_FORWARD_TOL);
            out.first_logits
                .into_data()
                .assert_approx_eq::<f32>(&expected, tol);
            out.final_logits
                .into_data()
                .assert_approx_eq::<f32>(&expected, tol);
            assert_eq!(out.first_loss.n_targets, vec![5], "targets 7..12");
            assert_eq!(out.first_loss, out.final_loss);
        }
    }
}

/// With exact derivatives, only the top layer simulated, and only parameters whose exact gradient
/// does not pass through attention scores (W_V, W_O, gate/up/down of the top layer), the reference
/// step is exactly SGD on the summed training loss.
#[test]
fn exact_top_layer_step_equals_autodiff_sgd_in_f64() {
    for name in ["tiny", "tiny_tied"] {
        let model = load::<Ad>(name).map_named_params(&mut CastF64);
        let seq_length = 14;
        let train_length = 8;
        for (seed, steps, lr) in [(1, 1, 0.05), (2, 2, 0.03)] {
            let input = ids::<Ad>(seq_length, seed);
            let reference = LlamaReference::new(&model, exact_top_layer_config(lr, steps)).unwrap();
            assert_eq!(reference.dtype(), DType::F64);
            let sim_input = SimInput::with_train_lengths(input.clone(), &[train_length]).unwrap();
            let (out, updated) = reference.forward_with_params(&sim_input).unwrap();

            let selection = tint_sim::tint_updated_params(&model, Some(1));
            let config = DynEvalConfig {
                lr,
                steps,
                reduction: LossReduction::Sum,
                params: selection,
                loss_mask: LossMask::AllTokens,
                ..Default::default()
            };
            let train_ids = input.clone().slice([0..1, 0..train_length]);
            let sgd = sgd_update(&model, train_ids, &config).unwrap();
            let expected = values(sgd.model.forward(input.clone()).unwrap());
            let first = values(out.first_logits);
            let last = values(out.final_logits);
            let moved = max_abs_diff(&first, &last);
            assert!(
                moved > 1e-2,
                "{name}: the update must move the logits (moved {moved})"
            );
            let err = max_abs_diff(&last, &expected);
            assert!(
                err < F64_EXACT_TOL,
                "{name} steps {steps}: final logits differ by {err}"
            );

            // The updated weights themselves.
            let sgd_params = LlamaParams::from_aux(&sgd.model).unwrap();
            let (ours, theirs) = (&updated[0].layers[1], &sgd_params.layers[1]);
            for (what, a, b) in [
                ("w_v", &ours.w_v, &theirs.w_v),
                ("w_o", &ours.w_o, &theirs.w_o),
                ("w_gate", &ours.w_gate, &theirs.w_gate),
                ("w_up", &ours.w_up, &theirs.w_up),
                ("w_down", &ours.w_down, &theirs.w_down),
                ("w_q (frozen)", &ours.w_q, &theirs.w_q),
            ] {
                let err = max_abs_diff(&values(a.clone()), &values(b.clone()));
                assert!(
                    err < F64_EXACT_TOL,
                    "{name} {what}: weights differ by {err}"
                );
            }
            // Layer 0 is not simulated: untouched.
            let err = max_abs_diff(
                &values(updated[0].layers[0].w_v.clone()),
                &values(reference.params().layers[0].w_v.clone()),
            );
            assert_eq!(err, 0.0);
        }
    }
}

/// The final-norm gain and the top layer's MLP-norm gain have exact gradients that do not pass
/// through attention scores: with `norm_gains` their updates equal autodiff SGD on the `ln` group.
#[test]
fn exact_norm_gain_updates_equal_autodiff_sgd_in_f64() {
    let model = load::<Ad>("tiny_tied").map_named_params(&mut CastF64);
    let input = ids::<Ad>(12, 3);
    let lr = 0.05;
    let mut config = exact_top_layer_config(lr, 1);
    config.updates = LlamaUpdates {
        attn_value: false,
        attn_output: false,
        mlp: false,
        norm_gains: true,
    };
    let reference = LlamaReference::new(&model, config).unwrap();
    let (_, updated) = reference
        .forward_with_params(&SimInput::with_train_lengths(input.clone(), &[9]).unwrap())
        .unwrap();
    let dyn_config = DynEvalConfig {
        lr,
        steps: 1,
        reduction: LossReduction::Sum,
        params: ParamSelection {
            top_layers: Some(1),
            groups: Some(vec![ParamGroup::LayerNorm]),
        },
        loss_mask: LossMask::AllTokens,
        ..Default::default()
    };
    let sgd = sgd_update(&model, input.slice([0..1, 0..9]), &dyn_config).unwrap();
    let theirs = LlamaParams::from_aux(&sgd.model).unwrap();
    let ours = &updated[0];
    let before = reference.params();
    for (what, a, b, old) in [
        (
            "final_norm",
            &ours.final_norm,
            &theirs.final_norm,
            &before.final_norm,
        ),
        (
            "mlp_norm",
            &ours.layers[1].mlp_norm,
            &theirs.layers[1].mlp_norm,
            &before.layers[1].mlp_norm,
        ),
    ] {
        let moved = max_abs_diff(&values(a.clone()), &values(old.clone()));
        assert!(moved > 1e-3, "{what} must move (moved {moved})");
        let err = max_abs_diff(&values(a.clone()), &values(b.clone()));
        assert!(err < F64_EXACT_TOL, "{what}: gains differ by {err}");
    }
}

/// With exact derivatives **and** the exact attention backward (through the scores), the reference
/// step on every layer, gains included, is exactly SGD on the summed training loss of everything
/// but `W_Q`, `W_K` and the embeddings; with the value-only attention backward of TinT it is not
/// (the lower layers' gradients miss the path through the upper layers' scores).
#[test]
fn exact_attention_backward_on_all_layers_equals_autodiff_sgd_in_f64() {
    for name in ["tiny", "tiny_tied"] {
        let model = load::<Ad>(name).map_named_params(&mut CastF64);
        let (seq_length, train_length) = (14, 9);
        for (seed, steps, lr) in [(5, 1, 0.05), (6, 2, 0.03)] {
            let input = ids::<Ad>(seq_length, seed);
            let run = |attention: AttentionBackwardMode| {
                let config = LlamaTintConfig {
                    step: StepConfig {
                        n_forward_backward: steps,
                        inner_lr: lr,
                        derivatives: DerivativeMode::Exact,
                        attention_backward: attention,
                        ..StepConfig::default()
                    },
                    updates: LlamaUpdates {
                        attn_value: true,
                        attn_output: true,
                        mlp: true,
                        norm_gains: true,
                    },
                };
                let reference = LlamaReference::new(&model, config).unwrap();
                let sim_input =
                    SimInput::with_train_lengths(input.clone(), &[train_length]).unwrap();
                let (out, updated) = reference.forward_with_params(&sim_input).unwrap();
                (
                    values(out.final_logits),
                    updated.into_iter().next().unwrap(),
                )
            };
            let config = summed_sgd_on_tint_params(lr, steps);
            let train_ids = input.clone().slice([0..1, 0..train_length]);
            let sgd = sgd_update(&model, train_ids, &config).unwrap();
            let expected = values(sgd.model.forward(input.clone()).unwrap());
            let theirs = LlamaParams::from_aux(&sgd.model).unwrap();

            let (exact, ours) = run(AttentionBackwardMode::Exact);
            let err = max_abs_diff(&exact, &expected);
            assert!(
                err < F64_EXACT_TOL,
                "{name} steps {steps}: final logits differ by {err}"
            );
            // Layer 0's weights get the gradient through layer 1's scores.
            for (what, a, b) in [
                ("w_v", &ours.layers[0].w_v, &theirs.layers[0].w_v),
                ("w_o", &ours.layers[0].w_o, &theirs.layers[0].w_o),
                ("w_up", &ours.layers[0].w_up, &theirs.layers[0].w_up),
            ] {
                let err = max_abs_diff(&values(a.clone()), &values(b.clone()));
                assert!(
                    err < F64_EXACT_TOL,
                    "{name} layer 0 {what}: differ by {err}"
                );
            }
            let (a, b) = (&ours.layers[0].attn_norm, &theirs.layers[0].attn_norm);
            let err = max_abs_diff(&values(a.clone()), &values(b.clone()));
            assert!(
                err < F64_EXACT_TOL,
                "{name} layer 0 attn_norm: differ by {err}"
            );

            let (values_only, _) = run(AttentionBackwardMode::ValuesOnly);
            let gap = max_abs_diff(&values_only, &expected);
            assert!(
                gap > 1e3 * F64_EXACT_TOL,
                "{name}: the value-only backward must differ from exact SGD (by {gap})"
            );
        }
    }
}

/// Only the LLaMA functional reference back-propagates through the scores: the constructed
/// network and the GPT-2 reference refuse the option by name.
#[test]
fn exact_attention_backward_is_refused_where_it_is_not_computed() {
    let exact = StepConfig {
        attention_backward: AttentionBackwardMode::Exact,
        ..StepConfig::default()
    };
    let model = load::<Flex>("tiny");
    let params = LlamaParams::from_aux(&model).unwrap();
    let step = LlamaTintConfig {
        step: exact.clone(),
        ..Default::default()
    };
    let config = LlamaSimulatorConfig::for_model(params.d_model(), params.n_heads, step);
    let Err(err) = LlamaSimulator::from_params(params, config) else {
        panic!("the simulator must refuse the exact attention backward");
    };
    assert!(err.to_string().contains("attention_backward"), "{err}");
    let gpt2 = tint_aux::load_model::<Flex>(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aux/gpt2-tiny"),
        &Default::default(),
    )
    .unwrap();
    let config = tint_sim::TintConfig {
        step: exact,
        ..tint_sim::TintConfig::for_model(gpt2.hidden_size(), 2, 2)
    };
    let aux = tint_sim::AuxParams::from_aux(&gpt2).unwrap();
    let Err(err) = tint_sim::FunctionalReference::new(aux, config) else {
        panic!("the GPT-2 reference must refuse the exact attention backward");
    };
    assert!(
        err.to_string().contains("LLaMA functional reference only"),
        "{err}"
    );
}

#[test]
fn finite_differences_converge_to_exact_derivatives_on_all_layers() {
    let model = load::<Flex>("tiny").map_named_params(&mut CastF64);
    let input = ids::<Flex>(10, 4);
    let run = |mode: DerivativeMode| {
        let config = LlamaTintConfig {
            step: StepConfig {
                inner_lr: 0.05,
                scale_embeddings: 1e6,
                derivatives: mode,
                ..StepConfig::default()
            },
            updates: LlamaUpdates {
                norm_gains: true,
                ..Default::default()
            },
        };
        let out = LlamaReference::new(&model, config)
            .unwrap()
            .forward_with_train_lengths(input.clone(), &[6])
            .unwrap();
        (values(out.first_logits), values(out.final_logits))
    };
    let (first, fd) = run(DerivativeMode::FiniteDifference);
    let (_, exact) = run(DerivativeMode::Exact);
    assert!(
        max_abs_diff(&first, &exact) > 1e-2,
        "the update must move the logits"
    );
    let err = max_abs_diff(&fd, &exact);
    assert!(
        err < FD_VS_EXACT_TOL,
        "finite differences differ from exact by {err}"
    );
}

/// Summed next-token NLL over the training targets `1..train_length`.
fn train_loss(logits: Tensor<Flex, 3>, input: Tensor<Flex, 2, Int>, train_length: usize) -> f64 {
    let nll = next_token_nll(logits, input);
    values(nll.slice([0..1, 0..train_length - 1])).iter().sum()
}

/// The approximate step on every layer (finite differences, value-only attention backward, all
/// updates) is a descent step on the training loss, and two sequences in a batch get independent
/// updates.
#[test]
fn approximate_step_on_all_layers_descends_and_batches_are_independent() {
    let model = load::<Flex>("tiny");
    let (seq_length, train_length) = (16, 10);
    let a = ids::<Flex>(seq_length, 5);
    let b = ids::<Flex>(seq_length, 6);
    let config = LlamaTintConfig {
        step: StepConfig {
            inner_lr: 0.01,
            ..StepConfig::default()
        },
        updates: LlamaUpdates {
            norm_gains: true,
            ..Default::default()
        },
    };
    let reference = LlamaReference::new(&model, config).unwrap();
    let out_a = reference
        .forward_with_train_lengths(a.clone(), &[train_length])
        .unwrap();
    let before = train_loss(out_a.first_logits.clone(), a.clone(), train_length);
    let after = train_loss(out_a.final_logits.clone(), a.clone(), train_length);
    assert!(after < before - 1e-3, "training loss {before} -> {after}");

    let out_b = reference
        .forward_with_train_lengths(b.clone(), &[train_length - 3])
        .unwrap();
    let batch = Tensor::cat(vec![a, b], 0);
    let out = reference
        .forward_with_train_lengths(batch, &[train_length, train_length - 3])
        .unwrap();
    let [_, _, vocab_size] = out.final_logits.dims();
    let split =
        |t: Tensor<Flex, 3>, i: usize| values(t.slice([i..i + 1, 0..seq_length, 0..vocab_size]));
    // Same per-sequence computation; only summation order in batched ops may differ.
    assert!(
        max_abs_diff(
            &split(out.final_logits.clone(), 0),
            &values(out_a.final_logits)
        ) < 1e-5
    );
    assert!(max_abs_diff(&split(out.final_logits, 1), &values(out_b.final_logits)) < 1e-5);
    assert_eq!(
        out.final_loss.n_targets,
        vec![seq_length - train_length, seq_length - train_length + 3]
    );
}

#[test]
fn bad_models_configs_and_inputs_are_typed_errors() {
    let gpt2 = tint_aux::load_model::<Flex>(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aux/gpt2-tiny"),
        &Default::default(),
    )
    .unwrap();
    assert!(matches!(
        LlamaReference::new(&gpt2, LlamaTintConfig::default()),
        Err(SimError::UnsupportedModel(_))
    ));
    let model = load::<Flex>("tiny");
    let bad_config = LlamaTintConfig {
        step: StepConfig {
            n_simulation_layers: Some(3),
            ..StepConfig::default()
        },
        ..Default::default()
    };
    let Err(err) = LlamaReference::new(&model, bad_config) else {
        panic!("3 of 2 layers is rejected");
    };
    assert!(matches!(err, SimError::InvalidConfig { .. }), "{err}");
    // The message names the rule and the values.
    let message = err.to_string();
    assert!(
        message.contains("n_simulation_layers = 3") && message.contains("1..=2"),
        "{message}"
    );
    let reference = LlamaReference::new(&model, LlamaTintConfig::default()).unwrap();
    let device = Default::default();
    let out_of_vocab =
        Tensor::<Flex, 2, Int>::from_data(TensorData::new(vec![1i64, 97, 3], [1, 3]), &device);
    let too_long = ids::<Flex>(33, 0);
    let too_short = ids::<Flex>(1, 0);
    for (input, lengths) in [
        (out_of_vocab, vec![2]),
        (too_long, vec![4]),
        (too_short, vec![1]),
        (ids::<Flex>(6, 0), vec![7]),
        (ids::<Flex>(6, 0), vec![3, 3]),
    ] {
        let result = reference.forward_with_train_lengths(input, &lengths);
        assert!(
            matches!(result, Err(SimError::InvalidInput(_))),
            "{lengths:?}: {result:?}"
        );
    }
}

/// A gradient mask restricts the summed loss to the selected training targets: with the exact
/// top-layer configuration the step equals autodiff SGD with the same `LossMask::Targets`.
#[test]
fn gradient_mask_equals_autodiff_sgd_on_the_same_targets() {
    let model = load::<Ad>("tiny").map_named_params(&mut CastF64);
    let (seq_length, train_length, lr) = (12, 9, 0.05);
    let input = ids::<Ad>(seq_length, 7);
    // Targets 2, 3, 5, 8 of the training part count.
    let selected = [2, 3, 5, 8];
    let gradient: Vec<bool> = (0..seq_length).map(|t| selected.contains(&t)).collect();
    let gradient_mask = Tensor::<Ad, 2, burn::tensor::Bool>::from_data(
        TensorData::new(gradient.clone(), [1, seq_length]),
        &Default::default(),
    );
    let sim_input = SimInput::with_train_lengths(input.clone(), &[train_length])
        .unwrap()
        .with_gradient_mask(gradient_mask);
    let out = LlamaReference::new(&model, exact_top_layer_config(lr, 1))
        .unwrap()
        .forward(&sim_input)
        .unwrap();
    let config = DynEvalConfig {
        lr,
        steps: 1,
        reduction: LossReduction::Sum,
        params: tint_sim::tint_updated_params(&model, Some(1)),
        loss_mask: LossMask::Targets(vec![gradient[..train_length].to_vec()]),
        ..Default::default()
    };
    let sgd = sgd_update(
        &model,
        input.clone().slice([0..1, 0..train_length]),
        &config,
    )
    .unwrap();
    let expected = values(sgd.model.forward(input).unwrap());
    let last = values(out.final_logits);
    assert!(max_abs_diff(&values(out.first_logits), &last) > 1e-2);
    let err = max_abs_diff(&last, &expected);
    assert!(err < F64_EXACT_TOL, "final logits differ by {err}");
}

/// An ICL mask that lets tokens `k..` attend only to `k..` makes their logits those of the
/// sub-sequence `ids[k..]` run alone: rotary scores depend only on relative positions.
#[test]
fn icl_mask_isolates_a_block_and_rotary_scores_are_relative() {
    let model = load::<Flex>("tiny_tied").map_named_params(&mut CastF64);
    let (seq_length, k) = (12, 5);
    let input = ids::<Flex>(seq_length, 8);
    let mut allowed = vec![true; seq_length * seq_length];
    for i in k..seq_length {
        for j in 0..k {
            allowed[i * seq_length + j] = false;
        }
    }
    let icl = Tensor::<Flex, 3, burn::tensor::Bool>::from_data(
        TensorData::new(allowed, [1, seq_length, seq_length]),
        &Default::default(),
    );
    let config = LlamaTintConfig {
        step: StepConfig {
            inner_lr: 0.0,
            ..StepConfig::default()
        },
        ..Default::default()
    };
    let reference = LlamaReference::new(&model, config).unwrap();
    let masked = reference
        .forward(
            &SimInput::with_train_lengths(input.clone(), &[3])
                .unwrap()
                .with_icl_mask(icl),
        )
        .unwrap()
        .first_logits;
    let alone = model
        .forward(input.clone().slice([0..1, k..seq_length]))
        .unwrap();
    let [_, _, vocab_size] = alone.dims();
    let masked_tail = masked.clone().slice([0..1, k..seq_length, 0..vocab_size]);
    // f64: only the rotation angles differ (absolute positions), round-off ~1e-15.
    let err = max_abs_diff(&values(masked_tail), &values(alone));
    assert!(err < F64_EXACT_TOL, "isolated block differs by {err}");
    let full = model.forward(input).unwrap();
    let unmasked_tail = full.slice([0..1, k..seq_length, 0..vocab_size]);
    let masked_tail = masked.slice([0..1, k..seq_length, 0..vocab_size]);
    assert!(max_abs_diff(&values(unmasked_tail), &values(masked_tail)) > 1e-3);
}

/// Every weight of `params`, in one vector.
fn all_weights<B: Backend>(params: &LlamaParams<B>) -> Vec<f64> {
    let mut all = values(params.embedding.clone());
    for layer in &params.layers {
        for t in [&layer.attn_norm, &layer.mlp_norm] {
            all.extend(values(t.clone()));
        }
        for t in [
            &layer.w_q,
            &layer.w_k,
            &layer.w_v,
            &layer.w_o,
            &layer.w_gate,
            &layer.w_up,
            &layer.w_down,
        ] {
            all.extend(values(t.clone()));
        }
    }
    all.extend(values(params.final_norm.clone()));
    all
}

/// One backward pass gives the update at every step size: the direction of a step applied at
/// η equals, to the bit, the step of a reference configured with η (float32, where a reordered
/// operation would show), with either attention backward and a gradient mask.
#[test]
fn a_direction_applied_at_any_step_size_is_the_step_at_that_size_to_the_bit() {
    for name in ["tiny", "tiny_tied"] {
        let model = load::<Flex>(name);
        let (seq_length, train_length) = (14, 10);
        let targets: Vec<bool> = (0..seq_length).map(|t| t % 3 != 0).collect();
        let mask = Tensor::<Flex, 2, burn::tensor::Bool>::from_data(
            TensorData::new(targets, [1, seq_length]),
            &Default::default(),
        );
        let input = SimInput::with_train_lengths(ids::<Flex>(seq_length, 3), &[train_length])
            .unwrap()
            .with_gradient_mask(mask);
        let other_ids = ids::<Flex>(seq_length + 3, 8);
        for attention in [
            AttentionBackwardMode::ValuesOnly,
            AttentionBackwardMode::Exact,
        ] {
            let config = |lr: f64, steps: usize| LlamaTintConfig {
                step: StepConfig {
                    n_forward_backward: steps,
                    inner_lr: lr,
                    attention_backward: attention,
                    ..StepConfig::default()
                },
                updates: LlamaUpdates {
                    attn_value: true,
                    attn_output: true,
                    mlp: true,
                    norm_gains: true,
                },
            };
            let base = LlamaReference::new(&model, config(0.01, 1)).unwrap();
            let direction = base.direction(std::slice::from_ref(&input)).unwrap();
            let before = all_weights(base.params());
            for lr in [0.01, 0.3, 2e-4] {
                let (_, stepped) = LlamaReference::new(&model, config(lr, 1))
                    .unwrap()
                    .updated(&input)
                    .unwrap();
                let applied = direction.updated(lr);
                let (stepped_w, applied_w) =
                    (all_weights(stepped.params()), all_weights(applied.params()));
                assert!(
                    max_abs_diff(&stepped_w, &before) > 0.0,
                    "{name} {attention:?} lr {lr}: the step changed nothing"
                );
                assert_eq!(
                    max_abs_diff(&stepped_w, &applied_w),
                    0.0,
                    "{name} {attention:?} lr {lr}: weights differ"
                );
                assert_eq!(applied.config().step.inner_lr, lr);
                let d = max_abs_diff(
                    &values(stepped.logits(other_ids.clone()).unwrap()),
                    &values(applied.logits(other_ids.clone()).unwrap()),
                );
                assert_eq!(d, 0.0, "{name} {attention:?} lr {lr}: logits differ");
            }
            // Two forward-backward passes: the second gradient depends on η.
            let two = LlamaReference::new(&model, config(0.01, 2)).unwrap();
            assert!(matches!(
                two.direction(std::slice::from_ref(&input)),
                Err(SimError::InvalidInput(m)) if m.contains("one forward-backward")
            ));
        }
    }
}

/// TinT's Single format: the direction of several sequences, each with its own first pass on the
/// same weights, is the gradient of their summed loss. With every approximation replaced by its
/// exact form (float64) one step along it equals autodiff SGD on the two-sequence batch with the
/// summed loss, on every layer; no input is a typed error.
#[test]
fn a_direction_over_several_sequences_is_sgd_on_their_summed_loss_in_f64() {
    for name in ["tiny", "tiny_tied"] {
        let model = load::<Ad>(name).map_named_params(&mut CastF64);
        let (seq_length, lr) = (9, 0.05);
        let rows = [ids::<Ad>(seq_length, 5), ids::<Ad>(seq_length, 6)];
        let config = LlamaTintConfig {
            step: StepConfig {
                inner_lr: lr,
                derivatives: DerivativeMode::Exact,
                attention_backward: AttentionBackwardMode::Exact,
                ..StepConfig::default()
            },
            updates: LlamaUpdates {
                attn_value: true,
                attn_output: true,
                mlp: true,
                norm_gains: true,
            },
        };
        let reference = LlamaReference::new(&model, config).unwrap();
        let inputs: Vec<SimInput<Ad>> = rows
            .iter()
            .map(|r| SimInput::with_train_lengths(r.clone(), &[seq_length]).unwrap())
            .collect();
        let ours = reference.direction(&inputs).unwrap().updated(lr);
        let sgd = sgd_update(
            &model,
            Tensor::cat(rows.to_vec(), 0),
            &summed_sgd_on_tint_params(lr, 1),
        )
        .unwrap();
        let theirs = LlamaParams::from_aux(&sgd.model).unwrap();
        let before = all_weights(reference.params());
        let (ours, theirs) = (all_weights(ours.params()), all_weights(&theirs));
        assert!(
            max_abs_diff(&theirs, &before) > 1e-4,
            "{name}: SGD moved nothing"
        );
        let err = max_abs_diff(&ours, &theirs);
        assert!(err < F64_EXACT_TOL, "{name}: weights differ by {err}");
        // One sequence alone moves the weights differently: the sum is of both.
        let one = reference.direction(&inputs[..1]).unwrap().updated(lr);
        assert!(max_abs_diff(&all_weights(one.params()), &theirs) > 1e3 * F64_EXACT_TOL);
        assert!(matches!(
            reference.direction(&[]),
            Err(SimError::InvalidInput(m)) if m.contains("at least one")
        ));
    }
}
