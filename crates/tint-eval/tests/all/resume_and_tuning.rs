//! Held-out tuning, paired statistics and crash-safe resumption, end to end on small data:
//!
//! - a run killed (SIGKILL) in the middle leaves a report that parses, and resuming from it computes
//!   only the missing cells and gives the numbers of an uninterrupted run;
//! - a tampered stored cell is recomputed, cells of methods not run are kept;
//! - the ICL dev set never shares an example with the evaluated examples;
//! - the paper's calibration prior is the same for every row;
//! - paired ICL differences count wins per (seed, example).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use tint_aux::{load_model, AuxModel, AuxTokenizer, DynEvalConfig};
use tint_eval::icl::{
    calibration_prior, run_icl_cell, DynEvalIcl, Example, IclReport, IclSettings, PlainIcl,
    PromptEncoder, TaskData, TaskKind, Template,
};
use tint_eval::resume::{merge, validate_cell};
use tint_eval::{run_lm_eval, BlockNll, EvalError, LmEvalConfig, LmMethod, LmReport};

type B = Flex;

/// Relative error of an f64 after a JSON round trip (serde_json's default parser is within a few
/// ulps).
const JSON_TOL: f64 = 1e-14;
type AB = Autodiff<Flex>;

/// A deterministic method whose NLL depends on the block and fraction only; `delay` slows it so a
/// run can be killed in the middle.
struct Slow {
    name: &'static str,
    offset: f64,
    delay: Duration,
}

impl LmMethod for Slow {
    fn name(&self) -> String {
        self.name.into()
    }
    fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
        std::thread::sleep(self.delay);
        let count = block.len() - train_len;
        Ok(BlockNll {
            sum_nll: count as f64 * (1.0 + self.offset + 0.01 * f64::from(block[0] % 7)),
            count,
        })
    }
}

fn blocks() -> Vec<Vec<u32>> {
    (0..6u32).map(|b| (b * 10..b * 10 + 10).collect()).collect()
}

fn config() -> LmEvalConfig {
    LmEvalConfig {
        block_size: 10,
        train_fractions: vec![0.3, 0.5, 0.7],
        bootstrap_resamples: 50,
        ..Default::default()
    }
}

/// Runs the two slow methods, writing the report (atomically) after every finished cell, as
/// `eval lm` does; `previous` are resumed cells.
fn run_writing(out: &Path, delay: Duration, previous: &[tint_eval::MethodResult]) -> LmReport {
    let mut methods: Vec<Box<dyn LmMethod>> = vec![
        Box::new(Slow {
            name: "vanilla",
            offset: 0.0,
            delay,
        }),
        Box::new(Slow {
            name: "tint",
            offset: -0.02,
            delay,
        }),
    ];
    let mut finished = Vec::new();
    let mut report = run_lm_eval(
        &blocks(),
        &config(),
        &mut methods,
        serde_json::json!({}),
        previous,
        &mut |p| {
            if let Some(cell) = p.cell {
                finished.push(cell);
                LmReport {
                    settings: serde_json::json!({ "partial": true }),
                    results: merge(finished.clone(), previous),
                    paired: Vec::new(),
                    tuning: Vec::new(),
                }
                .write_json(out)
                .unwrap();
            }
        },
    )
    .unwrap();
    report.results = merge(report.results, previous);
    report.write_json(out).unwrap();
    report
}

/// The child side of [`a_killed_run_resumes_to_the_uninterrupted_numbers`]: runs slowly until it
/// is killed.
#[test]
#[ignore = "run as a child process by a_killed_run_resumes_to_the_uninterrupted_numbers"]
fn child_run_until_killed() {
    let Ok(out) = std::env::var("TINT_KILL_TEST_OUT") else {
        return;
    };
    run_writing(Path::new(&out), Duration::from_millis(150), &[]);
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tint-resume-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_killed_run_resumes_to_the_uninterrupted_numbers() {
    let dir = scratch("kill");
    let out = dir.join("lm.json");
    // The child's name in the harness: its module path without the crate (the test target),
    // `resume_and_tuning::child_run_until_killed` in the crate's one test binary.
    let module = module_path!()
        .split_once("::")
        .map_or("", |(_, module)| module);
    let name = format!("{module}::child_run_until_killed");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name.trim_start_matches("::"),
            "--ignored",
            "--test-threads=1",
        ])
        .env("TINT_KILL_TEST_OUT", &out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // 6 cells of 6 blocks at 150 ms: kill once two cells are on disk, long before the end.
    let start = Instant::now();
    let stored = loop {
        if let Ok(text) = std::fs::read_to_string(&out) {
            let report: LmReport = serde_json::from_str(&text)
                .expect("a report on disk always parses (atomic writes)");
            if report.results.len() >= 2 {
                break report;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the child wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let on_disk: LmReport = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(on_disk.results.len() >= stored.results.len());
    assert!(on_disk.results.len() < 6, "killed before the end");
    for cell in &on_disk.results {
        validate_cell(cell, 6, 10).unwrap();
    }
    let resumed = run_writing(&out, Duration::ZERO, &on_disk.results);
    let full = run_writing(&dir.join("full.json"), Duration::ZERO, &[]);
    assert_eq!(resumed.results.len(), 6);
    for cell in &full.results {
        let r = resumed
            .results
            .iter()
            .find(|c| c.method == cell.method && c.train_fraction == cell.train_fraction)
            .unwrap();
        // serde_json's float parsing may move the last bit (no `float_roundtrip` feature).
        let close = |a: f64, b: f64| (a - b).abs() <= JSON_TOL * b.abs();
        for (x, y) in r.blocks.iter().zip(&cell.blocks) {
            assert!(
                x.count == y.count && close(x.sum_nll, y.sum_nll),
                "{x:?} {y:?}"
            );
        }
        assert!(close(r.perplexity.value, cell.perplexity.value));
    }
    // The stored cells were reused, not recomputed (their run time is the slow child's).
    let reused = on_disk.results[0].clone();
    let again = resumed
        .results
        .iter()
        .find(|c| c.method == reused.method && c.train_fraction == reused.train_fraction)
        .unwrap();
    assert_eq!(again.seconds, reused.seconds);
    assert!(reused.seconds >= 0.5, "6 blocks at 150 ms");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn tampered_cells_are_recomputed_and_other_methods_kept() {
    let dir = scratch("tamper");
    let out = dir.join("lm.json");
    let full = run_writing(&out, Duration::ZERO, &[]);
    let mut stored = full.results.clone();
    stored[0].perplexity.value = -5.0;
    stored[0].seconds = 999.0;
    stored[1].seconds = 777.0;
    // A cell of a method this run does not have.
    let mut other = full.results[2].clone();
    other.method = "dyn-eval".into();
    stored.push(other);
    let resumed = run_writing(&out, Duration::ZERO, &stored);
    let first = &resumed.results[0];
    assert!(
        first.perplexity.value > 1.0,
        "the −5 perplexity was recomputed"
    );
    assert_ne!(first.seconds, 999.0);
    assert_eq!(resumed.results[1].seconds, 777.0, "a valid cell is reused");
    assert!(
        resumed.results.iter().any(|c| c.method == "dyn-eval"),
        "cells of methods not run are kept"
    );
    assert_eq!(resumed.results.len(), 7);
    std::fs::remove_dir_all(&dir).ok();
}

fn examples(n: usize, offset: usize) -> Vec<Example> {
    (0..n)
        .map(|i| Example {
            text: format!("text {}", i + offset),
            label: (i + offset) % 2,
        })
        .collect()
}

#[test]
fn the_dev_set_never_shares_an_example_with_the_test_set() {
    let mut train = examples(40, 0);
    let test = examples(10, 100);
    // A duplicate of a test text in the pool (files hold duplicates).
    train[3].text = test[0].text.clone();
    let data = TaskData {
        task: TaskKind::Mr,
        train,
        test,
    };
    for seed in 0..20 {
        let (eval, dev) = data.carve_dev(12, seed).unwrap();
        assert_eq!(eval.test, data.test, "the evaluated examples are untouched");
        for d in &dev.test {
            assert!(
                !eval.test.iter().any(|t| t.text == d.text),
                "dev example {d:?} is evaluated"
            );
            assert!(
                !eval.train.contains(d),
                "a dev example stays in the demonstration pool"
            );
        }
        assert_eq!(eval.train, dev.train);
        assert!(dev.test.len() >= 11 && eval.train.len() == 28);
        eval.check_dev_disjoint(&dev).unwrap();
    }
    let (eval, mut dev) = data.carve_dev(12, 0).unwrap();
    dev.test.push(eval.test[2].clone());
    let err = eval.check_dev_disjoint(&dev).unwrap_err().to_string();
    assert!(err.contains("shared with the evaluation set"), "{err}");
    assert!(data.carve_dev(40, 0).is_err() && data.carve_dev(0, 0).is_err());
}

fn micro_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/official-tint/micro-gpt2-random")
}

#[test]
fn the_paper_calibration_prior_is_the_same_for_every_row_and_paired_counts_add_up() {
    let device = Default::default();
    let model: AuxModel<AB> = load_model(&micro_dir(), &device).unwrap();
    let inference: AuxModel<B> = model.valid();
    let tokenizer = AuxTokenizer::from_dir(&micro_dir()).unwrap();
    let template = Template::for_task(TaskKind::Mr);
    let encoder = PromptEncoder::new(&tokenizer, &template, 16, inference.max_positions()).unwrap();
    let data = TaskData {
        task: TaskKind::Mr,
        train: examples(12, 0),
        test: examples(6, 50),
    };
    let prior = calibration_prior(&mut PlainIcl::new(&inference), &encoder, false).unwrap();
    let settings = IclSettings {
        k: 2,
        seeds: vec![0, 1],
        prior: Some(prior.clone()),
        ..Default::default()
    };
    let mut report = IclReport::new("micro", "flex");
    let icl = run_icl_cell(
        &mut PlainIcl::new(&inference),
        &encoder,
        &data,
        &settings,
        &mut |_| {},
    )
    .unwrap();
    let config = DynEvalConfig {
        lr: 1e-1,
        ..Default::default()
    };
    let dyn_eval = run_icl_cell(
        &mut DynEvalIcl::new(&model, config.clone()),
        &encoder,
        &data,
        &settings,
        &mut |_| {},
    )
    .unwrap();
    for cell in [&icl, &dyn_eval] {
        assert_eq!(cell.settings.calibration, "prompt");
        for p in cell.runs.iter().flat_map(|r| &r.predictions) {
            assert_eq!(p.prior, prior, "one prior for every row, seed and query");
        }
        cell.validate().unwrap();
    }
    // The demonstration-conditioned option gives the in-context row another prior.
    let demos = run_icl_cell(
        &mut PlainIcl::new(&inference),
        &encoder,
        &data,
        &IclSettings {
            prior: None,
            ..settings.clone()
        },
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(demos.settings.calibration, "demos");
    assert_ne!(demos.runs[0].predictions[0].prior, prior);

    report.upsert(icl.clone());
    report.upsert(dyn_eval.clone());
    report.compute_paired(&Default::default());
    let d = report
        .paired
        .iter()
        .find(|p| !p.calibrated && p.diff.baseline == "icl")
        .expect("dyn-eval vs icl");
    assert_eq!(d.diff.n, 2 * 6, "units are (seed, example) pairs");
    assert_eq!(d.diff.wins + d.diff.ties + d.diff.losses, d.diff.n);
    let expected = dyn_eval.accuracy_mean - icl.accuracy_mean;
    assert!((d.diff.mean - expected).abs() < 1e-12, "{d:?}");
    assert!(report.markdown().contains("Paired difference from icl"));

    // A stored cell whose accuracy disagrees with its predictions fails validation.
    let mut tampered = icl;
    tampered.runs[0].accuracy = 1.5;
    assert!(tampered.validate().is_err());
}
