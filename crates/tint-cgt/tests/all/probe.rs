//! Held-out evaluation during training (`train_probed`, the learning curves of issue 18): the probe
//! runs after every N-th step and after the last, sees the model of that step, and leaves the
//! training untouched.

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::tensor::{Distribution, Tensor};
use tint_cgt::data::LinearRegressionConfig;
use tint_cgt::train::{
    load_checkpoint_model, train, train_probed, Probe, RunFiles, TrainingConfig,
};
use tint_cgt::{CgtConfig, CgtError, CgtInput, CgtModel};

use crate::common::{tiny_regression_data, tiny_regression_model, tiny_training};

type AB = Autodiff<Flex>;

/// What a probe of these tests runs.
type ProbeFn<'a> = dyn FnMut(usize, &CgtModel<AB>) -> Result<(), CgtError> + 'a;

fn setup() -> (LinearRegressionConfig, CgtConfig, TrainingConfig) {
    let data = tiny_regression_data();
    let config = tiny_regression_model();
    let training = tiny_training(7, 2);
    (data, config, training)
}

fn logits(model: &CgtModel<Flex>, input: &CgtInput<Flex>) -> Vec<f32> {
    model
        .forward(input)
        .unwrap()
        .logits
        .into_data()
        .to_vec()
        .unwrap()
}

#[test]
fn the_probe_sees_every_nth_step_and_the_last_and_changes_nothing() {
    let device = Default::default();
    let (data, config, training) = setup();
    let input = CgtInput::Vectors(Tensor::<Flex, 3>::random(
        [2, 8, 4],
        Distribution::Normal(0.0, 1.0),
        &device,
    ));
    let start = CgtModel::<AB>::new(&config, &device).unwrap();
    let plain = train(
        start.clone(),
        &data,
        &training,
        &RunFiles::default(),
        &device,
        &mut |_| {},
    )
    .unwrap();
    // What the probe saw: (steps done, logits of the model then).
    let mut seen: Vec<(usize, Vec<f32>)> = Vec::new();
    let mut evaluate = |done: usize, model: &CgtModel<AB>| {
        seen.push((done, logits(&model.valid(), &input)));
        Ok(())
    };
    let probed = train_probed(
        start.clone(),
        &data,
        &training,
        &RunFiles::default(),
        &device,
        &mut |_| {},
        Some(Probe {
            every: 3,
            evaluate: &mut evaluate,
        }),
    )
    .unwrap();
    let steps: Vec<usize> = seen.iter().map(|s| s.0).collect();
    assert_eq!(steps, [3, 6, 7]);
    // Exact: the same op stream with the same batches and draws; the probe only reads the model.
    let final_logits = logits(&plain.valid(), &input);
    assert_eq!(logits(&probed.model.valid(), &input), final_logits);
    assert_eq!(seen[2].1, final_logits);
    // The probe sees the model of its step: the same run, checkpointed after 3 steps and stopped
    // during the fourth, saved the model the probe evaluated first.
    let dir = std::env::temp_dir().join(format!("tint-cgt-probe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = RunFiles {
        checkpoint_dir: Some(dir.clone()),
        log_path: None,
    };
    let checkpointed = TrainingConfig {
        checkpoint_every: 3,
        ..training.clone()
    };
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        train(
            start.clone(),
            &data,
            &checkpointed,
            &files,
            &device,
            &mut |r| {
                if r.step == 3 {
                    panic!("stop after the checkpoint at 3 steps");
                }
            },
        )
    }));
    assert!(stopped.is_err());
    let at_three = load_checkpoint_model(start.clone(), &dir, &device).unwrap();
    assert_eq!(logits(&at_three.valid(), &input), seen[0].1);
    assert_ne!(seen[0].1, logits(&start.valid(), &input));
    assert_ne!(seen[0].1, final_logits);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The error of a probed run of the tiny setup.
fn probed_error(every: usize, evaluate: &mut ProbeFn<'_>) -> CgtError {
    let device = Default::default();
    let (data, config, training) = setup();
    let start = CgtModel::<AB>::new(&config, &device).unwrap();
    let outcome = train_probed(
        start,
        &data,
        &training,
        &RunFiles::default(),
        &device,
        &mut |_| {},
        Some(Probe { every, evaluate }),
    );
    let Err(error) = outcome else {
        panic!("the probed run was expected to fail")
    };
    error
}

#[test]
fn a_probe_every_zero_steps_is_an_error() {
    let error = probed_error(0, &mut |_, _| Ok(()));
    assert!(matches!(error, CgtError::InvalidConfig(ref m) if m.contains("every = 0")));
}

#[test]
fn a_failing_probe_stops_training_with_its_error() {
    let error = probed_error(2, &mut |done, _| {
        Err(CgtError::InvalidConfig(format!("probe failed at {done}")))
    });
    assert!(matches!(error, CgtError::InvalidConfig(ref m) if m == "probe failed at 2"));
}
