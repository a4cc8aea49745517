//! No silent NaN in the evaluations (issue 20): on the committed micro GPT-2, a checkpoint with a NaN
//! weight and a TinT / dynamic-evaluation step of 1e300 give [`EvalError::NonFinite`] naming the
//! method, the block or example, and where the value first appeared; with `allow_non_finite` the
//! run finishes, records the values, and its report survives JSON (NaN written as `null`, read back
//! as NaN, the cell refused by `--resume`'s validation).

use std::path::{Path, PathBuf};

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use tint_aux::AuxModel;
use tint_eval::icl::{
    calibration_prior, run_icl_cell, CellResult, DynEvalIcl, Example, IclMethod, IclReport,
    IclSettings, PlainIcl, PromptEncoder, TaskData, TaskKind, Template,
};
use tint_eval::methods::{DynEval, Tint, Vanilla};
use tint_eval::non_finite::NonFiniteOrigin;
use tint_eval::{run_lm_eval, EvalError, LmEvalConfig, LmMethod, LmReport};
use tint_sim::Engine;
use tint_sim::{TintConfig, TintSizes};

type B = Flex;
type AB = Autodiff<Flex>;

/// The committed micro GPT-2 (random weights, vocabulary 4096, 64 positions).
fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/official-tint/micro-gpt2-random")
}

/// A copy of the micro GPT-2 whose tensor `name` has a NaN as its first value.
fn poisoned(tag: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tint-eval-nan-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["config.json", "tokenizer.json", "vocab.json", "merges.txt"] {
        std::fs::copy(fixture().join(file), dir.join(file)).unwrap();
    }
    let mut bytes = std::fs::read(fixture().join("model.safetensors")).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    assert_eq!(header[name]["dtype"], "F32");
    let start = 8 + header_len + header[name]["data_offsets"][0].as_u64().unwrap() as usize;
    bytes[start..start + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(dir.join("model.safetensors"), bytes).unwrap();
    dir
}

fn load<Bk: burn::tensor::backend::Backend>(dir: &Path) -> AuxModel<Bk> {
    tint_aux::load_model(dir, &Default::default()).unwrap()
}

fn blocks() -> Vec<Vec<u32>> {
    (0..2)
        .map(|b| (0..32u32).map(|i| (i * 37 + 11 + 101 * b) % 4096).collect())
        .collect()
}

fn config(allow_non_finite: bool) -> LmEvalConfig {
    LmEvalConfig {
        block_size: 32,
        train_fractions: vec![0.5],
        bootstrap_resamples: 20,
        allow_non_finite,
        ..Default::default()
    }
}

fn run(method: &mut dyn LmMethod, allow: bool) -> Result<LmReport, EvalError> {
    let mut methods: Vec<Box<dyn LmMethod + '_>> = vec![Box::new(method)];
    run_lm_eval(
        &blocks(),
        &config(allow),
        &mut methods,
        serde_json::json!({}),
        &[],
        &mut |_| {},
    )
}

/// The poisoned tensor, in the loader's parameter names.
const POISONED: &str = "transformer.h.1.mlp.c_fc.weight";

#[test]
fn a_nan_weight_is_named_by_every_lm_method_and_recorded_only_when_allowed() {
    let dir = poisoned("lm", POISONED);
    let model = load::<AB>(&dir);
    let inference: AuxModel<B> = model.valid();
    let weight = tint_aux::first_non_finite_weight(&inference).expect("the NaN is found");
    assert!(weight.contains("(1 of 4096 values non-finite)"), "{weight}");
    let tint_config = {
        let mut c = TintConfig::sized_for(32, 4, TintSizes::default());
        c.step.inner_lr = 1e-3;
        c
    };
    let mut methods: Vec<Box<dyn LmMethod + '_>> = vec![
        Box::new(Vanilla::new(&inference)),
        Box::new(DynEval {
            model: &model,
            lr: Some(1e-3),
            inner_lr: 0.0,
            steps: 1,
            top_layers: None,
            tint_params_only: false,
        }),
        Box::new(Tint::for_method(&inference, tint_config, Engine::Reference).unwrap()),
    ];
    for method in methods.iter_mut() {
        let name = method.name();
        let err = run(method.as_mut(), false).unwrap_err();
        match &err {
            EvalError::NonFinite {
                method,
                quantity,
                location,
                value,
                origin,
            } => {
                assert_eq!(method, &name);
                assert_eq!(*quantity, "NLL");
                assert_eq!(location, "evaluation block 0 at train fraction 0.5");
                assert!(!value.is_finite());
                assert_eq!(origin, &NonFiniteOrigin::Weights(weight.clone()), "{name}");
            }
            other => panic!("{name}: expected NonFinite, got {other}"),
        }
        assert!(err.to_string().contains("checkpoint weights"), "{err}");
    }
    // Recorded when allowed: the report holds NaN, survives its JSON, and is not reused.
    let report = run(&mut Vanilla::new(&inference), true).unwrap();
    let cell = &report.results[0];
    assert!(cell.blocks.iter().all(|b| b.sum_nll.is_nan()));
    assert!(cell.perplexity.value.is_nan());
    let path = dir.join("lm.json");
    report.write_json(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"sum_nll\": null"), "NaN is written as null");
    let back: LmReport = serde_json::from_str(&text).unwrap();
    assert!(back.results[0].blocks[0].sum_nll.is_nan());
    let why = tint_eval::resume::validate_cell(&back.results[0], 2, 32).unwrap_err();
    assert!(why.contains("NaN"), "{why}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_step_of_1e300_is_named_as_the_update() {
    let model = load::<AB>(&fixture());
    let inference: AuxModel<B> = model.valid();
    let mut tint_config = TintConfig::sized_for(32, 4, TintSizes::default());
    tint_config.step.inner_lr = 1e300;
    let mut reference = Tint::for_method(&inference, tint_config, Engine::Reference).unwrap();
    let mut dyn_eval = DynEval {
        model: &model,
        lr: Some(1e300),
        inner_lr: 0.0,
        steps: 1,
        top_layers: None,
        tint_params_only: false,
    };
    for (method, step) in [
        (
            &mut reference as &mut dyn LmMethod,
            "tint-ref: inner_lr 1e300, 1 simulated step(s)",
        ),
        (
            &mut dyn_eval,
            "dynamic evaluation: lr 1e300 on the mean loss, 1 step(s)",
        ),
    ] {
        match run(method, false).unwrap_err() {
            EvalError::NonFinite { origin, .. } => {
                assert_eq!(origin, NonFiniteOrigin::Update(step.into()))
            }
            other => panic!("expected NonFinite, got {other}"),
        }
        let report = run(method, true).unwrap();
        assert!(!report.results[0].perplexity.value.is_finite());
    }
    // The unadapted model is finite on the same blocks.
    let plain = run(&mut Vanilla::new(&inference), false).unwrap();
    assert!(plain.results[0].perplexity.value.is_finite());
}

/// A two-class task of six short examples (three for the pool, three evaluated).
fn task() -> TaskData {
    let example = |text: &str, label| Example {
        text: text.into(),
        label,
    };
    TaskData {
        task: TaskKind::Mr,
        train: vec![
            example("a fine film", 1),
            example("dull and slow", 0),
            example("warm and funny", 1),
        ],
        test: vec![
            example("a bright story", 1),
            example("tired jokes", 0),
            example("lovely", 1),
        ],
    }
}

fn icl_settings(k: usize, allow: bool) -> IclSettings {
    IclSettings {
        k,
        seeds: vec![0],
        allow_non_finite: allow,
        ..Default::default()
    }
}

fn non_finite(err: EvalError) -> (String, &'static str, String, NonFiniteOrigin) {
    match err {
        EvalError::NonFinite {
            method,
            quantity,
            location,
            origin,
            ..
        } => (method, quantity, location, origin),
        other => panic!("expected NonFinite, got {other}"),
    }
}

#[test]
fn icl_names_the_example_and_the_origin_and_records_only_when_allowed() {
    let dir = poisoned("icl", POISONED);
    let model = load::<AB>(&dir);
    let inference: AuxModel<B> = model.valid();
    let weight = NonFiniteOrigin::Weights(tint_aux::first_non_finite_weight(&inference).unwrap());
    let tokenizer = tint_aux::AuxTokenizer::from_dir(&dir).unwrap();
    let template = Template::for_task(TaskKind::Mr);
    let encoder = PromptEncoder::new(&tokenizer, &template, 16, 64).unwrap();
    let data = task();

    let err = calibration_prior(&mut PlainIcl::new(&inference), &encoder, false).unwrap_err();
    let (method, quantity, location, origin) = non_finite(err);
    assert_eq!((method.as_str(), quantity), ("icl", "label-word score"));
    assert!(location.contains("calibration prompt"), "{location}");
    assert_eq!(origin, weight);
    let prior = calibration_prior(&mut PlainIcl::new(&inference), &encoder, true).unwrap();
    assert!(prior.iter().all(|p| p.is_nan()));

    let mut plain = PlainIcl::new(&inference);
    let err = run_icl_cell(
        &mut plain,
        &encoder,
        &data,
        &icl_settings(0, false),
        &mut |_| {},
    )
    .unwrap_err();
    let (_, _, location, origin) = non_finite(err);
    assert_eq!(location, "the calibration prompt of seed 0");
    assert_eq!(origin, weight);

    // Dynamic evaluation on the demonstrations: the training loss is the first non-finite value.
    let mut dyn_eval = DynEvalIcl::new(
        &model,
        tint_aux::DynEvalConfig {
            lr: 1e-3,
            ..Default::default()
        },
    );
    let err = run_icl_cell(
        &mut dyn_eval,
        &encoder,
        &data,
        &icl_settings(2, false),
        &mut |_| {},
    )
    .unwrap_err();
    let (_, quantity, location, origin) = non_finite(err);
    assert_eq!(quantity, "training loss");
    assert_eq!(location, "the training on the demonstrations of seed 0");
    assert_eq!(origin, weight);

    // Allowed: every prediction recorded from NaN scores (class 0), the cell refused on resume,
    // the report readable.
    let cell = run_icl_cell(
        &mut plain,
        &encoder,
        &data,
        &icl_settings(0, true),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(cell.non_finite_predictions(), 3);
    assert!(cell.runs[0].predictions.iter().all(|p| p.predicted == 0));
    assert!(cell.validate().is_err());
    let mut report = IclReport::new("poisoned micro GPT-2", "flex");
    report.upsert(cell);
    let path = dir.join("icl.json");
    report.write_json(&path).unwrap();
    let back = IclReport::read_json(&path).unwrap();
    let stored: &CellResult = &back.cells[0];
    assert!(stored.runs[0].predictions[0].scores[0].is_nan());
    assert_eq!(stored.non_finite_predictions(), 3);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn icl_names_the_update_when_the_step_blows_up() {
    let model = load::<AB>(&fixture());
    let tokenizer = tint_aux::AuxTokenizer::from_dir(&fixture()).unwrap();
    let template = Template::for_task(TaskKind::Mr);
    let encoder = PromptEncoder::new(&tokenizer, &template, 16, 64).unwrap();
    let mut dyn_eval = DynEvalIcl::new(
        &model,
        tint_aux::DynEvalConfig {
            lr: 1e300,
            ..Default::default()
        },
    );
    let err = run_icl_cell(
        &mut dyn_eval,
        &encoder,
        &task(),
        &icl_settings(2, false),
        &mut |_| {},
    )
    .unwrap_err();
    let (method, quantity, location, origin) = non_finite(err);
    assert_eq!(method, dyn_eval.name());
    assert_eq!(quantity, "label-word score");
    assert!(
        location.starts_with("the calibration prompt of seed 0"),
        "{location}"
    );
    assert_eq!(
        origin,
        NonFiniteOrigin::Update("dynamic evaluation: lr 1e300, 1 step(s)".into())
    );
}
