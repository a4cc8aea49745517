//! `tint-ref` in in-context classification trains once per demonstration prefix and scores every
//! query with the updated model by plain forwards (`tint_eval::icl::TintIcl`): on the committed
//! micro GPT-2 the scores equal those of the whole step run per query, label-only and
//! full-context loss, single- and multi-token label words, and a changed prefix (other
//! demonstrations, other targets, fewer demonstrations because a long query leaves less room)
//! is trained anew, never served from the update of another prefix.
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::backend::Flex;
use tint_aux::{load_model, AuxModel, AuxTokenizer};
use tint_eval::icl::sampling::sample_demonstrations;
use tint_eval::icl::{
    run_icl_cell, CellResult, DemoFormat, Example, IclMethod, IclSettings, PromptEncoder,
    ScoreRequest, TaskData, TaskKind, Template, TintIcl, TrainLoss,
};
use tint_eval::methods::Tint;
use tint_sim::{TintConfig, TintSizes};

type B = Flex;

/// Train-once vs per-query scores, f32: the same update computed on the demonstrations alone
/// instead of inside `[demos ; query]` (sums over 12 or 18 rows may be ordered differently), then
/// the same forward code; tint-sim/tests/all/updated_model.rs measures ≤ 2e-7 on the micro model's
/// logits. Label-word log-probabilities (sums of ≤ 3 of them, of size ~8) then agree to ~1e-6;
/// the bound leaves room for other backends, far below the step's effect on the scores
/// ([`MIN_EFFECT`]).
const TRAIN_ONCE_TOL: f64 = 1e-4;
/// The step must move the scores by at least this much (measured ≈ 0.5 at this step size), so
/// that equal scores are not those of two unchanged models.
const MIN_EFFECT: f64 = 1e-2;
/// The micro model's step size in the other ICL tests (icl_end_to_end.rs).
const INNER_LR: f64 = 1e-1;

/// A key of another method's step reuse (what it was computed from does not matter here).
fn other_key() -> tint_eval::step_reuse::StepKey {
    tint_eval::step_reuse::StepKey {
        settings: "another method".into(),
        ids: vec![vec![1, 2]],
        targets: vec![vec![false, true]],
    }
}

fn micro_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/official-tint/micro-gpt2-random")
}

fn example(text: &str, label: usize) -> Example {
    Example {
        text: text.into(),
        label,
    }
}

/// Short demonstrations, and queries of which the last is long enough to leave room for fewer
/// demonstrations than the others (the micro model has 64 positions).
fn data() -> TaskData {
    TaskData {
        task: TaskKind::Mr,
        train: vec![
            example("a joy", 1),
            example("so dull", 0),
            example("great fun", 1),
            example("a mess", 0),
            example("moving", 1),
            example("boring", 0),
        ],
        test: vec![
            example("lovely film", 1),
            example("awful plot", 0),
            example("fine", 1),
            example(
                "a long and winding review that goes on and on about the plot and the actors",
                0,
            ),
        ],
    }
}

fn tint(model: &AuxModel<B>) -> Tint<B> {
    let mut config = TintConfig::sized_for(32, 4, TintSizes::default());
    config.step.inner_lr = INNER_LR;
    Tint::reference(model, config).unwrap()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Every score and prior of two cells.
fn all_scores(cell: &CellResult) -> Vec<f64> {
    cell.runs
        .iter()
        .flat_map(|r| &r.predictions)
        .flat_map(|p| p.scores.iter().chain(&p.prior).copied())
        .collect()
}

/// How often the demonstration prefix (tokens and targets) changes from one scored context to
/// the next in a cell, each seed starting anew: per seed the calibration prompt, then every
/// query, with the seed's demonstrations (as `run_icl_cell` draws them).
fn prefix_changes(encoder: &PromptEncoder<'_>, data: &TaskData, settings: &IclSettings) -> usize {
    let mut changes = 0;
    for &seed in &settings.seeds {
        let demos: Vec<_> = sample_demonstrations(&data.train, settings.k, 2, false, seed)
            .unwrap()
            .iter()
            .map(|d| encoder.demo(d).unwrap())
            .collect();
        let mut last = None;
        let queries = data
            .test
            .iter()
            .map(|q| encoder.query_ids(&q.text).unwrap());
        for query in std::iter::once(encoder.calibration_ids().to_vec()).chain(queries) {
            let context = encoder.in_context(&demos, &query, settings.loss);
            let prefix = (
                context.ids[..context.demo_len].to_vec(),
                context.demo_targets,
            );
            if last.as_ref() != Some(&prefix) {
                changes += 1;
                last = Some(prefix);
            }
        }
    }
    changes
}

#[test]
fn train_once_scores_equal_per_query_scores_in_a_cell() {
    let device = Default::default();
    let model: AuxModel<B> = load_model(&micro_dir(), &device).unwrap();
    let tokenizer = AuxTokenizer::from_dir(&micro_dir()).unwrap();
    let template = Template::for_task(TaskKind::Mr);
    let encoder = PromptEncoder::new(&tokenizer, &template, 16, model.max_positions()).unwrap();
    let data = data();
    for loss in [TrainLoss::LabelOnly, TrainLoss::FullContext] {
        let settings = IclSettings {
            k: 4,
            seeds: vec![0, 1],
            format: DemoFormat::Multi,
            loss,
            ..Default::default()
        };
        // The long query keeps fewer demonstrations: its prefix differs from the others'.
        let demos: Vec<_> = data.train[..4]
            .iter()
            .map(|d| encoder.demo(d).unwrap())
            .collect();
        let kept: Vec<usize> = data
            .test
            .iter()
            .map(|q| {
                let query = encoder.query_ids(&q.text).unwrap();
                encoder.in_context(&demos, &query, loss).kept
            })
            .collect();
        eprintln!("{loss:?}: demonstrations kept per query {kept:?}");
        assert!(kept[..3].iter().all(|&k| k == kept[0]) && kept[3] < kept[0]);

        let mut per_query = TintIcl::new(tint(&model), "tint-ref", &device).per_query();
        let start = Instant::now();
        let slow = run_icl_cell(&mut per_query, &encoder, &data, &settings, &mut |_| {}).unwrap();
        let per_query_s = start.elapsed().as_secs_f64();
        assert_eq!(per_query.updates_trained(), 0);

        let mut once = TintIcl::new(tint(&model), "tint-ref", &device);
        let start = Instant::now();
        let fast = run_icl_cell(&mut once, &encoder, &data, &settings, &mut |_| {}).unwrap();
        let once_s = start.elapsed().as_secs_f64();
        // One update per run of equal prefixes in the order the runner scores (the calibration
        // prompt, then the queries), not one per context.
        let expected = prefix_changes(&encoder, &data, &settings);
        eprintln!(
            "{loss:?}: {expected} updates for {} contexts",
            5 * settings.seeds.len()
        );
        assert!(expected < 5 * settings.seeds.len());
        assert_eq!(once.updates_trained(), expected, "{loss:?}");

        let diff = max_diff(&all_scores(&fast), &all_scores(&slow));
        let mut frozen = TintIcl::new(
            Tint::reference(&model, TintConfig::sized_for(32, 4, TintSizes::default())).unwrap(),
            "tint-ref(eta=0)",
            &device,
        );
        let unchanged = run_icl_cell(&mut frozen, &encoder, &data, &settings, &mut |_| {}).unwrap();
        let effect = max_diff(&all_scores(&fast), &all_scores(&unchanged));
        eprintln!(
            "{loss:?}: train once vs per query {diff:e} (effect of the step {effect:e}); \
             {once_s:.3} s vs {per_query_s:.3} s per query ({:.2}x)",
            per_query_s / once_s
        );
        assert!(diff <= TRAIN_ONCE_TOL, "{loss:?}: scores differ by {diff}");
        assert!(effect >= MIN_EFFECT, "{loss:?}: step too small ({effect})");
        for (a, b) in fast.runs.iter().zip(&slow.runs) {
            assert_eq!(a.demos_used, b.demos_used);
            for (p, q) in a.predictions.iter().zip(&b.predictions) {
                assert_eq!(p.predicted, q.predicted);
                assert_eq!(p.predicted_calibrated, q.predicted_calibrated);
            }
        }
    }
}

#[test]
fn a_changed_prefix_is_trained_anew() {
    let device = Default::default();
    let model: AuxModel<B> = load_model(&micro_dir(), &device).unwrap();
    let demos_a: Vec<u32> = vec![5, 17, 23, 99, 4, 61, 8, 250, 31, 77];
    let demos_b: Vec<u32> = vec![5, 17, 23, 98, 4, 61, 8, 250, 31, 77];
    let label_only = vec![
        false, false, false, true, false, false, false, true, false, false,
    ];
    let full: Vec<bool> = (0..demos_a.len()).map(|t| t > 0).collect();
    let single: Vec<Vec<u32>> = vec![vec![42], vec![7]];
    let mixed: Vec<Vec<u32>> = vec![vec![42], vec![7], vec![300, 11]];
    let queries: [&[u32]; 3] = [&[12, 13, 14], &[400, 401], &[9, 8, 7, 6, 5]];
    let mut once = TintIcl::new(tint(&model), "tint-ref", &device);
    let mut per_query = TintIcl::new(tint(&model), "tint-ref", &device).per_query();
    // (demonstrations, their length in the context, targets, candidates, updates trained after)
    #[allow(clippy::type_complexity)]
    let steps: [(&[u32], usize, &[bool], &[Vec<u32>], usize); 7] = [
        (&demos_a, 10, &label_only, &single, 1),
        // Same prefix and targets, other candidates: the same update.
        (&demos_a, 10, &label_only, &mixed, 1),
        // One token of the demonstrations changed.
        (&demos_b, 10, &label_only, &single, 2),
        // Same tokens, other targets (full-context loss).
        (&demos_b, 10, &full, &single, 3),
        // Fewer demonstration tokens (a long query leaves less room).
        (&demos_b, 6, &full[..6], &single, 4),
        // Back to the first prefix: trained again (only the last update is kept).
        (&demos_a, 10, &label_only, &single, 5),
        (&demos_a, 10, &label_only, &mixed, 5),
    ];
    for (i, &(demos, demo_len, targets, candidates, updates)) in steps.iter().enumerate() {
        for query in queries {
            let context = [&demos[..demo_len], query].concat();
            let request = ScoreRequest {
                context: &context,
                demo_len,
                demo_targets: targets,
                candidates,
            };
            let fast = once.score(&request).unwrap();
            let slow = per_query.score(&request).unwrap();
            let diff = max_diff(&fast, &slow);
            assert!(diff <= TRAIN_ONCE_TOL, "step {i}: {fast:?} vs {slow:?}");
        }
        assert_eq!(once.updates_trained(), updates, "step {i}");
    }
    // A new adaptation (the next seed, the calibration prior) drops the update.
    once.adapt(&Default::default()).unwrap();
    let context = [&demos_a[..], queries[0]].concat();
    let request = ScoreRequest {
        context: &context,
        demo_len: 10,
        demo_targets: &label_only,
        candidates: &single,
    };
    once.score(&request).unwrap();
    assert_eq!(once.updates_trained(), 6);
    // Without demonstrations, with fewer than two demonstration tokens, or from the simulator or
    // an `official_compat` step, the whole step runs per query.
    for demo_len in [0, 1] {
        let request = ScoreRequest {
            context: &context,
            demo_len,
            demo_targets: &label_only[..demo_len],
            candidates: &single,
        };
        once.score(&request).unwrap();
    }
    assert_eq!(once.updates_trained(), 6);
    let mut config = TintConfig::sized_for(32, 4, TintSizes::default());
    assert!(Tint::reference(&model, config.clone())
        .unwrap()
        .trains_once());
    assert!(!Tint::simulator(&model, config.clone())
        .unwrap()
        .trains_once());
    // Neither gives a step direction: refused by name, before the engine runs.
    let no_direction = |tint: Tint<_>| {
        matches!(
            tint.direction(&[]),
            Err(tint_eval::EvalError::InvalidSetting {
                name: "tint engine",
                ..
            })
        )
    };
    assert!(no_direction(
        Tint::simulator(&model, config.clone()).unwrap()
    ));
    config.official_compat = true;
    assert!(!Tint::reference(&model, config.clone())
        .unwrap()
        .trains_once());
    assert!(no_direction(Tint::reference(&model, config).unwrap()));
}

fn tiny_llama_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/llama/tiny")
}

/// On a LLaMA model the updated weights go back into the model's own forward, and single-token
/// label words are scored reusing the keys and values of the demonstrations: the scores equal
/// those of the whole step run per query, and the cache did serve the shared prefix.
#[test]
fn llama_updates_score_with_the_key_value_cache_like_the_whole_step() {
    let device = Default::default();
    let model: AuxModel<B> = load_model(&tiny_llama_dir(), &device).unwrap();
    let mut config = TintConfig::sized_for(64, 4, TintSizes::default());
    config.step.inner_lr = INNER_LR;
    let reference = || Tint::reference(&model, config.clone()).unwrap();
    let mut once = TintIcl::new(reference(), "tint-ref", &device);
    let mut per_query = TintIcl::new(reference(), "tint-ref", &device).per_query();
    let mut unchanged = TintIcl::new(
        {
            let mut zero = config.clone();
            zero.step.inner_lr = 0.0;
            Tint::reference(&model, zero).unwrap()
        },
        "tint-ref",
        &device,
    );
    let demos: Vec<u32> = vec![5, 17, 23, 90, 4, 61, 8, 50, 31, 77];
    let targets: Vec<bool> = (0..demos.len()).map(|t| t == 3 || t == 7).collect();
    let single: Vec<Vec<u32>> = vec![vec![42], vec![7]];
    let mut effect = 0.0f64;
    for query in [&[12u32, 13, 14][..], &[40, 41], &[9, 8, 7, 6, 5]] {
        let context = [&demos[..], query].concat();
        let request = ScoreRequest {
            context: &context,
            demo_len: demos.len(),
            demo_targets: &targets,
            candidates: &single,
        };
        let fast = once.score(&request).unwrap();
        let slow = per_query.score(&request).unwrap();
        let base = unchanged.score(&request).unwrap();
        let diff = max_diff(&fast, &slow);
        assert!(diff <= TRAIN_ONCE_TOL, "{fast:?} vs {slow:?}");
        effect = effect.max(max_diff(&fast, &base));
    }
    assert!(effect >= MIN_EFFECT, "step too small ({effect})");
    assert_eq!(once.updates_trained(), 1);
    // Queries 2 and 3 reuse the 10 demonstration positions.
    assert_eq!(once.positions_reused(), 20);
    assert_eq!(per_query.positions_reused(), 0);
}

/// Tuning a step size: methods built for the values of a grid share one descent direction per
/// demonstration prefix (`StepReuse`). On the tiny LLaMA the shared direction gives every step
/// size the scores of a method that computes its own step (to the bit: the same operations), it
/// is computed once per prefix, and another prefix computes its own. Dynamic evaluation shares
/// its one-step gradient the same way.
#[test]
fn a_grid_of_step_sizes_shares_one_gradient_per_training_set_with_equal_scores() {
    use burn::backend::Autodiff;
    use tint_aux::DynEvalConfig;
    use tint_eval::icl::{DynEvalIcl, StepReuse, TrainingSequences};

    let device = Default::default();
    let model: AuxModel<B> = load_model(&tiny_llama_dir(), &device).unwrap();
    let config = |eta: f64| {
        let mut config = TintConfig::sized_for(64, 4, TintSizes::default());
        config.step.inner_lr = eta;
        config
    };
    let candidates: Vec<Vec<u32>> = vec![vec![42], vec![7]];
    let prefixes: [Vec<u32>; 2] = [
        vec![5, 17, 23, 90, 4, 61, 8, 50, 31, 77],
        vec![6, 18, 23, 90, 4, 61, 8, 50, 31, 70],
    ];
    let targets: Vec<bool> = (0..10).map(|t| t == 3 || t == 7).collect();
    let reuse = StepReuse::default();
    let mut shared_effect = 0.0f64;
    for demos in &prefixes {
        let context = [&demos[..], &[12, 13, 14]].concat();
        let request = ScoreRequest {
            context: &context,
            demo_len: demos.len(),
            demo_targets: &targets,
            candidates: &candidates,
        };
        let mut scores = Vec::new();
        for eta in [INNER_LR, INNER_LR / 10.0, INNER_LR * 3.0] {
            let tint = || Tint::reference(&model, config(eta)).unwrap();
            let mut shared = TintIcl::new(tint(), "tint-ref", &device)
                .with_step_reuse(reuse.clone(), "tiny, all layers");
            let mut own = TintIcl::new(tint(), "tint-ref", &device);
            let (a, b) = (
                shared.score(&request).unwrap(),
                own.score(&request).unwrap(),
            );
            assert_eq!(a, b, "eta {eta}");
            scores.push(a);
        }
        shared_effect = shared_effect.max(max_diff(&scores[1], &scores[2]));
    }
    assert!(
        shared_effect >= MIN_EFFECT,
        "steps too alike ({shared_effect})"
    );
    // One direction per prefix: the other two step sizes of each reused it.
    assert_eq!(reuse.reused(), 4);

    let ad_model: AuxModel<Autodiff<B>> = load_model(&tiny_llama_dir(), &device).unwrap();
    let train = TrainingSequences {
        ids: vec![prefixes[0].clone(), prefixes[1].clone()],
        targets: vec![targets.clone(), targets.clone()],
        format: Some(DemoFormat::Single),
    };
    let context = [&prefixes[0][..], &[12, 13, 14]].concat();
    let request = ScoreRequest::plain(&context, &candidates);
    let gradients = StepReuse::default();
    for lr in [0.5, 0.05] {
        let config = DynEvalConfig {
            lr,
            ..Default::default()
        };
        let mut shared =
            DynEvalIcl::new(&ad_model, config.clone()).with_step_reuse(gradients.clone());
        let mut own = DynEvalIcl::new(&ad_model, config);
        shared.adapt(&train).unwrap();
        own.adapt(&train).unwrap();
        assert_eq!(shared.last_losses, own.last_losses);
        assert_eq!(
            shared.score(&request).unwrap(),
            own.score(&request).unwrap(),
            "lr {lr}"
        );
    }
    assert_eq!(gradients.reused(), 1);
}

/// TinT's Single format on a LLaMA model: the demonstrations, each an input of its own, train
/// the functional reference's weights with their gradients summed, and queries are scored by the
/// updated model without demonstrations in the context: equal to scoring with the weights of
/// `LlamaReference::direction` over the same sequences. Engines without descent directions (the
/// GPT-2 reference, the constructed network) refuse the format by name.
#[test]
fn the_single_format_trains_on_the_summed_loss_of_separate_demonstrations() {
    use tint_eval::icl::{DemoFormat, IclMethod, TrainingSequences};
    use tint_sim::llama::{LlamaReference, LlamaTintConfig};

    let device = Default::default();
    let model: AuxModel<B> = load_model(&tiny_llama_dir(), &device).unwrap();
    let mut config = TintConfig::sized_for(64, 4, TintSizes::default());
    config.step.inner_lr = INNER_LR;
    let mut single = TintIcl::new(
        Tint::reference(&model, config.clone()).unwrap(),
        "tint-ref",
        &device,
    );
    assert!(single.supports(DemoFormat::Single) && single.supports(DemoFormat::Multi));
    let rows: Vec<Vec<u32>> = vec![vec![5, 17, 23, 90, 4], vec![61, 8, 50, 31, 77, 3]];
    let targets: Vec<Vec<bool>> = rows
        .iter()
        .map(|r| (0..r.len()).map(|t| t + 1 == r.len()).collect())
        .collect();
    let train = TrainingSequences {
        ids: rows.clone(),
        targets: targets.clone(),
        format: Some(DemoFormat::Single),
    };
    single.adapt(&train).unwrap();
    assert_eq!(single.updates_trained(), 1);
    let candidates: Vec<Vec<u32>> = vec![vec![42], vec![7]];
    let query: Vec<u32> = vec![12, 13, 14, 15];
    let got = single
        .score(&ScoreRequest::plain(&query, &candidates))
        .unwrap();

    let reference = LlamaReference::new(&model, LlamaTintConfig::from_tint(&config)).unwrap();
    let inputs: Vec<_> = rows
        .iter()
        .zip(&targets)
        .map(|(r, t)| {
            let ids = burn::tensor::Tensor::<B, 2, burn::tensor::Int>::from_data(
                burn::tensor::TensorData::new(
                    r.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                    [1, r.len()],
                ),
                &device,
            );
            let mask = burn::tensor::Tensor::<B, 2, burn::tensor::Bool>::from_data(
                burn::tensor::TensorData::new(t.clone(), [1, r.len()]),
                &device,
            );
            tint_sim::SimInput::with_train_lengths(ids, &[r.len()])
                .unwrap()
                .with_gradient_mask(mask)
        })
        .collect();
    let updated = reference.direction(&inputs).unwrap().updated(INNER_LR);
    let aux = updated.params().to_aux(&model).unwrap();
    let want = tint_eval::icl::candidate_log_probs(&aux, &query, &candidates).unwrap();
    assert!(
        max_diff(&got, &want) <= TRAIN_ONCE_TOL,
        "{got:?} vs {want:?}"
    );
    let base = tint_eval::icl::candidate_log_probs(&model, &query, &candidates).unwrap();
    assert!(
        max_diff(&got, &base) >= MIN_EFFECT,
        "the step changed nothing"
    );

    // The GPT-2 reference has no descent direction: the format is refused by name.
    let micro: AuxModel<B> = load_model(&micro_dir(), &device).unwrap();
    let mut gpt2 = TintIcl::new(tint(&micro), "tint-ref", &device);
    assert!(!gpt2.supports(DemoFormat::Single));
    let err = gpt2.adapt(&train).unwrap_err().to_string();
    assert!(
        err.contains("single") && err.contains("multi format"),
        "{err}"
    );
}

/// Dynamic evaluation refuses a step whose estimated memory (`tint_aux::BackwardMemory`) is over
/// its limit before it computes anything, naming the method, the batch and the flag; under the
/// limit it trains as without one (the same losses and scores).
#[test]
fn a_dyn_eval_step_over_the_memory_limit_is_refused_before_it_runs() {
    use burn::backend::Autodiff;
    use tint_aux::{BackwardMemory, DynEvalConfig, GradientMemory};
    use tint_eval::icl::{DemoFormat, DynEvalIcl, IclMethod, TrainingSequences};

    let device = Default::default();
    let model: AuxModel<Autodiff<B>> = load_model(&tiny_llama_dir(), &device).unwrap();
    let prefix: Vec<u32> = (3..15).collect();
    let targets: Vec<bool> = (0..prefix.len()).map(|t| t >= 9).collect();
    let train = TrainingSequences {
        ids: vec![prefix.clone(), prefix.clone()],
        targets: vec![targets.clone(), targets],
        format: Some(DemoFormat::Single),
    };
    let config = DynEvalConfig {
        lr: 0.05,
        ..Default::default()
    };
    let needed = BackwardMemory::of_model(&model, 2, prefix.len(), GradientMemory::Least).total();
    let mut refused = DynEvalIcl::new(&model, config.clone()).with_memory_limit(needed - 1);
    let message = refused.adapt(&train).unwrap_err().to_string();
    assert!(
        message.contains("dyn-eval's step on 2 training sequence(s) of up to 12 positions")
            && message.contains("--max-memory-gib"),
        "{message}"
    );
    assert!(
        refused.last_losses.is_empty(),
        "it ran: {:?}",
        refused.last_losses
    );

    // The gradients a step reuse keeps (three slots: the grid's other step sizes and the seeds'
    // cells) count beside the step, this step's own among them.
    let with_kept = needed + 3 * tint_aux::selected_param_bytes(&model, &config.params);
    let kept = |limit: u64| {
        DynEvalIcl::new(&model, config.clone())
            .with_step_reuse(tint_eval::step_reuse::StepReuse::with_capacity(3))
            .with_memory_limit(limit)
    };
    let message = kept(with_kept - 1).adapt(&train).unwrap_err().to_string();
    assert!(message.contains("kept gradients"), "{message}");
    kept(with_kept).adapt(&train).unwrap();

    // What another method's reuse holds when the step runs (TinT's directions in `eval icl`)
    // counts beside it: read at the step, so what it keeps after this method was built counts.
    let other: tint_eval::step_reuse::StepReuse<f64> =
        tint_eval::step_reuse::StepReuse::with_capacity(2);
    let beside = |limit: u64| {
        DynEvalIcl::new(&model, config.clone())
            .with_kept_beside(other.held())
            .with_memory_limit(limit)
    };
    let (mut refused, mut admitted) = (beside(needed + 999), beside(needed + 1000));
    other
        .get_or_compute_sized::<()>(other_key(), 1000, || Ok(std::rc::Rc::new(1.0)))
        .unwrap();
    let message = refused.adapt(&train).unwrap_err().to_string();
    assert!(message.contains("another method's kept steps"), "{message}");
    admitted.adapt(&train).unwrap();

    let mut admitted = DynEvalIcl::new(&model, config.clone()).with_memory_limit(needed);
    let mut unlimited = DynEvalIcl::new(&model, config);
    admitted.adapt(&train).unwrap();
    unlimited.adapt(&train).unwrap();
    assert_eq!(admitted.last_losses, unlimited.last_losses);
    let candidates: Vec<Vec<u32>> = vec![vec![20], vec![21]];
    let request = ScoreRequest::plain(&prefix, &candidates);
    assert_eq!(
        admitted.score(&request).unwrap(),
        unlimited.score(&request).unwrap()
    );
}

/// TinT's functional reference refuses a step whose estimated memory
/// (`tint_sim::llama::ReferenceStepMemory`) is over its limit before it computes anything, in
/// the Multi format (the step on the demonstrations of a scored context) and in the Single format
/// (one step on several sequences), naming the method, the sequences and the flag; under the limit
/// it scores as without one.
#[test]
fn a_tint_reference_step_over_the_memory_limit_is_refused_before_it_runs() {
    use tint_eval::icl::{DemoFormat, TrainingSequences};
    use tint_sim::llama::{LlamaReference, LlamaTintConfig};

    let device = Default::default();
    let model: AuxModel<B> = load_model(&tiny_llama_dir(), &device).unwrap();
    let mut config = TintConfig::sized_for(64, 4, TintSizes::default());
    config.step.inner_lr = INNER_LR;
    let demos: Vec<u32> = vec![5, 17, 23, 90, 4, 61, 8, 50, 31, 77];
    let targets: Vec<bool> = (0..demos.len()).map(|t| t == 3 || t == 7).collect();
    let needed = LlamaReference::new(&model, LlamaTintConfig::from_tint(&config))
        .unwrap()
        .step_memory(&[demos.len()])
        .total();
    let icl = |limit: Option<u64>| {
        let icl = TintIcl::new(
            Tint::reference(&model, config.clone()).unwrap(),
            "tint-ref",
            &device,
        );
        match limit {
            Some(limit) => icl.with_memory_limit(limit),
            None => icl,
        }
    };
    let candidates: Vec<Vec<u32>> = vec![vec![42], vec![7]];
    let context = [&demos[..], &[12, 13, 14]].concat();
    let request = ScoreRequest {
        context: &context,
        demo_len: demos.len(),
        demo_targets: &targets,
        candidates: &candidates,
    };
    let refused_message = |message: String| {
        assert!(
            message.contains("tint-ref's step on")
                && message.contains("of up to 10 positions")
                && message.contains("--max-memory-gib"),
            "{message}"
        );
    };

    // Multi format: the step runs when the first context is scored.
    let mut refused = icl(Some(needed - 1));
    refused_message(refused.score(&request).unwrap_err().to_string());
    assert_eq!(refused.updates_trained(), 0);
    let mut admitted = icl(Some(needed));
    let mut unlimited = icl(None);
    assert_eq!(
        admitted.score(&request).unwrap(),
        unlimited.score(&request).unwrap()
    );

    // The directions a step reuse keeps for other step sizes and cells (three slots: two beside
    // this step's own) count beside the step.
    let with_kept = LlamaReference::new(&model, LlamaTintConfig::from_tint(&config))
        .unwrap()
        .step_memory(&[demos.len()])
        .with_kept_directions(2)
        .total();
    assert!(with_kept > needed);
    let kept = |limit: u64| {
        let mut unscaled = config.clone();
        unscaled.step.inner_lr = 0.0;
        icl(Some(limit)).with_step_reuse(
            tint_eval::step_reuse::StepReuse::with_capacity(3),
            format!("{unscaled:?}"),
        )
    };
    let message = kept(with_kept - 1).score(&request).unwrap_err().to_string();
    refused_message(message.clone());
    assert!(message.contains("kept directions"), "{message}");
    kept(with_kept).score(&request).unwrap();

    // What another method's reuse holds when the step runs (dynamic evaluation's gradients in
    // `eval icl`) counts beside it.
    let other: tint_eval::step_reuse::StepReuse<f64> =
        tint_eval::step_reuse::StepReuse::with_capacity(1);
    other
        .get_or_compute_sized::<()>(other_key(), 1000, || Ok(std::rc::Rc::new(1.0)))
        .unwrap();
    let beside = |limit: u64| icl(Some(limit)).with_kept_beside(other.held());
    let message = beside(needed + 999)
        .score(&request)
        .unwrap_err()
        .to_string();
    refused_message(message.clone());
    assert!(message.contains("another method's kept steps"), "{message}");
    beside(needed + 1000).score(&request).unwrap();

    // Single format: one step on two sequences, bounded by the longer.
    let train = TrainingSequences {
        ids: vec![demos.clone(), demos[..6].to_vec()],
        targets: vec![targets.clone(), targets[..6].to_vec()],
        format: Some(DemoFormat::Single),
    };
    let mut refused = icl(Some(needed - 1));
    refused_message(refused.adapt(&train).unwrap_err().to_string());
    assert_eq!(refused.updates_trained(), 0);
    let (mut admitted, mut unlimited) = (icl(Some(needed)), icl(None));
    admitted.adapt(&train).unwrap();
    unlimited.adapt(&train).unwrap();
    let plain = ScoreRequest::plain(&context, &candidates);
    assert_eq!(
        admitted.score(&plain).unwrap(),
        unlimited.score(&plain).unwrap()
    );
}
