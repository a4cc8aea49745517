//! Behavioural tests of the whole model: shapes, stream separation, gradients, folding, export, training.

use burn::backend::{Autodiff, Flex};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use tint_cgt::data::{ArithmeticConfig, ArithmeticVocab, BatchSource, LinearRegressionConfig};
use tint_cgt::objective::ObjectiveConfig;
use tint_cgt::regularisers::PositionWeighting;
use tint_cgt::train::{
    checkpoint_is_final, checkpoint_step, read_log, train, train_with_history, training_seconds,
    RunFiles, TrainingConfig,
};
use tint_cgt::{CgtConfig, CgtError, CgtInput, CgtModel, InputKind, Mixing};

use crate::common::{tiny_regression_data, tiny_regression_model, tiny_training};

type TestBackend = Flex;
type TestAutodiffBackend = Autodiff<Flex>;

/// Folding reorders f32 sums over d_x = 16 terms in 3 guided sub-layers; observed error ~1e-6, bound 1e-4
/// as the issue requires.
const FOLD_TOLERANCE: f32 = 1e-4;
/// The x path never reads the y-stream parameters, so the two evaluations run identical arithmetic and
/// must agree bit for bit.
const INDEPENDENCE_TOLERANCE: f32 = 0.0;

fn config(mixing: Mixing) -> CgtConfig {
    CgtConfig::new(ArithmeticVocab::SIZE, 24, 3, 16, 2)
        .with_d_y(8)
        .with_n_heads_y(2)
        .with_readout_layer(1)
        .with_rank(2)
        .with_n_templates(3)
        .with_mixing(mixing)
        .with_init_std(0.2)
}

fn tokens(batch: usize, length: usize, seed: i64) -> CgtInput<TestBackend> {
    let ids: Vec<i64> = (0..batch * length)
        .map(|i| (i as i64 * 7 + seed * 3) % ArithmeticVocab::SIZE as i64)
        .collect();
    CgtInput::Tokens(Tensor::<TestBackend, 2, Int>::from_data(
        TensorData::new(ids, [batch, length]),
        &Default::default(),
    ))
}

fn max_abs_diff(a: Tensor<TestBackend, 3>, b: Tensor<TestBackend, 3>) -> f32 {
    (a - b).abs().max().into_scalar()
}

#[test]
fn forward_shapes() {
    let device = Default::default();
    let model =
        CgtModel::<TestBackend>::new(&config(Mixing::Tanh).with_vae(true), &device).unwrap();
    let output = model.forward(&tokens(2, 10, 0)).unwrap();
    assert_eq!(output.logits.dims(), [2, 10, ArithmeticVocab::SIZE]);
    let context = output.context.unwrap();
    assert_eq!(context.mean.dims(), [2, 10, 8]);
    assert_eq!(context.log_var.unwrap().dims(), [2, 10, 8]);
    let baseline = CgtModel::<TestBackend>::new(&config(Mixing::Tanh).baseline(), &device).unwrap();
    let output = baseline.forward(&tokens(2, 10, 0)).unwrap();
    assert_eq!(output.logits.dims(), [2, 10, ArithmeticVocab::SIZE]);
    assert!(output.context.is_none());
    // Vector inputs (linear regression).
    let vectors = CgtConfig {
        output_size: 1,
        ..config(Mixing::Tanh).with_input(InputKind::Vectors(5))
    };
    let model = CgtModel::<TestBackend>::new(&vectors, &device).unwrap();
    let input = CgtInput::Vectors(Tensor::random(
        [3, 6, 5],
        Distribution::Normal(0.0, 1.0),
        &device,
    ));
    assert_eq!(model.forward(&input).unwrap().logits.dims(), [3, 6, 1]);
}

#[test]
fn bad_inputs_are_errors() {
    let device = Default::default();
    let model = CgtModel::<TestBackend>::new(&config(Mixing::Tanh), &device).unwrap();
    assert!(matches!(
        model.forward(&tokens(1, 25, 0)),
        Err(CgtError::Shape(_))
    ));
    let vectors = CgtInput::Vectors(Tensor::zeros([1, 4, 3], &device));
    assert!(model.forward(&vectors).is_err());
    let wrong_y = Tensor::<TestBackend, 3>::zeros([1, 3, 8], &device);
    assert!(model
        .forward_x_path(&tokens(1, 5, 0), Some(wrong_y), None)
        .is_err());
    let y = Tensor::<TestBackend, 3>::zeros([1, 1, 8], &device);
    assert!(model
        .forward_x_path(&tokens(1, 5, 0), Some(y), Some(&[5]))
        .is_err());
    let baseline = CgtModel::<TestBackend>::new(&config(Mixing::Tanh).baseline(), &device).unwrap();
    assert!(matches!(
        baseline.context(&tokens(1, 5, 0)),
        Err(CgtError::NoContextStream)
    ));
    assert!(baseline.specialise(Tensor::zeros([8], &device)).is_err());
    // The upper pass: a baseline has no guided layers to continue, and y must fit the x stream.
    let lower_x = Tensor::<TestBackend, 3>::zeros([1, 5, 16], &device);
    assert!(matches!(
        baseline.upper_pass(lower_x.clone(), Tensor::zeros([1, 1, 8], &device)),
        Err(CgtError::NoContextStream)
    ));
    assert!(matches!(
        model.upper_pass(lower_x.clone(), Tensor::zeros([1, 3, 8], &device)),
        Err(CgtError::Shape(_))
    ));
    assert!(model
        .upper_pass(lower_x, Tensor::zeros([1, 1, 8], &device))
        .is_ok());
}

#[test]
fn x_stream_below_readout_ignores_y() {
    let device = Default::default();
    let model = CgtModel::<TestBackend>::new(&config(Mixing::Tanh), &device).unwrap();
    let input = tokens(2, 9, 1);
    // Perturb everything that produces y below l (y embedding, y heads). y^l must change, while the x
    // stream below l, and hence the x path for a fixed external y, must not.
    let y = Tensor::<TestBackend, 3>::random([2, 1, 8], Distribution::Normal(0.0, 1.0), &device);
    let before = model.forward_x_path(&input, Some(y.clone()), None).unwrap();
    let mut perturbed = model.clone();
    let embedding = perturbed.y_embedding.take().unwrap();
    let positions = embedding.positions.val().mul_scalar(5.0).add_scalar(1.0);
    perturbed.y_embedding = Some(tint_cgt::embedding::InputEmbedding {
        positions: burn::module::Param::from_tensor(positions),
        ..embedding
    });
    for block in &mut perturbed.lower {
        let weight = block.y_attn.qkv.weight.val().mul_scalar(-2.0);
        block.y_attn.qkv.weight = burn::module::Param::from_tensor(weight);
    }
    // y itself changes...
    let y_before = model.context(&input).unwrap().mean;
    let y_after = perturbed.context(&input).unwrap().mean;
    assert!(max_abs_diff(y_before, y_after) > 1e-3);
    // ...but the x path (everything below l and the upper layers for a given y) does not.
    let after = perturbed.forward_x_path(&input, Some(y), None).unwrap();
    assert!(max_abs_diff(before, after) <= INDEPENDENCE_TOLERANCE);
}

#[test]
fn dynamic_forward_uses_y() {
    // The dynamic forward equals the x path fed with the model's own y, and differs for another y.
    let device = Default::default();
    let model = CgtModel::<TestBackend>::new(&config(Mixing::Softmax), &device).unwrap();
    let input = tokens(2, 7, 2);
    let output = model.forward(&input).unwrap();
    let y = output.context.unwrap().mean;
    let replay = model.forward_x_path(&input, Some(y.clone()), None).unwrap();
    // The forward continues the x stream of the two-stream layers instead of recomputing it: the
    // same operations on the same values, so the same bits.
    assert!(max_abs_diff(output.logits.clone(), replay) <= INDEPENDENCE_TOLERANCE);
    let other = model
        .forward_x_path(&input, Some(y.mul_scalar(-1.0)), None)
        .unwrap();
    assert!(max_abs_diff(output.logits, other) > 1e-4);
}

/// Sharing the lower `x` stream between the context and the task pass sums the two gradient
/// contributions of the lower x-block weights before the backward through those blocks instead of
/// after it: f32 sums in another order. Observed: at most 1.9e-6 against entries up to 11 (relative
/// 1.7e-7; 0 for weights whose output only the task pass reads); bound 1e-5 of the
/// largest gradient entry.
const SHARED_PASS_GRADIENT_TOLERANCE: f32 = 1e-5;

#[test]
fn shared_lower_pass_gives_the_gradients_of_two_separate_passes() {
    let device = Default::default();
    let model = CgtModel::<TestAutodiffBackend>::new(&config(Mixing::Tanh), &device).unwrap();
    let ids: Vec<i64> = (0..2 * 9)
        .map(|i| (i as i64 * 5 + 1) % ArithmeticVocab::SIZE as i64)
        .collect();
    let input = CgtInput::Tokens(Tensor::<TestAutodiffBackend, 2, Int>::from_data(
        TensorData::new(ids, [2, 9]),
        &device,
    ));
    let weights = Tensor::<TestAutodiffBackend, 3>::random(
        [2, 9, ArithmeticVocab::SIZE],
        Distribution::Normal(0.0, 1.0),
        &device,
    );
    // Shared: one lower pass feeds y^l and the x stream of the upper layers.
    let shared = model.forward(&input).unwrap().logits;
    let shared_grads = (shared * weights.clone()).sum().backward();
    // Separate: y^l from one pass, the x path recomputed from the embedding by another.
    let y = model.context(&input).unwrap().mean;
    let separate = model.forward_x_path(&input, Some(y), None).unwrap();
    let separate_grads = (separate * weights).sum().backward();
    let lower = &model.lower[0];
    let upper = model.upper[0].template_attn.as_ref().unwrap();
    // (gradient through the shared pass, through the separate passes), flattened.
    fn both<const D: usize>(
        param: Tensor<TestAutodiffBackend, D>,
        shared: &<TestAutodiffBackend as burn::tensor::backend::AutodiffBackend>::Gradients,
        separate: &<TestAutodiffBackend as burn::tensor::backend::AutodiffBackend>::Gradients,
    ) -> (Tensor<TestBackend, 1>, Tensor<TestBackend, 1>) {
        (
            param.grad(shared).unwrap().reshape([-1]),
            param.grad(separate).unwrap().reshape([-1]),
        )
    }
    let (s, p) = (&shared_grads, &separate_grads);
    let params = [
        (
            "x embedding",
            both(
                model.x_embedding.tokens.as_ref().unwrap().weight.val(),
                s,
                p,
            ),
        ),
        (
            "lower x attention",
            both(lower.x_block.attn.qkv.weight.val(), s, p),
        ),
        ("lower x MLP", both(lower.x_block.mlp.fc.weight.val(), s, p)),
        (
            "lower y attention",
            both(lower.y_attn.qkv.weight.val(), s, p),
        ),
        ("lower y MLP", both(lower.y_mlp.fc.weight.val(), s, p)),
        ("template left", both(upper.left.val(), s, p)),
        ("template selector", both(upper.selector.weight.val(), s, p)),
    ];
    for (name, (a, b)) in params {
        let scale: f32 = b.clone().abs().max().into_scalar();
        let diff: f32 = (a - b).abs().max().into_scalar();
        assert!(scale > 0.0, "{name}: no gradient");
        assert!(
            diff <= SHARED_PASS_GRADIENT_TOLERANCE * scale,
            "{name}: gradients differ by {diff:e} (largest entry {scale:e})"
        );
    }
}

#[test]
fn gradients_reach_templates_and_y_stream() {
    let device = Default::default();
    let model = CgtModel::<TestAutodiffBackend>::new(&config(Mixing::Tanh), &device).unwrap();
    let data = ArithmeticConfig {
        n_tasks: 1,
        n_examples: 2,
        digits: 1,
        batch_size: 2,
        seed: 0,
    };
    let batch = data.batch(0);
    let objective = ObjectiveConfig {
        eta: 0.5,
        w_continuity: 0.1,
        w_orthogonality: 0.1,
        ..ObjectiveConfig::default()
    };
    let mut rng = tint_cgt::data::step_rng(0, 0);
    let (loss, terms) =
        tint_cgt::objective::joint_loss(&model, &batch, &objective, &mut rng, &device).unwrap();
    assert!(terms.aux.is_some() && terms.continuity.is_some() && terms.orthogonality.is_some());
    let grads = loss.backward();
    let template = model.upper[0].template_attn.as_ref().unwrap();
    for grad in [
        template.left.val().grad(&grads).unwrap(),
        template.right.val().grad(&grads).unwrap(),
    ] {
        assert!(grad.abs().sum().into_scalar() > 0.0);
    }
    let selector = template.selector.weight.val().grad(&grads).unwrap();
    assert!(selector.abs().sum().into_scalar() > 0.0);
    let y_attn = model.lower[0].y_attn.qkv.weight.val().grad(&grads).unwrap();
    assert!(y_attn.abs().sum().into_scalar() > 0.0);
}

#[test]
fn folded_model_matches_frozen_y() {
    let device = Default::default();
    for mixing in [Mixing::Tanh, Mixing::Softmax] {
        let model = CgtModel::<TestBackend>::new(&config(mixing), &device).unwrap();
        let input = tokens(1, 12, 3);
        let y = model.context(&input).unwrap().mean.narrow(1, 5, 1);
        let frozen = model.forward_x_path(&input, Some(y.clone()), None).unwrap();
        let folded = model.specialise(y.clone().reshape([8])).unwrap();
        assert!(!folded.is_guided());
        let plain = folded.forward(&input).unwrap().logits;
        let diff = max_abs_diff(frozen.clone(), plain);
        assert!(diff <= FOLD_TOLERANCE, "fold diff {diff}");
        // The same holds with the prompt hidden (specialised evaluation).
        let hidden = model.forward_x_path(&input, Some(y), Some(&[6])).unwrap();
        let folded_hidden = folded.forward_x_path(&input, None, Some(&[6])).unwrap();
        assert!(max_abs_diff(hidden, folded_hidden) <= FOLD_TOLERANCE);
    }
}

#[test]
fn moving_average_with_zero_rate_is_frozen() {
    let device = Default::default();
    let model = CgtModel::<TestBackend>::new(&config(Mixing::Tanh), &device).unwrap();
    let input = tokens(2, 8, 4);
    let initial = Tensor::<TestBackend, 2>::random([2, 8], Distribution::Normal(0.0, 1.0), &device);
    let informed = model
        .forward_moving_average(&input, initial.clone(), 0.0)
        .unwrap();
    let frozen = model
        .forward_x_path(&input, Some(initial.clone().unsqueeze_dim(1)), None)
        .unwrap();
    assert!(max_abs_diff(informed, frozen) <= FOLD_TOLERANCE);
    // Rate 1 from position 1 on follows the computed y exactly.
    let computed = model.context(&input).unwrap().mean;
    let follow = model
        .forward_moving_average(
            &input,
            computed.clone().narrow(1, 0, 1).reshape([2, 8]),
            1.0,
        )
        .unwrap();
    let dynamic = model.forward(&input).unwrap().logits;
    assert!(max_abs_diff(follow, dynamic) <= FOLD_TOLERANCE);
    assert!(model.forward_moving_average(&input, initial, 1.5).is_err());
}

#[test]
fn folded_model_exports_to_safetensors() {
    let device = Default::default();
    let model = CgtModel::<TestBackend>::new(&config(Mixing::Tanh), &device).unwrap();
    assert!(model.named_tensors().is_err());
    let folded = model.specialise(Tensor::ones([8], &device)).unwrap();
    let dir = std::env::temp_dir().join(format!("tint-cgt-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("folded.safetensors");
    folded.export_safetensors(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let loaded = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let qkv = loaded.tensor("h.2.attn.c_attn.weight").unwrap();
    assert_eq!(qkv.shape(), &[16, 48]);
    let expected = folded.upper[2]
        .attn
        .qkv
        .weight
        .val()
        .into_data()
        .to_vec::<f32>()
        .unwrap();
    let stored: Vec<f32> = qkv
        .data()
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(stored, expected);
    assert_eq!(loaded.names().len(), 2 + 3 * 12 + 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn smoke_training(objective: ObjectiveConfig, steps: usize) -> TrainingConfig {
    TrainingConfig {
        objective,
        ..tiny_training(steps, 5)
    }
}

#[test]
fn hundred_training_steps_reduce_the_loss() {
    let device = Default::default();
    let data = ArithmeticConfig {
        n_tasks: 1,
        n_examples: 3,
        digits: 1,
        batch_size: 4,
        seed: 5,
    };
    let config = CgtConfig::new(ArithmeticVocab::SIZE, data.sequence_length(), 2, 16, 2)
        .with_d_y(8)
        .with_n_heads_y(1)
        .with_readout_layer(1)
        .with_rank(2)
        .with_n_templates(2);
    let model = CgtModel::<TestAutodiffBackend>::new(&config, &device).unwrap();
    let objective = ObjectiveConfig {
        eta: 0.5,
        w_continuity: 0.08,
        w_orthogonality: 0.04,
        zeta: PositionWeighting::Linear,
        ..ObjectiveConfig::default()
    };
    let mut losses = Vec::new();
    train(
        model,
        &data,
        &smoke_training(objective, 100),
        &RunFiles::default(),
        &device,
        &mut |r| losses.push(r.terms.task),
    )
    .unwrap();
    assert_eq!(losses.len(), 100);
    let first: f64 = losses[..10].iter().sum::<f64>() / 10.0;
    let last: f64 = losses[90..].iter().sum::<f64>() / 10.0;
    assert!(last < 0.8 * first, "loss {first} -> {last}");
}

#[test]
fn training_resumes_from_a_checkpoint() {
    let device = Default::default();
    let data = tiny_regression_data();
    let config = tiny_regression_model().with_vae(true);
    let objective = ObjectiveConfig {
        eta: 0.5,
        vae_beta: 0.01,
        vae_length_scale: 2.0,
        ..ObjectiveConfig::default()
    };
    let dir = std::env::temp_dir().join(format!("tint-cgt-resume-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = RunFiles {
        checkpoint_dir: Some(dir.join("ckpt")),
        log_path: Some(dir.join("log.jsonl")),
    };
    let fresh = || CgtModel::<TestAutodiffBackend>::new(&config, &device).unwrap();
    let start = fresh();
    let mut six = smoke_training(objective, 6);
    // Uninterrupted: 6 steps.
    let full = train(
        start.clone(),
        &data,
        &six,
        &RunFiles::default(),
        &device,
        &mut |_| {},
    )
    .unwrap();
    // Interrupted after the checkpoint at 3 steps, then resumed to 6.
    six.checkpoint_every = 3;
    let mut seen = 0;
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        train(start.clone(), &data, &six, &files, &device, &mut |r| {
            seen += 1;
            if r.step == 3 {
                panic!("simulated interruption after the checkpoint at 3 steps");
            }
        })
    }));
    assert!(stopped.is_err());
    assert_eq!(seen, 4);
    let resumed = train(start, &data, &six, &files, &device, &mut |_| {}).unwrap();
    let input = CgtInput::Vectors(Tensor::random(
        [1, 8, 4],
        Distribution::Normal(0.0, 1.0),
        &device,
    ));
    let a = full.forward(&input).unwrap().logits;
    let b = resumed.forward(&input).unwrap().logits;
    let diff = (a - b).abs().max().into_scalar();
    assert!(diff < 1e-5, "resume diff {diff}");
    // The step logged after the checkpoint and run again on resume is kept once.
    let log = read_log(&dir.join("log.jsonl")).unwrap();
    assert_eq!(
        log.iter().map(|r| r.step).collect::<Vec<_>>(),
        (0..6).collect::<Vec<_>>()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rerunning_a_finished_run_restores_its_history_and_refuses_other_schedules() {
    let device = Default::default();
    let data = tiny_regression_data();
    let config = tiny_regression_model();
    let dir = std::env::temp_dir().join(format!("tint-cgt-rerun-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = RunFiles {
        checkpoint_dir: Some(dir.join("ckpt")),
        log_path: Some(dir.join("log.jsonl")),
    };
    let fresh = || CgtModel::<TestAutodiffBackend>::new(&config, &device).unwrap();
    let four = smoke_training(ObjectiveConfig::default(), 4);
    let first = train_with_history(fresh(), &data, &four, &files, &device, &mut |_| {}).unwrap();
    assert_eq!(first.resumed_at, 0);
    assert_eq!(first.history.len(), 4);
    assert!(first.history.iter().all(|r| r.step_s > 0.0));
    // Rerun: nothing left to train, but the losses and the training time come back from the log.
    let mut called = 0;
    let again =
        train_with_history(fresh(), &data, &four, &files, &device, &mut |_| called += 1).unwrap();
    assert_eq!(called, 0);
    assert_eq!(again.resumed_at, 4);
    let checkpoint = dir.join("ckpt");
    assert!(checkpoint_is_final(&checkpoint, 4).unwrap());
    assert!(!checkpoint_is_final(&checkpoint, 5).unwrap());
    assert!(!checkpoint_is_final(&dir.join("none"), 4).unwrap());
    // The step a run would resume at, read before training (the progress note of a resumed run).
    assert_eq!(checkpoint_step(&checkpoint).unwrap(), Some(4));
    assert_eq!(checkpoint_step(&dir.join("none")).unwrap(), None);
    let broken = dir.join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("state.json"), "{\"next_step\": ").unwrap();
    assert!(checkpoint_step(&broken).is_err());
    // JSON keeps f64 to within an ulp or so.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(1.0);
    assert_eq!(again.history.len(), 4);
    for (a, b) in again.history.iter().zip(&first.history) {
        assert_eq!(a.step, b.step);
        assert!(close(a.terms.task, b.terms.task), "{a:?} vs {b:?}");
    }
    let seconds = training_seconds(&first.history);
    assert!(seconds > 0.0);
    assert!(close(training_seconds(&again.history), seconds));
    // Another step count or batch size must not resume from this checkpoint.
    let five = smoke_training(ObjectiveConfig::default(), 5);
    let err = train(fresh(), &data, &five, &files, &device, &mut |_| {}).unwrap_err();
    assert!(matches!(err, CgtError::ResumeMismatch(_)), "{err}");
    assert!(err.to_string().contains("4-step run"), "{err}");
    let wider = LinearRegressionConfig {
        batch_size: 3,
        ..data.clone()
    };
    let err = train(fresh(), &wider, &four, &files, &device, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("batch size 2"), "{err}");
    // Saving checkpoints more often does not change the schedule: still resumable.
    let mut often = four.clone();
    often.checkpoint_every = 1;
    assert!(train(fresh(), &data, &often, &files, &device, &mut |_| {}).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn training_seconds_handle_old_logs_without_step_times() {
    let report = |step, elapsed_s| tint_cgt::train::StepReport {
        step,
        total_steps: 4,
        learning_rate: 1e-3,
        terms: Default::default(),
        elapsed_s,
        step_s: 0.0,
    };
    // Two (re)starts: 1, 2 s then 1.5, 3 s since each start.
    let log = [
        report(0, 1.0),
        report(1, 2.0),
        report(2, 1.5),
        report(3, 3.0),
    ];
    assert!((training_seconds(&log) - 5.0).abs() < 1e-12);
}
