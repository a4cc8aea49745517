//! In-context classification end to end on the committed micro GPT-2 (random weights: these tests
//! check the pipeline — shapes, bookkeeping, reports, that training changes the scores — not accuracy).

use std::path::{Path, PathBuf};

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::{load_model, AuxModel, AuxTokenizer, DynEvalConfig};
use tint_eval::icl::{
    accuracy_bars_svg, candidate_log_probs, run_icl_cell, DemoFormat, DynEvalIcl, Example,
    IclMethod, IclReport, IclSettings, PlainIcl, PromptEncoder, ScoreRequest, TaskData, TaskKind,
    Template, TintIcl, TrainLoss, TrainingSequences,
};
use tint_eval::methods::Tint;
use tint_sim::{TintConfig, TintSizes};

type B = Flex;
type AB = Autodiff<Flex>;

/// Batched, padded scoring vs one unpadded forward per candidate in f32: the same logits up to
/// float32 reassociation in the batched matmuls, over sums of a few log-probabilities of size ~8.
const SCORE_TOL: f64 = 1e-4;

fn micro_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/official-tint/micro-gpt2-random")
}

fn data() -> TaskData {
    let ex = |text: &str, label| Example {
        text: text.into(),
        label,
    };
    TaskData {
        task: TaskKind::Mr,
        train: vec![
            ex("a joy", 1),
            ex("so dull", 0),
            ex("great fun", 1),
            ex("a mess", 0),
            ex("moving", 1),
            ex("boring", 0),
        ],
        test: vec![ex("lovely film", 1), ex("awful plot", 0), ex("fine", 1)],
    }
}

#[test]
fn batched_candidate_scores_match_single_forwards() {
    let device = Default::default();
    let model: AuxModel<B> = load_model(&micro_dir(), &device).unwrap();
    let context = [5u32, 17, 300, 42];
    // Single-token candidates take the one-sequence path, mixed lengths the padded batch.
    let single = vec![vec![7u32], vec![99], vec![2048]];
    check_against_single_forwards(&model, &context, &single, &device);
    let candidates = vec![vec![7u32], vec![99, 100, 101], vec![2048, 3]];
    check_against_single_forwards(&model, &context, &candidates, &device);
    assert!(candidate_log_probs(&model, &[], &candidates).is_err());
    assert!(candidate_log_probs(&model, &context, &[vec![]]).is_err());
}

fn check_against_single_forwards(
    model: &AuxModel<B>,
    context: &[u32],
    candidates: &[Vec<u32>],
    device: &burn::tensor::Device<B>,
) {
    let batched = candidate_log_probs(model, context, candidates).unwrap();
    for (cand, &score) in candidates.iter().zip(&batched) {
        let ids: Vec<i64> = context.iter().chain(cand).map(|&t| t as i64).collect();
        let len = ids.len();
        let tensor = Tensor::<B, 2, Int>::from_data(TensorData::new(ids.clone(), [1, len]), device);
        let log_probs = log_softmax(model.forward(tensor).unwrap(), 2)
            .into_data()
            .convert::<f64>()
            .to_vec::<f64>()
            .unwrap();
        let vocab = model.vocab_size();
        let expected: f64 = (0..cand.len())
            .map(|j| {
                let pos = context.len() + j - 1;
                log_probs[pos * vocab + ids[pos + 1] as usize]
            })
            .sum();
        assert!(
            (score - expected).abs() < SCORE_TOL,
            "{score} vs {expected}"
        );
        assert!(score < 0.0);
    }
}

#[test]
fn plain_icl_zero_and_few_shot_with_reports() {
    let device = Default::default();
    let model: AuxModel<B> = load_model(&micro_dir(), &device).unwrap();
    let tokenizer = AuxTokenizer::from_dir(&micro_dir()).unwrap();
    let template = Template::for_task(TaskKind::Mr);
    let encoder = PromptEncoder::new(&tokenizer, &template, 16, model.max_positions()).unwrap();
    let data = data();
    let mut method = PlainIcl::new(&model);
    let mut report = IclReport::new("micro-gpt2-random", "flex");
    let mut calls = 0;
    for k in [0, 2] {
        let settings = IclSettings {
            k,
            seeds: vec![0, 1],
            ..Default::default()
        };
        let cell = run_icl_cell(&mut method, &encoder, &data, &settings, &mut |p| {
            calls += 1;
            assert!(p.done <= p.total);
        })
        .unwrap();
        let expected_runs = if k == 0 { 1 } else { 2 };
        assert_eq!(cell.runs.len(), expected_runs);
        assert!(cell.settings.demos_in_context);
        assert_eq!(cell.key.format, None);
        for run in &cell.runs {
            assert_eq!(run.predictions.len(), 3);
            assert_eq!(run.demos_used, k);
            for p in &run.predictions {
                assert_eq!(p.scores.len(), 2);
                assert!(p.predicted < 2 && p.predicted_calibrated < 2);
            }
            let correct = run
                .predictions
                .iter()
                .filter(|p| p.predicted == p.label)
                .count();
            assert_eq!(run.accuracy, correct as f64 / 3.0);
        }
        report.upsert(cell);
    }
    assert_eq!(calls, 3 + 6);
    // Different demonstrations give different scores.
    let few = &report.cells[1];
    assert_ne!(
        few.runs[0].predictions[0].scores,
        few.runs[1].predictions[0].scores
    );
    assert_ne!(
        report.cells[0].runs[0].predictions[0].scores,
        few.runs[0].predictions[0].scores
    );

    let markdown = report.markdown();
    assert!(
        markdown.contains("| Method | Shots | MR | Avg. |"),
        "{markdown}"
    );
    assert!(markdown.contains("*With Calibration*"));
    assert_eq!(markdown.matches("| icl | 2 |").count(), 2);
    let svg = accuracy_bars_svg(&report, true).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("MR") && svg.trim_end().ends_with("</svg>"));
    // One bar per cell (plus the legend swatches), each row named in the legend.
    assert!(
        svg.matches("<rect").count() >= 2 * report.cells.len(),
        "{svg}"
    );
    assert!(svg.contains("icl (k=2)"), "{svg}");
    let empty = IclReport::new("none", "flex");
    assert!(accuracy_bars_svg(&empty, false).is_err());

    let path = std::env::temp_dir().join(format!("tint-icl-report-{}.json", std::process::id()));
    report.write_json(&path).unwrap();
    let back = IclReport::read_json(&path).unwrap();
    assert_eq!(back, report);
    assert!(back.cell(&report.cells[1].key).is_some());
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn dynamic_evaluation_trains_on_demonstrations() {
    let device = Default::default();
    let model: AuxModel<AB> = load_model(&micro_dir(), &device).unwrap();
    let tokenizer = AuxTokenizer::from_dir(&micro_dir()).unwrap();
    let template = Template::for_task(TaskKind::Mr);
    let encoder = PromptEncoder::new(&tokenizer, &template, 16, model.max_positions()).unwrap();
    let data = data();
    let settings = IclSettings {
        k: 4,
        seeds: vec![3],
        format: DemoFormat::Single,
        loss: TrainLoss::LabelOnly,
        balanced: true,
        ..Default::default()
    };

    // lr = 0 in the Single format (query alone in context) is exactly zero-shot plain scoring.
    let base = model.valid();
    let mut plain = PlainIcl::new(&base);
    let zero_shot = run_icl_cell(
        &mut plain,
        &encoder,
        &data,
        &IclSettings {
            k: 0,
            ..settings.clone()
        },
        &mut |_| {},
    )
    .unwrap();
    let mut frozen = DynEvalIcl::new(
        &model,
        DynEvalConfig {
            lr: 0.0,
            ..Default::default()
        },
    );
    let cell = run_icl_cell(&mut frozen, &encoder, &data, &settings, &mut |_| {}).unwrap();
    assert!(!cell.settings.demos_in_context);
    assert_eq!(cell.key.format, Some(DemoFormat::Single));
    assert_eq!(cell.runs[0].train_losses.len(), 1);
    for (a, b) in cell.runs[0]
        .predictions
        .iter()
        .zip(&zero_shot.runs[0].predictions)
    {
        assert_eq!(a.scores, b.scores);
        assert_eq!(a.prior, b.prior);
    }

    // A real step changes the scores, in both formats and with both losses.
    for (format, loss) in [
        (DemoFormat::Single, TrainLoss::LabelOnly),
        (DemoFormat::Multi, TrainLoss::FullContext),
    ] {
        let mut dyn_eval = DynEvalIcl::new(
            &model,
            DynEvalConfig {
                lr: 1e-2,
                ..Default::default()
            },
        );
        let cell = run_icl_cell(
            &mut dyn_eval,
            &encoder,
            &data,
            &IclSettings {
                format,
                loss,
                ..settings.clone()
            },
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(cell.runs[0].predictions.len(), 3);
        // Multi keeps the demonstrations that fit before each query in 64 positions.
        let used = cell.runs[0].demos_used;
        assert!(if format == DemoFormat::Single {
            used == 4
        } else {
            (1..=4).contains(&used)
        });
        assert_eq!(cell.settings.demos_in_context, format == DemoFormat::Multi);
        assert_ne!(
            cell.runs[0].predictions[0].prior,
            zero_shot.runs[0].predictions[0].prior
        );
    }

    // Zero-shot dynamic evaluation trains on each query's own context.
    let mut dyn_eval = DynEvalIcl::new(
        &model,
        DynEvalConfig {
            lr: 1e-2,
            ..Default::default()
        },
    );
    let cell = run_icl_cell(
        &mut dyn_eval,
        &encoder,
        &data,
        &IclSettings {
            k: 0,
            ..settings.clone()
        },
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(cell.key.format, None);
    let priors: Vec<_> = cell.runs[0]
        .predictions
        .iter()
        .map(|p| p.prior.clone())
        .collect();
    assert_ne!(
        priors[0], priors[1],
        "the prior is recomputed after each query's adaptation"
    );
    assert!(dyn_eval.train_losses().len() == 1);

    // Bad settings are typed errors.
    let mut dyn_eval = DynEvalIcl::new(
        &model,
        DynEvalConfig {
            lr: -1.0,
            ..Default::default()
        },
    );
    assert!(run_icl_cell(&mut dyn_eval, &encoder, &data, &settings, &mut |_| {}).is_err());
    let too_many = IclSettings {
        k: 7,
        balanced: false,
        ..settings.clone()
    };
    assert!(run_icl_cell(&mut plain, &encoder, &data, &too_many, &mut |_| {}).is_err());
    let no_seed = IclSettings {
        seeds: vec![],
        ..settings.clone()
    };
    assert!(run_icl_cell(&mut plain, &encoder, &data, &no_seed, &mut |_| {}).is_err());
}

/// TinT's functional reference at eta = 0 vs the plain forward, f32: the same function computed
/// through the simulated (prefix-augmented) path; sums of a few log-probabilities agree to ~1e-4.
const TINT_ETA0_TOL: f64 = 1e-3;

#[test]
fn tint_plugs_in_as_a_method() {
    let device: burn::tensor::Device<B> = Default::default();
    let model: AuxModel<B> = load_model(&micro_dir(), &device).unwrap();
    let tokenizer = AuxTokenizer::from_dir(&micro_dir()).unwrap();
    let template = Template::for_task(TaskKind::Mr);
    let encoder = PromptEncoder::new(&tokenizer, &template, 8, model.max_positions()).unwrap();
    let mut data = data();
    data.test.truncate(2);
    let settings = IclSettings {
        k: 2,
        seeds: vec![0],
        format: DemoFormat::Multi,
        loss: TrainLoss::LabelOnly,
        ..Default::default()
    };
    let mut plain = PlainIcl::new(&model);
    let reference = run_icl_cell(&mut plain, &encoder, &data, &settings, &mut |_| {}).unwrap();

    let mut config = TintConfig::sized_for(32, 4, TintSizes::default());
    config.step.inner_lr = 0.0;
    let tint = Tint::reference(&model, config.clone()).unwrap();
    let mut frozen = TintIcl::new(tint, "tint-ref(eta=0)", &device);
    let cell = run_icl_cell(&mut frozen, &encoder, &data, &settings, &mut |_| {}).unwrap();
    assert!(cell.settings.demos_in_context);
    assert_eq!(cell.key.format, Some(DemoFormat::Multi));
    for (a, b) in cell.runs[0]
        .predictions
        .iter()
        .zip(&reference.runs[0].predictions)
    {
        for (x, y) in a
            .scores
            .iter()
            .zip(&b.scores)
            .chain(a.prior.iter().zip(&b.prior))
        {
            assert!((x - y).abs() < TINT_ETA0_TOL, "{x} vs {y}");
        }
    }

    config.step.inner_lr = 1e-1;
    let tint = Tint::reference(&model, config).unwrap();
    let mut trained = TintIcl::new(tint, "tint-ref", &device);
    let cell = run_icl_cell(&mut trained, &encoder, &data, &settings, &mut |_| {}).unwrap();
    let moved = cell.runs[0]
        .predictions
        .iter()
        .zip(&reference.runs[0].predictions)
        .flat_map(|(a, b)| a.scores.iter().zip(&b.scores).map(|(x, y)| (x - y).abs()))
        .fold(0.0f64, f64::max);
    assert!(
        moved > TINT_ETA0_TOL,
        "the simulated step must change the scores ({moved})"
    );
    assert!(trained.supports(DemoFormat::Multi) && !trained.supports(DemoFormat::Single));
    let single = IclSettings {
        format: DemoFormat::Single,
        ..settings
    };
    assert!(run_icl_cell(&mut trained, &encoder, &data, &single, &mut |_| {}).is_err());
}

/// TinT scores single-token label words from one sequence (the context alone) instead of one
/// sequence per candidate: the scores must equal the batched path's, which a two-token candidate
/// forces, for both the simulator and its reference, with a real (non-zero) step.
#[test]
fn tint_single_token_scores_equal_the_batched_path() {
    let device: burn::tensor::Device<B> = Default::default();
    let model: AuxModel<B> = load_model(&micro_dir(), &device).unwrap();
    let mut config = TintConfig::sized_for(32, 4, TintSizes::default());
    config.step.inner_lr = 1e-1;
    let context: Vec<u32> = vec![5, 17, 23, 99, 4, 61, 8, 250];
    let targets = vec![false, true, true, true, false, false, false, false];
    let single: Vec<Vec<u32>> = vec![vec![42], vec![7]];
    let mixed: Vec<Vec<u32>> = vec![vec![42], vec![7], vec![300, 11]];
    for simulator in [false, true] {
        let tint = if simulator {
            Tint::simulator(&model, config.clone()).unwrap()
        } else {
            Tint::reference(&model, config.clone()).unwrap()
        };
        let mut method = TintIcl::new(tint, "tint", &device);
        let mut score = |candidates: &[Vec<u32>]| {
            method
                .score(&ScoreRequest {
                    context: &context,
                    demo_len: 4,
                    demo_targets: &targets,
                    candidates,
                })
                .unwrap()
        };
        let fast = score(&single);
        let batched = score(&mixed);
        for (a, b) in fast.iter().zip(&batched) {
            // Same logits up to f32 reassociation with another batch shape (as SCORE_TOL).
            assert!(
                (a - b).abs() < SCORE_TOL,
                "simulator {simulator}: {a} vs {b}"
            );
        }
        assert!(fast.iter().all(|s| s.is_finite() && *s < 0.0));
    }
}

/// Prefix reuse on a LLaMA model against scoring every context whole, in f32: the same logits up
/// to the summation order of the products over fewer rows; log-probabilities of size ~8.
const REUSE_TOL: f64 = 1e-4;

/// Plain ICL and dynamic evaluation score contexts that share their demonstrations through a
/// prefix cache (LLaMA); the scores equal whole-context scoring, also after a new adaptation
/// (which must not reuse the keys and values of the model before it).
#[test]
fn scoring_with_a_reused_prefix_equals_scoring_whole_contexts() {
    let device = Default::default();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/llama/tiny");
    let model: AuxModel<AB> = load_model(&dir, &device).unwrap();
    let inference = model.valid();
    let vocab = inference.vocab_size() as u32;
    let demos: Vec<u32> = (0..20).map(|i| (i * 13 + 5) % vocab).collect();
    let contexts: Vec<Vec<u32>> = (0..4u32)
        .map(|q| {
            let mut c = demos.clone();
            c.extend((0..3 + q).map(|i| (q * 29 + i * 7 + 1) % vocab));
            c
        })
        .collect();
    let candidates = vec![vec![3u32], vec![11u32]];
    let close = |a: &[f64], b: &[f64], what: &str| {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < REUSE_TOL, "{what}: {x} vs {y}");
        }
    };

    let mut plain = PlainIcl::new(&inference);
    for (i, context) in contexts.iter().enumerate() {
        let got = plain
            .score(&ScoreRequest::plain(context, &candidates))
            .unwrap();
        let want = candidate_log_probs(&inference, context, &candidates).unwrap();
        close(&got, &want, &format!("plain, context {i}"));
    }

    let config = DynEvalConfig {
        lr: 1e-1,
        ..Default::default()
    };
    let train = |seed: u32| TrainingSequences {
        ids: vec![(0..12).map(|i| (seed * 31 + i * 17 + 2) % vocab).collect()],
        targets: vec![(0..12).map(|i| i > 0).collect()],
        format: None,
    };
    let mut reusing = DynEvalIcl::new(&model, config.clone());
    for seed in [1, 2] {
        reusing.adapt(&train(seed)).unwrap();
        for (i, context) in contexts.iter().enumerate() {
            let got = reusing
                .score(&ScoreRequest::plain(context, &candidates))
                .unwrap();
            // A fresh method adapted the same way scores this context whole.
            let mut fresh = DynEvalIcl::new(&model, config.clone());
            fresh.adapt(&train(seed)).unwrap();
            let want = fresh
                .score(&ScoreRequest::plain(context, &candidates))
                .unwrap();
            close(&got, &want, &format!("dyn-eval, train {seed}, context {i}"));
        }
    }
}

/// A per-seed row runs each seed with its own method: every seed's run equals the run of that
/// seed's learning rate alone, and the rates differ enough to change the scores.
#[test]
fn per_seed_steps_run_each_seed_with_its_own_rate() {
    use tint_eval::icl::PerSeedStep;
    let device = Default::default();
    let model: AuxModel<AB> = load_model(&micro_dir(), &device).unwrap();
    let tokenizer = AuxTokenizer::from_dir(&micro_dir()).unwrap();
    let template = Template::for_task(TaskKind::Mr);
    let encoder = PromptEncoder::new(&tokenizer, &template, 16, model.max_positions()).unwrap();
    let data = data();
    let dyn_eval = |lr: f64| {
        DynEvalIcl::new(
            &model,
            DynEvalConfig {
                lr,
                ..Default::default()
            },
        )
    };
    let rates = [(0u64, 1e-3), (1u64, 3e-1)];
    let methods: Vec<(u64, Box<dyn IclMethod>)> = rates
        .iter()
        .map(|&(seed, lr)| (seed, Box::new(dyn_eval(lr)) as Box<dyn IclMethod>))
        .collect();
    let mut row = PerSeedStep::new("dyn-eval(lr=per-seed,steps=1)", methods).unwrap();
    let settings = IclSettings {
        k: 2,
        seeds: vec![0, 1],
        ..Default::default()
    };
    let cell = run_icl_cell(&mut row, &encoder, &data, &settings, &mut |_| {}).unwrap();
    assert_eq!(cell.key.method, "dyn-eval(lr=per-seed,steps=1)");
    let scores = |run: &tint_eval::icl::SeedRun| -> Vec<f64> {
        run.predictions
            .iter()
            .flat_map(|p| p.scores.clone())
            .collect()
    };
    // One seed's run of `lr` alone.
    let alone = |lr: f64, seed: u64| {
        let settings = IclSettings {
            seeds: vec![seed],
            ..settings.clone()
        };
        let cell = run_icl_cell(&mut dyn_eval(lr), &encoder, &data, &settings, &mut |_| {});
        scores(&cell.unwrap().runs[0])
    };
    for (run, &(seed, lr)) in cell.runs.iter().zip(&rates) {
        assert_eq!(run.seed, seed);
        assert_eq!(scores(run), alone(lr, seed), "seed {seed}");
        let other = rates[1 - seed as usize].1;
        assert_ne!(
            scores(run),
            alone(other, seed),
            "seed {seed}: rates must matter"
        );
    }
}
