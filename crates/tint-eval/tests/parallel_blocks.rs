//! Scoring blocks on several threads (`--workers`) and `vanilla` read from `tint-ref`'s first pass
//! (`--vanilla-from-ref`), on the committed micro GPT-2.

use std::path::PathBuf;

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use tint_aux::AuxModel;
use tint_eval::methods::{default_tint_config, DynEval, Tint, UnadaptedNlls, Vanilla};
use tint_eval::{run_lm_eval, LmEvalConfig, LmMethod, LmReport};

type B = Flex;
type AB = Autodiff<Flex>;

fn micro<Bk: burn::tensor::backend::Backend>() -> AuxModel<Bk> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/official-tint/micro-gpt2-random");
    tint_aux::load_model(&dir, &Default::default()).unwrap()
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
    let mut tint = default_tint_config(32, 4, None, None, None);
    tint.step.inner_lr = 1e-2;
    let mut methods: Vec<Box<dyn LmMethod + '_>> = vec![
        Box::new(Vanilla::new(&inference)),
        Box::new(DynEval {
            model: &model,
            lr: None,
            inner_lr: 1e-2,
            steps: 1,
            top_layers: None,
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
    let mut tint = default_tint_config(32, 4, None, None, None);
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
