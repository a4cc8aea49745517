//! Dynamic evaluation: lr 0 is the identity, SGD lowers the training loss, autodiff gradients equal
//! central finite differences (float64), parameter selection, and option validation.

use std::collections::HashMap;

use crate::common::*;
use burn::module::Param;
use burn::tensor::{backend::Backend, DType, Int, Tensor, TensorData};
use tint_aux::dyn_eval::{
    dynamic_eval, selected_param_bytes, sgd_gradient, sgd_update, DynEvalConfig, GradientMemory,
    ParamSelection,
};
use tint_aux::loss::{
    continuation_nll, continuation_nll_of_logits, lm_loss, LossMask, LossReduction,
};
use tint_aux::{load_model, AuxError, AuxModel, ParamGroup, ParamInfo, ParamMapper};

type Ad = burn::backend::Autodiff<TestBackend>;

fn model(name: &str) -> AuxModel<Ad> {
    load_model(&aux_fixture(name), &Default::default()).unwrap()
}

fn ids<B: Backend>(length: usize, seed: i64) -> Tensor<B, 2, Int> {
    let values: Vec<i64> = (0..length as i64)
        .map(|i| (i * 97 + seed * 31 + 7) % 512)
        .collect();
    Tensor::from_data(TensorData::new(values, [1, length]), &Default::default())
}

/// Every parameter's values, by name.
struct Snapshot(HashMap<String, Vec<f64>>);

impl<B: Backend> ParamMapper<B> for Snapshot {
    fn map<const D: usize>(
        &mut self,
        info: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        let values = param
            .val()
            .into_data()
            .convert::<f64>()
            .to_vec::<f64>()
            .unwrap();
        self.0.insert(info.name.clone(), values);
        param
    }
}

fn snapshot<B: Backend>(model: &AuxModel<B>) -> HashMap<String, Vec<f64>> {
    let mut s = Snapshot(HashMap::new());
    let _ = model.clone().map_named_params(&mut s);
    s.0
}

fn loss_value<B: Backend>(
    model: &AuxModel<B>,
    input: Tensor<B, 2, Int>,
    mask: &LossMask,
    reduction: LossReduction,
) -> f64 {
    let loss = lm_loss(model, input, mask, reduction).unwrap();
    loss.into_data().convert::<f64>().to_vec::<f64>().unwrap()[0]
}

#[test]
fn lr_zero_changes_nothing_and_the_input_model_is_untouched() {
    let original = model("gpt2-tiny");
    let before = snapshot(&original);
    let config = DynEvalConfig {
        lr: 0.0,
        steps: 2,
        ..Default::default()
    };
    let update = sgd_update(&original, ids(12, 0), &config).unwrap();
    assert_eq!(snapshot(&update.model), before);
    assert_eq!(update.losses.len(), 2);
    assert_eq!(update.losses[0], update.losses[1]);

    // A real step changes the copy but not the original.
    let config = DynEvalConfig {
        lr: 0.1,
        ..Default::default()
    };
    let update = sgd_update(&original, ids(12, 0), &config).unwrap();
    assert_ne!(snapshot(&update.model), before);
    assert_eq!(snapshot(&original), before);
}

#[test]
fn small_steps_lower_the_training_loss() {
    for name in ["gpt2-tiny", "opt-pre-ln", "opt-post-ln-proj"] {
        for reduction in [LossReduction::Mean, LossReduction::Sum] {
            let original = model(name);
            let lr = match reduction {
                LossReduction::Mean => 0.05,
                LossReduction::Sum => 0.05 / 15.0,
            };
            let config = DynEvalConfig {
                lr,
                steps: 3,
                reduction,
                ..Default::default()
            };
            let input = ids(16, 1);
            let update = sgd_update(&original, input.clone(), &config).unwrap();
            let after = loss_value(&update.model, input, &LossMask::AllTokens, reduction);
            let mut losses = update.losses.clone();
            losses.push(after);
            assert!(
                losses.windows(2).all(|w| w[1] < w[0]),
                "{name} {reduction:?}: losses {losses:?}"
            );
        }
    }
}

/// One backward pass serves every learning rate: the gradient stepped at `lr` equals (to the bit,
/// in float32) one SGD step of `sgd_update` at `lr`, with a loss mask and a parameter selection,
/// on a batch of two sequences.
#[test]
fn a_gradient_stepped_at_any_lr_is_the_sgd_step_at_that_lr_to_the_bit() {
    for name in ["gpt2-tiny", "opt-pre-ln"] {
        let original = model(name);
        let input = Tensor::cat(vec![ids::<Ad>(12, 1), ids::<Ad>(12, 4)], 0);
        let targets: Vec<Vec<bool>> = (0..2)
            .map(|b| (0..12).map(|t| t > 0 && (t + b) % 3 != 0).collect())
            .collect();
        let base = DynEvalConfig {
            steps: 1,
            loss_mask: LossMask::Targets(targets),
            params: ParamSelection::top_layers(1),
            ..Default::default()
        };
        let gradient = sgd_gradient(&original, input.clone(), &base).unwrap();
        let before = snapshot(&original);
        for lr in [0.05, 1e-3, 0.4] {
            let config = DynEvalConfig { lr, ..base.clone() };
            let stepped = sgd_update(&original, input.clone(), &config).unwrap();
            let applied = gradient.step(lr).unwrap();
            assert_eq!(applied.losses, stepped.losses, "{name} lr {lr}");
            let (stepped, applied) = (snapshot(&stepped.model), snapshot(&applied.model));
            assert!(
                !changed(&before, &stepped).is_empty(),
                "{name} lr {lr}: the step changed nothing"
            );
            assert_eq!(stepped, applied, "{name} lr {lr}: weights differ");
        }
        assert!(matches!(
            gradient.step(f64::NAN),
            Err(AuxError::InvalidOption { .. })
        ));
    }
}

#[test]
fn sum_is_mean_times_count_and_masks_select_targets() {
    let m = model("gpt2-tiny");
    let input = ids::<Ad>(10, 2);
    let mean = loss_value(&m, input.clone(), &LossMask::AllTokens, LossReduction::Mean);
    let sum = loss_value(&m, input.clone(), &LossMask::AllTokens, LossReduction::Sum);
    // f32 sum of 9 terms of order 6.
    assert!((sum - 9.0 * mean).abs() < 1e-4, "{sum} vs 9 * {mean}");

    // A mask with only token 4 equals that token's NLL from continuation_nll.
    let mut targets = vec![vec![false; 10]];
    targets[0][4] = true;
    let single = loss_value(
        &m,
        input.clone(),
        &LossMask::Targets(targets),
        LossReduction::Mean,
    );
    let per_token = continuation_nll(&m, input.clone(), 1).unwrap();
    assert!(
        (single - per_token[0][3]).abs() < 1e-6,
        "{single} vs {}",
        per_token[0][3]
    );

    // From logits already computed: the same values (the same forward), and the same range rule.
    let logits = m.forward(input.clone()).unwrap();
    let from_logits = continuation_nll_of_logits(logits.clone(), input.clone(), 1).unwrap();
    assert_eq!(from_logits, per_token);
    assert_eq!(
        continuation_nll_of_logits(logits.clone(), input.clone(), 4).unwrap()[0],
        per_token[0][3..]
    );
    for from in [0, 10] {
        let err = continuation_nll_of_logits(logits.clone(), input.clone(), from)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("inside 1..10") && err.contains(&from.to_string()),
            "{err}"
        );
        assert!(continuation_nll(&m, input.clone(), from).is_err());
    }
}

/// Casts every parameter to float64.
struct CastF64;

impl<B: Backend> ParamMapper<B> for CastF64 {
    fn map<const D: usize>(
        &mut self,
        _: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        param.map(|t| t.detach().cast(DType::F64).detach().require_grad())
    }
}

/// Adds `step` to entry `index` of parameter `name`.
struct Nudge<'a> {
    name: &'a str,
    index: usize,
    step: f64,
}

impl<B: Backend> ParamMapper<B> for Nudge<'_> {
    fn map<const D: usize>(
        &mut self,
        info: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        if info.name != self.name {
            return param;
        }
        param.map(|t| {
            let shape = t.shape();
            let mut delta = vec![0.0f64; shape.num_elements()];
            delta[self.index] = self.step;
            let delta = Tensor::from_data(TensorData::new(delta, shape), (&t.device(), DType::F64));
            t + delta
        })
    }
}

/// Gradients of the named parameters.
struct Grads<'a, B: burn::tensor::backend::AutodiffBackend> {
    grads: &'a B::Gradients,
    out: HashMap<String, Vec<f64>>,
}

impl<B: burn::tensor::backend::AutodiffBackend> ParamMapper<B> for Grads<'_, B> {
    fn map<const D: usize>(
        &mut self,
        info: &ParamInfo,
        param: Param<Tensor<B, D>>,
    ) -> Param<Tensor<B, D>> {
        if let Some(g) = param.val().grad(self.grads) {
            self.out.insert(
                info.name.clone(),
                g.into_data().convert::<f64>().to_vec::<f64>().unwrap(),
            );
        }
        param
    }
}

/// Central-difference step in float64.
const FD_STEP: f64 = 1e-5;
/// Truncation error `~ FD_STEP^2 |L'''| / 6 ~ 1e-10` plus round-off `~ 1e-16 |L| / FD_STEP ~ 1e-10`;
/// 1e-7 (relative to `1 + |g|`) leaves a wide margin while catching any wrong derivative.
const FD_TOL: f64 = 1e-7;

#[test]
fn gradients_equal_finite_differences_in_f64() {
    for name in ["gpt2-tiny", "opt-post-ln-proj"] {
        let m = model(name).map_named_params(&mut CastF64);
        let input = ids::<Ad>(8, 3);
        let mut targets = vec![vec![true; 8]];
        targets[0][0] = false;
        targets[0][5] = false;
        let mask = LossMask::Targets(targets);
        let loss = lm_loss(&m, input.clone(), &mask, LossReduction::Mean).unwrap();
        assert_eq!(loss.dtype(), DType::F64, "the micro model runs in f64");
        let mut collect = Grads::<Ad> {
            grads: &loss.backward(),
            out: HashMap::new(),
        };
        let m = m.map_named_params(&mut collect);
        let grads = collect.out;

        // Per parameter: a fixed entry, and the entry with the largest gradient (never zero).
        let mut checks: Vec<(&str, usize)> = Vec::new();
        let mut names: Vec<&str> = vec![
            "wte",
            "wpe",
            "blocks.0.ln1.gamma",
            "blocks.0.ln1.beta",
            "blocks.0.attn.query.weight",
            "blocks.0.attn.query.bias",
            "blocks.0.attn.key.weight",
            "blocks.1.attn.value.weight",
            "blocks.1.attn.output.bias",
            "blocks.1.fc.weight",
            "blocks.1.proj.bias",
            "blocks.1.ln2.gamma",
        ];
        if name == "gpt2-tiny" {
            names.push("ln_f.beta");
        } else {
            names.extend(["project_in.weight", "project_out.weight"]);
        }
        for param in names {
            let g = &grads[param];
            let largest = (0..g.len())
                .max_by(|&a, &b| g[a].abs().total_cmp(&g[b].abs()))
                .unwrap();
            assert!(g[largest] != 0.0, "{name} {param}: zero gradient");
            checks.push((param, largest));
            checks.push((param, 7 % g.len()));
        }
        for (param, index) in checks {
            let eval = |step: f64| {
                let nudged = m.clone().map_named_params(&mut Nudge {
                    name: param,
                    index,
                    step,
                });
                loss_value(&nudged, input.clone(), &mask, LossReduction::Mean)
            };
            let fd = (eval(FD_STEP) - eval(-FD_STEP)) / (2.0 * FD_STEP);
            let ad = grads[param][index];
            assert!(
                (fd - ad).abs() <= FD_TOL * (1.0 + ad.abs()),
                "{name} {param}[{index}]: autodiff {ad} vs finite difference {fd}"
            );
        }
    }
}

fn changed(before: &HashMap<String, Vec<f64>>, after: &HashMap<String, Vec<f64>>) -> Vec<String> {
    let mut names: Vec<String> = before
        .iter()
        .filter(|(name, values)| after[*name] != **values)
        .map(|(name, _)| name.clone())
        .collect();
    names.sort();
    names
}

#[test]
fn parameter_selection_restricts_the_update() {
    let original = model("gpt2-tiny");
    let before = snapshot(&original);
    let run = |params: ParamSelection| {
        let config = DynEvalConfig {
            lr: 0.1,
            params,
            ..Default::default()
        };
        changed(
            &before,
            &snapshot(&sgd_update(&original, ids(12, 4), &config).unwrap().model),
        )
    };
    assert_eq!(
        run(ParamSelection::groups(&["attn_v"]).unwrap()),
        vec![
            "blocks.0.attn.value.bias",
            "blocks.0.attn.value.weight",
            "blocks.1.attn.value.bias",
            "blocks.1.attn.value.weight"
        ]
    );
    let top = run(ParamSelection::top_layers(1));
    assert!(
        top.iter()
            .all(|n| n.starts_with("blocks.1.") || n.starts_with("ln_f.")),
        "{top:?}"
    );
    assert!(
        top.contains(&"ln_f.gamma".to_string()) && top.contains(&"blocks.1.fc.weight".to_string())
    );
    let ln_mlp = run(ParamSelection::groups(&["ln", "mlp"]).unwrap());
    assert_eq!(ln_mlp.len(), 2 * 4 + 2 + 2 * 4, "{ln_mlp:?}");
    // Every parameter moves except the key biases: adding a constant to a whole row of scores does
    // not change the softmax, so their gradient is exactly zero.
    let all = run(ParamSelection::all());
    let mut still: Vec<&String> = before.keys().filter(|n| !all.contains(n)).collect();
    still.sort();
    assert_eq!(
        still,
        vec!["blocks.0.attn.key.bias", "blocks.1.attn.key.bias"]
    );
}

/// `selected_param_bytes` counts the bytes of exactly the parameters a selection trains (the
/// memory of one step's gradient): every parameter, or the value projections' four tensors.
#[test]
fn selected_param_bytes_counts_the_trained_parameters() {
    let original = model("gpt2-tiny");
    let values = snapshot(&original);
    let bytes_of = |names: &mut dyn Iterator<Item = &String>| {
        names.map(|n| values[n].len() as u64 * 4).sum::<u64>()
    };
    assert_eq!(
        selected_param_bytes(&original, &ParamSelection::all()),
        bytes_of(&mut values.keys())
    );
    let value_names: Vec<String> = ["0", "1"]
        .iter()
        .flat_map(|b| ["bias", "weight"].map(|w| format!("blocks.{b}.attn.value.{w}")))
        .collect();
    assert_eq!(
        selected_param_bytes(&original, &ParamSelection::groups(&["attn_v"]).unwrap()),
        bytes_of(&mut value_names.iter())
    );
    assert!(bytes_of(&mut value_names.iter()) > 0);
}

/// The updated copy stores OPT's transposed weights contiguously, so f32 matmuls round differently
/// (observed ~5e-7 on NLLs of order 6).
const SAME_MODEL_TOL: f64 = 1e-5;

#[test]
fn dynamic_eval_with_lr_zero_is_the_vanilla_model() {
    let m = model("opt-post-ln");
    let input = ids::<Ad>(16, 5);
    let config = DynEvalConfig {
        lr: 0.0,
        ..Default::default()
    };
    let outcome = dynamic_eval(&m, input.clone(), 10, &config).unwrap();
    let vanilla = continuation_nll(&m, input.clone(), 10).unwrap();
    assert_eq!(outcome.eval_nll[0].len(), 6);
    for (a, b) in outcome.eval_nll[0].iter().zip(&vanilla[0]) {
        assert!((a - b).abs() <= SAME_MODEL_TOL, "{a} vs {b}");
    }

    // A positive lr changes the evaluation losses.
    let config = DynEvalConfig {
        lr: 0.05,
        ..Default::default()
    };
    let outcome = dynamic_eval(&m, input, 10, &config).unwrap();
    let moved = outcome.eval_nll[0]
        .iter()
        .zip(&vanilla[0])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        moved > 100.0 * SAME_MODEL_TOL,
        "lr 0.05 moved the NLLs by only {moved}"
    );
}

#[test]
fn invalid_options_are_typed_errors() {
    let m = model("gpt2-tiny");
    let input = ids::<Ad>(8, 6);
    let bad = |config: DynEvalConfig| {
        matches!(
            sgd_update(&m, input.clone(), &config),
            Err(AuxError::InvalidOption { .. })
        )
    };
    assert!(bad(DynEvalConfig {
        lr: -1.0,
        ..Default::default()
    }));
    assert!(bad(DynEvalConfig {
        lr: f64::NAN,
        ..Default::default()
    }));
    assert!(bad(DynEvalConfig {
        params: ParamSelection::top_layers(0),
        ..Default::default()
    }));
    assert!(bad(DynEvalConfig {
        params: ParamSelection::top_layers(3),
        ..Default::default()
    }));
    assert!(bad(DynEvalConfig {
        params: ParamSelection {
            top_layers: None,
            groups: Some(vec![])
        },
        ..Default::default()
    }));
    assert!(bad(DynEvalConfig {
        loss_mask: LossMask::Targets(vec![vec![true; 3]]),
        ..Default::default()
    }));
    assert!(bad(DynEvalConfig {
        loss_mask: LossMask::Targets(vec![vec![false; 8]]),
        ..Default::default()
    }));
    assert!(matches!(
        ParamSelection::groups(&["mlp", "bogus"]),
        Err(AuxError::InvalidOption { .. })
    ));
    assert_eq!(
        ParamSelection::groups(&["attn"])
            .unwrap()
            .groups
            .unwrap()
            .len(),
        4
    );
    assert_eq!(
        "attn_v".parse::<ParamGroup>().unwrap(),
        ParamGroup::AttnValue
    );
    let config = DynEvalConfig::default();
    assert!(matches!(
        dynamic_eval(&m, input.clone(), 8, &config),
        Err(AuxError::InvalidOption { .. })
    ));
    assert!(matches!(
        dynamic_eval(&m, input, 1, &config),
        Err(AuxError::InvalidOption { .. })
    ));
}

/// float32 units in the last place a weight of the block-by-block step may differ from the
/// whole-graph step's: both run the same operations, but autodiff sums the gradient parts of a
/// residual-stream state in another order, which moves a gradient by a few ulps and the updated
/// weight by at most one (measured: 1.19e-7 on norm gains near 1, steps of 4e-3 to 0.17).
const WEIGHT_ULPS: f64 = 2.0;

/// And a fraction of the parameter's largest step: the gradient reaching a lower block through
/// float32 sums in another order differs relatively by about 1e-6 per block (measured: 3.6e-7 on
/// an embedding weight whose largest step is 0.08, 4.5e-6 of it), and so does its step.
const STEP_RELATIVE: f64 = 1e-4;

/// Relative difference allowed between the two training losses: a sparse mask's block-by-block
/// loss sums the same per-target NLLs piece by piece (rows of like length, the LM head at the
/// target positions only), float32 sums in another order (a few ulps of the loss; measured below
/// 3e-7 on the tiny models). A mask counting every position runs the same operations: equal.
const LOSS_RELATIVE: f64 = 1e-5;

/// Whether token `t` of sequence `b` is a training target.
type TargetRule = Box<dyn Fn(usize, usize) -> bool>;

/// The block-by-block backward ([`GradientMemory::Least`] on LLaMA, which keeps one block's
/// intermediates at a time) gives the whole graph's SGD step: the same training loss (to the bit
/// where the mask counts every position, else within [`LOSS_RELATIVE`]) and weights within
/// [`WEIGHT_ULPS`] and [`STEP_RELATIVE`], on a tied and an untied tiny LLaMA, mean and sum, every
/// parameter, the top block only (the embedding does not train) and TinT's groups, with four
/// masks on batches of three sequences: every position; a scattered mask; padded rows of three
/// lengths with full-context targets (rows run in pieces up to their last target); one label
/// target per row with a row that has none (the LM head only at three positions, the row left
/// out). A wrong gradient passed between blocks or pieces, a lost or doubled tied-embedding part,
/// or a target read at the wrong position moves weights by the step's size (1e-3 and more here).
#[test]
fn the_block_by_block_backward_gives_the_whole_graph_step() {
    let (batch, length) = (3, 12);
    let masks: [(&str, TargetRule); 4] = [
        ("every position", Box::new(|_, t| t > 0)),
        ("scattered", Box::new(|b, t| t > 0 && (t + b) % 3 != 0)),
        // Rows of 12, 7 and 4 tokens before their padding.
        ("padded", Box::new(|b, t| t > 0 && t < [12, 7, 4][b])),
        // One label word per row, at 11, 5 and none.
        (
            "labels",
            Box::new(|b, t| [Some(11), Some(5), None][b] == Some(t)),
        ),
    ];
    for name in ["tiny", "tiny_tied"] {
        let dir = repo_root().join("fixtures/llama").join(name);
        let original: AuxModel<Ad> = load_model(&dir, &Default::default()).unwrap();
        // Ids inside the tiny vocabulary (97 tokens).
        let values: Vec<i64> = (0..(batch * length) as i64)
            .map(|i| (i * 13 + 5) % 97)
            .collect();
        let input = Tensor::<Ad, 2, Int>::from_data(
            TensorData::new(values, [batch, length]),
            &Default::default(),
        );
        let before = snapshot(&original);
        let selections = [
            ParamSelection::all(),
            ParamSelection::top_layers(1),
            ParamSelection::groups(&["attn_v", "attn_o", "mlp"]).unwrap(),
        ];
        for (mask_name, target) in &masks {
            let targets: Vec<Vec<bool>> = (0..batch)
                .map(|b| (0..length).map(|t| target(b, t)).collect())
                .collect();
            let every = targets.iter().all(|row| row[1..].iter().all(|&t| t));
            for params in &selections {
                for reduction in [LossReduction::Mean, LossReduction::Sum] {
                    let config = |memory| DynEvalConfig {
                        lr: 0.05,
                        reduction,
                        params: params.clone(),
                        loss_mask: LossMask::Targets(targets.clone()),
                        memory,
                        ..Default::default()
                    };
                    let least =
                        sgd_update(&original, input.clone(), &config(GradientMemory::Least));
                    let whole = sgd_update(
                        &original,
                        input.clone(),
                        &config(GradientMemory::WholeGraph),
                    );
                    let (least, whole) = (least.unwrap(), whole.unwrap());
                    let what = format!("{name} {mask_name} {params:?} {reduction:?}");
                    if every {
                        assert_eq!(least.losses, whole.losses, "{what}: losses");
                    } else {
                        let (l, w) = (least.losses[0], whole.losses[0]);
                        assert!(
                            (l - w).abs() <= LOSS_RELATIVE * w.abs(),
                            "{what}: loss {l} (block by block) vs {w} (whole graph)"
                        );
                    }
                    let (least, whole) = (snapshot(&least.model), snapshot(&whole.model));
                    let moved = changed(&before, &whole);
                    assert!(!moved.is_empty(), "{what}: the step changed nothing");
                    assert_eq!(
                        changed(&before, &least),
                        moved,
                        "{what}: updated parameters"
                    );
                    for (param, values) in &whole {
                        let step = values
                            .iter()
                            .zip(&before[param])
                            .fold(0f64, |max, (w, b)| max.max((w - b).abs()));
                        for (index, (l, w)) in least[param].iter().zip(values).enumerate() {
                            let tolerance =
                                WEIGHT_ULPS * f64::from(f32::EPSILON) * w.abs().max(1.0)
                                    + STEP_RELATIVE * step;
                            assert!(
                                (l - w).abs() <= tolerance,
                                "{what}: {param}[{index}] {l} (block by block) vs {w} (whole graph)"
                            );
                        }
                    }
                }
            }
        }
    }
}
