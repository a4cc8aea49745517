//! Post-LN OPT with `project_in` / `project_out` (HF `do_layer_norm_before = false`,
//! `word_embed_proj_dim < hidden_size`, as facebook/opt-350m) in the TinT simulator
//! (docs/construction.md §16), on the committed HF fixtures `fixtures/aux/opt-post-ln` (D = 32, no
//! projections) and `fixtures/aux/opt-post-ln-proj` (D = 32, E = 16): the first pass of the
//! simulator and of the functional reference equals the tint-aux forward (itself checked against HF
//! logits in crates/tint-aux/tests/all/parity.rs), and the reference's exact-derivative step equals SGD by
//! burn autodiff (top layer; both layers with a uniform-attention top layer). Constructed =
//! structured = reference: tests/all/executions.rs.

#![allow(clippy::print_stderr)] // measured values are reported on the terminal

use crate::common::{repo_root, train_lengths_input};
use burn::backend::{Autodiff, Flex};
use burn::module::Param;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{DType, Int, Tensor, TensorData};
use tint_aux::loss::lm_loss;
use tint_aux::{AuxModel, LossMask, LossReduction, ParamInfo, ParamMapper};
use tint_sim::params::NormPlacement;
use tint_sim::StepConfig;
use tint_sim::{
    AuxParams, DerivativeMode, Execution, FunctionalReference, SimError, TintConfig, TintSimulator,
};

type Ad = Autodiff<Flex>;

/// f32, tint-aux forward vs the simulator's first pass: the same function by two code paths (the
/// projections folded into the embedding tables, the constructed modules' summation orders) on
/// logits up to 0.42 (0.025 with the projections): a few f32 ulps (6e-8 relative) of the hidden
/// states, amplified by the LayerNorms (measured 9e-8); 1e-6 leaves margin while a misplaced
/// LayerNorm or projection moves the logits by their own size.
const F32_FIRST_PASS_TOL: f64 = 1e-6;
/// f64, the same comparison: round-off ~1e-16 relative through a few hundred accumulations
/// (measured 2e-16); 1e-12 leaves ample margin.
const F64_FIRST_PASS_TOL: f64 = 1e-12;
/// f64 exact-derivative reference step vs burn-autodiff SGD: the same derivatives in other summation
/// orders (~1e-15 relative on logits and weights of order 1 and steps of 30); 1e-9 leaves ample
/// margin while a missing or wrong term (the update moves the logits by > 1e-2) fails.
const F64_EXACT_TOL: f64 = 1e-9;

fn load<B: Backend>(name: &str) -> AuxModel<B> {
    tint_aux::load_model::<B>(
        &repo_root().join("fixtures/aux").join(name),
        &Default::default(),
    )
    .expect("OPT fixture loads")
}

/// Casts every parameter to float64 (detached).
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

/// Deterministic token ids in `0..512` (the fixtures' vocabulary).
fn ids<B: Backend>(batch_size: usize, seq_length: usize, seed: usize) -> Tensor<B, 2, Int> {
    let ids: Vec<i64> = (0..batch_size * seq_length)
        .map(|k| ((k * 97 + seed * 31 + 7 + k / seq_length * 13) % 512) as i64)
        .collect();
    Tensor::from_data(
        TensorData::new(ids, [batch_size, seq_length]),
        &Default::default(),
    )
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

fn config(execution: Execution) -> TintConfig {
    TintConfig {
        step: StepConfig {
            inner_lr: 1.0,
            n_simulation_layers: Some(1),
            ..StepConfig::default()
        },
        execution,
        ..TintConfig::for_model(32, 8, 8)
    }
}

fn check_first_pass<B: Backend>(name: &str, model: &AuxModel<B>, tol: f64) {
    let input_ids = ids::<B>(2, 12, 3);
    let expected = values(model.forward(input_ids.clone()).unwrap());
    let scale = expected.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let aux = AuxParams::from_aux(model).unwrap();
    assert_eq!(aux.norm_placement, NormPlacement::PostLn);
    assert!(
        aux.ln_f.is_none(),
        "post-LN OPT has no final LayerNorm (HF)"
    );
    let input = train_lengths_input(input_ids, &[6, 9]);
    for execution in [Execution::Constructed, Execution::Structured] {
        let out = TintSimulator::new(&aux, config(execution))
            .unwrap()
            .forward(&input)
            .unwrap();
        let err = max_abs_diff(&values(out.first_logits), &expected);
        eprintln!("{name}, {execution:?}: first pass vs tint-aux {err:e} (logits up to {scale:e})");
        assert!(
            err < tol,
            "{name} {execution:?}: first pass differs by {err}"
        );
    }
    let reference = FunctionalReference::new(aux, config(Execution::Constructed))
        .unwrap()
        .forward(&input)
        .unwrap();
    let err = max_abs_diff(&values(reference.first_logits), &expected);
    assert!(err < tol, "{name} reference: first pass differs by {err}");
}

#[test]
fn first_pass_equals_the_aux_forward_in_f32_and_f64() {
    for name in ["opt-post-ln", "opt-post-ln-proj"] {
        let model = load::<Flex>(name);
        if name == "opt-post-ln-proj" {
            let AuxModel::Opt(opt) = &model else {
                panic!("an OPT fixture")
            };
            assert!(opt.project_in.is_some() && opt.project_out.is_some());
            assert!(opt.config.d_embed() < opt.config.hidden_size);
        }
        check_first_pass(&format!("{name} f32"), &model, F32_FIRST_PASS_TOL);
        let model = model.map_named_params(&mut CastF64);
        check_first_pass(&format!("{name} f64"), &model, F64_FIRST_PASS_TOL);
    }
}

/// What the reference updates in the top layer of a post-LN block: `W_V, b_V, W_O, b_O`, the MLP,
/// and the LayerNorm biases (gains frozen, docs/construction.md §6.7). None of their exact
/// gradients passes through the top layer's attention scores (its queries and keys read the layer
/// input), so with exact derivatives the reference step is exactly SGD on the summed training loss.
fn trained(info: &ParamInfo, first: usize) -> bool {
    if info.layer.is_none_or(|l| l < first) {
        return false;
    }
    let Some((_, leaf)) = info
        .name
        .strip_prefix("blocks.")
        .and_then(|rest| rest.split_once('.'))
    else {
        return false;
    };
    leaf.starts_with("attn.value.")
        || leaf.starts_with("attn.output.")
        || leaf.starts_with("fc.")
        || leaf.starts_with("proj.")
        || leaf == "ln1.beta"
        || leaf == "ln2.beta"
}

struct MarkTrainable(usize);

impl<B: AutodiffBackend> ParamMapper<B> for MarkTrainable {
    fn map<const D: usize>(
        &mut self,
        info: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        let train = trained(info, self.0);
        param.map(|t| t.detach().set_require_grad(train))
    }
}

struct SgdStep<'a, B: AutodiffBackend> {
    grads: &'a B::Gradients,
    lr: f64,
    first: usize,
    seen: usize,
}

impl<B: AutodiffBackend> ParamMapper<B> for SgdStep<'_, B> {
    fn map<const D: usize>(
        &mut self,
        info: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        if !trained(info, self.first) {
            return param;
        }
        self.seen += 1;
        let (grads, lr) = (self.grads, self.lr);
        param.map(|t| {
            let grad = t.grad(grads).expect("a trained parameter has a gradient");
            Tensor::from_inner(t.inner() - grad * lr).require_grad()
        })
    }
}

/// Zeroes the query map of layer `layer`: its attention is uniform over the causal window, so no
/// gradient passes through its scores and the reference's stop-gradient on them (paper §2.2 item 5)
/// is exact.
struct UniformAttention(usize);

impl<B: Backend> ParamMapper<B> for UniformAttention {
    fn map<const D: usize>(
        &mut self,
        info: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        if info
            .name
            .starts_with(&format!("blocks.{}.attn.query.", self.0))
        {
            param.map(|t| t.zeros_like())
        } else {
            param
        }
    }
}

/// The reference step with exact derivatives on the top `n_sim` layers against burn-autodiff SGD
/// of the same parameters on the summed next-token loss of the training tokens.
fn check_against_autodiff(name: &str, model: &AuxModel<Ad>, n_sim: usize) {
    let n_layers = 2;
    let first = n_layers - n_sim;
    let (seq_length, train_length) = (14, 8);
    for (seed, steps, lr) in [(1, 1, 30.0), (2, 2, 20.0)] {
        let input_ids = ids::<Ad>(1, seq_length, seed);
        let reference = FunctionalReference::new(
            AuxParams::from_aux(model).unwrap(),
            TintConfig {
                step: StepConfig {
                    inner_lr: lr,
                    n_forward_backward: steps,
                    n_simulation_layers: Some(n_sim),
                    derivatives: DerivativeMode::Exact,
                    ..config(Execution::Structured).step.clone()
                },
                ..config(Execution::Structured)
            },
        )
        .unwrap();
        let input = train_lengths_input(input_ids.clone(), &[train_length]);
        let (out, updated) = reference.forward_with_params(&input).unwrap();

        let train_ids = input_ids.clone().slice([0..1, 0..train_length]);
        let mut current = model.clone().map_named_params(&mut MarkTrainable(first));
        for _ in 0..steps {
            let loss = lm_loss(
                &current,
                train_ids.clone(),
                &LossMask::AllTokens,
                LossReduction::Sum,
            )
            .unwrap();
            let grads = loss.backward();
            let mut step = SgdStep {
                grads: &grads,
                lr,
                first,
                seen: 0,
            };
            current = current.map_named_params(&mut step);
            assert_eq!(
                step.seen,
                10 * n_sim,
                "W_V, b_V, W_O, b_O, fc, proj, ln biases per layer"
            );
        }
        let expected = values(current.forward(input_ids.clone()).unwrap());
        let first_logits = values(out.first_logits);
        let last = values(out.final_logits);
        let moved = max_abs_diff(&first_logits, &last);
        assert!(
            moved > 1e-2,
            "{name}: the update must move the logits (moved {moved})"
        );
        let err = max_abs_diff(&last, &expected);
        eprintln!(
            "{name}, top {n_sim}, {steps} step(s): reference vs autodiff SGD {err:e}, update {moved:e}"
        );
        assert!(
            err < F64_EXACT_TOL,
            "{name} top {n_sim} steps {steps}: final logits differ by {err}"
        );

        // The updated weights themselves, and the frozen ones.
        let sgd = AuxParams::from_aux(&current).unwrap();
        for l in 0..n_layers {
            let (ours, theirs) = (&updated.layers[l], &sgd.layers[l]);
            for ((what, a), (_, b)) in ours.named().into_iter().zip(theirs.named()) {
                let err = max_abs_diff(&values(a.clone()), &values(b.clone()));
                assert!(
                    err < F64_EXACT_TOL,
                    "{name} layer {l} {what}: weights differ by {err}"
                );
            }
        }
    }
}

#[test]
fn exact_reference_step_equals_autodiff_sgd_in_f64() {
    for name in ["opt-post-ln", "opt-post-ln-proj"] {
        let model = load::<Ad>(name).map_named_params(&mut CastF64);
        check_against_autodiff(name, &model, 1);
    }
}

/// Both layers simulated: the gradient leaves the top post-LN block (`δ_in = da + δ_mid`,
/// docs/construction.md §16) into the lower one. Exact when the top layer's scores carry no
/// gradient: its query map is zeroed (uniform causal attention). The value-path mask (§12
/// difference 4) drops nothing here: every gradient is zero from position `Ltr - 1` on.
#[test]
fn exact_two_layer_step_equals_autodiff_sgd_with_uniform_top_attention() {
    for name in ["opt-post-ln", "opt-post-ln-proj"] {
        let model = load::<Ad>(name)
            .map_named_params(&mut CastF64)
            .map_named_params(&mut UniformAttention(1));
        check_against_autodiff(&format!("{name}, uniform top attention"), &model, 2);
    }
}

#[test]
fn a_post_ln_simulator_is_not_saved_in_the_pre_ln_format() {
    let aux = AuxParams::from_aux(&load::<Flex>("opt-post-ln-proj")).unwrap();
    let sim = TintSimulator::new(&aux, config(Execution::Constructed)).unwrap();
    let dir = std::env::temp_dir().join(format!("tint-post-ln-save-{}", std::process::id()));
    let err = sim.save(&dir).unwrap_err();
    assert!(
        matches!(&err, SimError::UnsupportedModel(m) if m.contains("PostLn")),
        "{err}"
    );
    assert!(!dir.exists(), "nothing written");
}
