//! The LM-evaluation methods on the committed micro GPT-2: bookkeeping and agreement between methods,
//! blocks scored on several threads (`--workers`) and `vanilla` read from `tint-ref`'s first pass
//! (`--vanilla-from-ref`).

use std::path::PathBuf;

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use tint_aux::AuxModel;
use tint_eval::methods::{DynEval, Labelled, Tint, UnadaptedNlls, Vanilla};
use tint_eval::{run_lm_eval, LmEvalConfig, LmMethod, LmReport};
use tint_sim::{TintConfig, TintSizes};

type B = Flex;
type AB = Autodiff<Flex>;

fn micro<Bk: burn::tensor::backend::Backend>() -> AuxModel<Bk> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/official-tint/micro-gpt2-random");
    tint_aux::load_model(&dir, &Default::default()).unwrap()
}

fn block() -> Vec<u32> {
    (0..48u32).map(|i| (i * 37 + 11) % 4096).collect()
}

/// f32 sums of ~40 NLLs of size ~8 computed along two paths (cached slice vs direct): round-off only.
const SAME_PATH_TOL: f64 = 1e-3;

#[test]
fn vanilla_caches_per_block_and_slices_by_fraction() {
    let model = micro::<B>();
    let mut vanilla = Vanilla::new(&model);
    let block = block();
    let a = vanilla.block_nll(&block, 10).unwrap();
    let b = vanilla.block_nll(&block, 30).unwrap();
    assert_eq!(a.count, 38);
    assert_eq!(b.count, 18);
    // Direct computation of the targets 30..48.
    let nll = tint_aux::continuation_nll(
        &model,
        tint_eval::methods::block_ids::<B>(&block, &Default::default()),
        30,
    )
    .unwrap();
    let direct: f64 = nll[0].iter().sum();
    assert!(
        (direct - b.sum_nll).abs() < SAME_PATH_TOL,
        "{direct} vs {}",
        b.sum_nll
    );
    assert!(a.sum_nll > b.sum_nll, "more targets, more loss");
}

#[test]
fn dyn_eval_with_zero_lr_is_vanilla() {
    let model = micro::<AB>();
    let inference: AuxModel<B> = model.valid();
    let block = block();
    let plain = Vanilla::new(&inference).block_nll(&block, 24).unwrap();
    let mut zero = DynEval {
        model: &model,
        lr: Some(0.0),
        inner_lr: 0.0,
        steps: 1,
        top_layers: None,
        tint_params_only: false,
    };
    let dyn0 = zero.block_nll(&block, 24).unwrap();
    assert_eq!(plain.count, dyn0.count);
    assert!((plain.sum_nll - dyn0.sum_nll).abs() < SAME_PATH_TOL);
    // The matched step: lr = eta * (train_len - 1).
    let matched = DynEval {
        model: &model,
        lr: None,
        inner_lr: 1e-3,
        steps: 1,
        top_layers: None,
        tint_params_only: false,
    };
    assert!((matched.lr_for(24) - 23e-3).abs() < 1e-15);
}

/// Simulator vs functional reference in f32: the finite differences at s = 1000 lose ~3 digits
/// (docs/construction.md §9.4); summed over ~24 targets the NLL may differ by a few 1e-3.
const SIM_VS_REF_NLL_TOL: f64 = 2e-2;

#[test]
fn tint_simulator_matches_its_reference_and_moves_the_loss() {
    let model = micro::<B>();
    let mut config = TintConfig::sized_for(32, 4, TintSizes::default());
    assert_eq!(
        (config.hidden_size, config.num_prefixes, config.num_heads),
        (160, 8, 20)
    );
    config.step.inner_lr = 1e-2;
    let block = block();
    let mut sim = Tint::simulator(&model, config.clone()).unwrap();
    let mut reference = Tint::reference(&model, config.clone()).unwrap();
    assert_eq!(sim.name(), "tint");
    assert_eq!(reference.name(), "tint-ref");
    let s = sim.block_nll(&block, 24).unwrap();
    let r = reference.block_nll(&block, 24).unwrap();
    assert!(
        (s.sum_nll - r.sum_nll).abs() < SIM_VS_REF_NLL_TOL,
        "{} vs {}",
        s.sum_nll,
        r.sum_nll
    );
    let plain = Vanilla::new(&model).block_nll(&block, 24).unwrap();
    assert!(
        (plain.sum_nll - r.sum_nll).abs() > 1e-3,
        "the update must change the loss"
    );
    config.step.inner_lr = 0.0;
    let mut still = Tint::reference(&model, config).unwrap();
    let z = still.block_nll(&block, 24).unwrap();
    assert!(
        (plain.sum_nll - z.sum_nll).abs() < SAME_PATH_TOL,
        "eta 0 is the plain model"
    );
}

#[test]
fn dyn_eval_budget_trains_only_the_top_layers_and_labels_rename() {
    let model = micro::<AB>();
    let block = block();
    let nll = |top_layers| {
        DynEval {
            model: &model,
            lr: Some(0.5),
            inner_lr: 0.0,
            steps: 1,
            top_layers,
            tint_params_only: false,
        }
        .block_nll(&block, 24)
        .unwrap()
        .sum_nll
    };
    let inference: AuxModel<B> = model.valid();
    let plain = Vanilla::new(&inference)
        .block_nll(&block, 24)
        .unwrap()
        .sum_nll;
    let (all, top1) = (nll(None), nll(Some(1)));
    // Both updates move the loss, and training fewer parameters is a different update.
    assert!((all - plain).abs() > 1e-4, "{all} vs {plain}");
    assert!((top1 - plain).abs() > 1e-6, "{top1} vs {plain}");
    assert!((top1 - all).abs() > 1e-6, "{top1} vs {all}");
    let mut labelled = Labelled {
        label: "vanilla (cached)".to_string(),
        method: Vanilla::new(&inference),
    };
    assert_eq!(labelled.name(), "vanilla (cached)");
    assert_eq!(labelled.block_nll(&block, 24).unwrap().sum_nll, plain);
}

/// The matched baseline trains exactly TinT's parameter groups (on GPT-2: value, output, MLP and
/// the LayerNorms) in the budget's layers: never queries, keys or embeddings, nothing below them.
#[test]
fn dyn_eval_matched_trains_tint_s_parameters_only() {
    use tint_aux::{ParamGroup, ParamInfo};
    let model = micro::<AB>();
    let selection = tint_eval::methods::tint_updated_params(&model, Some(1));
    let info = |layer, group| ParamInfo {
        name: String::new(),
        layer,
        group,
    };
    let n_layers = 2;
    for (layer, group, selected) in [
        (Some(1), ParamGroup::AttnValue, true),
        (Some(1), ParamGroup::AttnOutput, true),
        (Some(1), ParamGroup::Mlp, true),
        (Some(1), ParamGroup::LayerNorm, true),
        (None, ParamGroup::LayerNorm, true),
        (Some(1), ParamGroup::AttnQuery, false),
        (Some(1), ParamGroup::AttnKey, false),
        (None, ParamGroup::Embedding, false),
        (Some(0), ParamGroup::AttnValue, false),
        (Some(0), ParamGroup::Mlp, false),
    ] {
        assert_eq!(
            selection.selects(&info(layer, group), n_layers),
            selected,
            "{layer:?} {group:?}"
        );
    }
    let block = block();
    let nll = |top_layers| {
        DynEval {
            model: &model,
            lr: Some(0.5),
            inner_lr: 0.0,
            steps: 1,
            top_layers,
            tint_params_only: true,
        }
        .block_nll(&block, 24)
        .unwrap()
        .sum_nll
    };
    let (top1, all) = (nll(Some(1)), nll(None));
    let inference: AuxModel<B> = model.valid();
    let plain = Vanilla::new(&inference)
        .block_nll(&block, 24)
        .unwrap()
        .sum_nll;
    // Both move the loss, and the budget's layers bound the update. (On this micro model the
    // top layer's query and key maps get no gradient, so the top-1 update equals plain top-1
    // dynamic evaluation here: the selection check above is what tells them apart.)
    assert!((top1 - plain).abs() > 1e-6, "{top1} vs {plain}");
    assert!((all - top1).abs() > 1e-6, "{all} vs {top1}");
    let named = DynEval {
        model: &model,
        lr: None,
        inner_lr: 1e-3,
        steps: 1,
        top_layers: Some(1),
        tint_params_only: true,
    };
    assert_eq!(named.name(), "dyn-eval-matched");
}

/// Five different blocks of 48 tokens of the micro model's 4096-token vocabulary.
fn blocks() -> Vec<Vec<u32>> {
    (0..5u32)
        .map(|b| (0..48u32).map(|i| (i * 37 + 11 + 101 * b) % 4096).collect())
        .collect()
}

fn config(workers: usize) -> LmEvalConfig {
    LmEvalConfig {
        block_size: 48,
        train_fractions: vec![0.5],
        bootstrap_resamples: 20,
        workers,
        ..Default::default()
    }
}

/// Every method of the evaluation, on `workers` threads.
fn run(workers: usize) -> LmReport {
    let model = micro::<AB>();
    let inference: AuxModel<B> = model.valid();
    let mut tint = TintConfig::sized_for(32, 4, TintSizes::default());
    tint.step.inner_lr = 1e-2;
    let mut methods: Vec<Box<dyn LmMethod + '_>> = vec![
        Box::new(Vanilla::new(&inference)),
        Box::new(DynEval {
            model: &model,
            lr: None,
            inner_lr: 1e-2,
            steps: 1,
            top_layers: None,
            tint_params_only: false,
        }),
        Box::new(Tint::simulator(&inference, tint.clone()).unwrap()),
        Box::new(Tint::reference(&inference, tint).unwrap()),
    ];
    for method in &methods {
        assert!(method.fork().is_some(), "{} forks", method.name());
    }
    run_lm_eval(
        &blocks(),
        &config(workers),
        &mut methods,
        serde_json::json!({}),
        &[],
        &mut |_| {},
    )
    .unwrap()
}

/// A block's NLL is the same computation whichever thread runs it and whatever runs beside it:
/// equal to the last bit, in block order.
#[test]
fn two_workers_give_the_nlls_of_one_to_the_last_bit() {
    let one = run(1);
    let two = run(2);
    assert_eq!(one.results.len(), 4);
    for (a, b) in one.results.iter().zip(&two.results) {
        assert_eq!(a.method, b.method);
        let bits = |c: &tint_eval::MethodResult| {
            c.blocks
                .iter()
                .map(|n| (n.sum_nll.to_bits(), n.count))
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(a), bits(b), "{}", a.method);
        // Different blocks give different NLLs: the order is the blocks' order, not a copy.
        assert_ne!(a.blocks[0].sum_nll, a.blocks[1].sum_nll);
    }
}

/// Float32 NLLs of the same 24 targets computed by two codes (the auxiliary forward and the
/// functional reference's first pass, which order their sums differently): round-off only (each
/// NLL is about 8.3 = ln 4096, summed over 24 targets).
const TWO_CODES_TOL: f64 = 1e-3;

/// `tint-ref` puts its first pass (the unadapted model) into the cache and `vanilla` reads it from
/// there: the same values as `vanilla`'s own forward, up to the two codes' rounding.
#[test]
fn vanilla_reads_the_first_pass_of_tint_ref() {
    let model = micro::<B>();
    let mut tint = TintConfig::sized_for(32, 4, TintSizes::default());
    tint.step.inner_lr = 1e-2;
    let cache = UnadaptedNlls::default();
    let mut reference = Tint::reference(&model, tint)
        .unwrap()
        .recording_first_pass(cache.clone());
    let block = &blocks()[2];
    let adapted = reference.block_nll(block, 24).unwrap();
    let first_pass = cache.lock().unwrap()[block].clone();
    assert_eq!(first_pass.len(), 47, "one NLL per target 1..48");

    let from_cache = Vanilla::with_cache(&model, cache.clone())
        .block_nll(block, 24)
        .unwrap();
    let expected: f64 = first_pass[23..].iter().sum();
    assert_eq!(from_cache.sum_nll.to_bits(), expected.to_bits());
    assert_eq!(from_cache.count, 24);

    let own = Vanilla::new(&model).block_nll(block, 24).unwrap();
    assert!(
        (own.sum_nll - from_cache.sum_nll).abs() < TWO_CODES_TOL,
        "{} vs {}",
        own.sum_nll,
        from_cache.sum_nll
    );
    assert!(
        (adapted.sum_nll - own.sum_nll).abs() > 1e-2,
        "the cache holds the first pass, not the adapted one"
    );
}

/// Tuning's dynamic evaluation keeps each block's gradient for the grid's other step sizes
/// (`DynEval::sharing_gradients`): every step size gives the NLL of a step computed afresh, to
/// the bit, on GPT-2 (the whole graph) and on LLaMA (the block-by-block backward); a second
/// block is differentiated anew; more than one step computes afresh.
#[test]
fn dyn_eval_sharing_one_gradient_across_step_sizes_gives_the_same_nlls_to_the_bit() {
    use tint_eval::step_reuse::StepReuse;
    let llama_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/llama/tiny");
    let models: [(&str, AuxModel<AB>); 2] = [
        ("micro GPT-2", micro::<AB>()),
        (
            "tiny LLaMA",
            tint_aux::load_model(&llama_dir, &Default::default()).unwrap(),
        ),
    ];
    for (name, model) in &models {
        let vocab = model.vocab_size() as u32;
        let blocks: Vec<Vec<u32>> = (0..2u32)
            .map(|b| (0..24u32).map(|i| (i * 37 + 11 + b * 5) % vocab).collect())
            .collect();
        for (steps, tint_params_only) in [(1, false), (1, true), (2, false)] {
            let method = |lr: f64| DynEval {
                model,
                lr: Some(lr),
                inner_lr: 0.0,
                steps,
                top_layers: None,
                tint_params_only,
            };
            let gradients = StepReuse::default();
            let lrs = [1e-3, 3e-2, 0.3];
            let mut sharing: Vec<_> = lrs
                .iter()
                .map(|&lr| method(lr).sharing_gradients(gradients.clone()))
                .collect();
            for block in &blocks {
                for (m, &lr) in sharing.iter_mut().zip(&lrs) {
                    let kept = m.block_nll(block, 12).unwrap();
                    let fresh = method(lr).block_nll(block, 12).unwrap();
                    assert_eq!(
                        (kept.sum_nll.to_bits(), kept.count),
                        (fresh.sum_nll.to_bits(), fresh.count),
                        "{name}, {steps} step(s), lr {lr}: {} vs {}",
                        kept.sum_nll,
                        fresh.sum_nll
                    );
                }
            }
            // One gradient per block, reused by the two other step sizes; none kept for 2 steps.
            let expected = if steps == 1 { 2 * (lrs.len() - 1) } else { 0 };
            assert_eq!(gradients.reused(), expected, "{name}, {steps} step(s)");
        }
    }
}

/// Tuning's functional reference keeps each block's descent direction for the grid's other step
/// sizes (`Tint::sharing_directions`): on the tiny LLaMA every step size gives the NLL of the
/// whole step computed afresh, to the bit, and a second block runs its own first pass; the GPT-2
/// reference gives no directions, so it is handed back to run whole steps.
#[test]
fn tint_ref_sharing_one_direction_across_step_sizes_gives_the_same_nlls_to_the_bit() {
    use tint_eval::step_reuse::StepReuse;
    let llama_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/llama/tiny");
    let model: AuxModel<B> = tint_aux::load_model(&llama_dir, &Default::default()).unwrap();
    let vocab = model.vocab_size() as u32;
    let blocks: Vec<Vec<u32>> = (0..2u32)
        .map(|b| (0..24u32).map(|i| (i * 37 + 11 + b * 5) % vocab).collect())
        .collect();
    let method = |eta: f64| {
        let mut config = TintConfig::sized_for(64, 4, TintSizes::default());
        config.step.inner_lr = eta;
        Tint::reference(&model, config).unwrap()
    };
    let directions = StepReuse::default();
    let etas = [1e-3, 3e-2, 0.3];
    let mut sharing: Vec<_> = etas
        .iter()
        .map(|&eta| {
            method(eta)
                .sharing_directions(directions.clone())
                .unwrap_or_else(|_| panic!("the LLaMA reference gives directions"))
        })
        .collect();
    for block in &blocks {
        for (m, &eta) in sharing.iter_mut().zip(&etas) {
            let kept = m.block_nll(block, 12).unwrap();
            let fresh = method(eta).block_nll(block, 12).unwrap();
            assert_eq!(
                (kept.sum_nll.to_bits(), kept.count),
                (fresh.sum_nll.to_bits(), fresh.count),
                "eta {eta}: {} vs {}",
                kept.sum_nll,
                fresh.sum_nll
            );
        }
    }
    assert_eq!(directions.reused(), 2 * (etas.len() - 1));
    let micro_model = micro::<B>();
    let mut config = TintConfig::sized_for(32, 4, TintSizes::default());
    config.step.inner_lr = 1e-2;
    let gpt2 = Tint::reference(&micro_model, config).unwrap();
    assert!(gpt2.sharing_directions(StepReuse::default()).is_err());
}
