//! Data-parallel training on burn-collective (issue 18 item 4): two peers on the flex CPU device,
//! each training half of every batch, reach the parameters of single-device training on the whole
//! batch; the all-reduce is what makes them (one shard alone does not); bad splits are typed errors.
//!
//! The configuration exercises every random and masked part that must split exactly: the VAE noise,
//! the auxiliary loss (eta = 0.5, random starts, so the two shards score different position counts),
//! the continuity regulariser and the KL. The orthogonality and distribution-matching regularisers
//! couple sequences of a batch and are computed per shard (docs/cgt.md, "Data-parallel training"),
//! so they are off here.

use crate::data_parallel_setup::{
    data, max_difference, model, training, DATA_PARALLEL_TOLERANCE, STEPS,
};
use tint_cgt::data::{BatchSource, HostBatch};
use tint_cgt::train::{train, train_with_history, RunFiles};
use tint_cgt::{train_data_parallel, CgtError};

/// The first rows of every batch of a source: single-device training on peer 0's shard alone.
struct FirstRows<'a> {
    inner: &'a dyn BatchSource,
    rows: usize,
}

impl BatchSource for FirstRows<'_> {
    fn batch(&self, step: u64) -> HostBatch {
        self.inner.batch(step).rows(0..self.rows).unwrap()
    }
}

#[test]
fn two_peers_reach_the_parameters_of_single_device_training_on_the_global_batch() {
    let device = Default::default();
    let data = data(4);
    let start = model(&data);
    let training = training();
    let mut single_reports = Vec::new();
    let single = train_with_history(
        start.clone(),
        &data,
        &training,
        &RunFiles::default(),
        &device,
        &mut |r| single_reports.push(r.clone()),
    )
    .unwrap();
    let mut parallel_reports = Vec::new();
    let parallel = train_data_parallel(
        start.clone(),
        &data,
        &training,
        &RunFiles::default(),
        &[device, device],
        &mut |r| parallel_reports.push(r.clone()),
    )
    .unwrap();
    let moved = max_difference(&start, &single.model);
    let difference = max_difference(&single.model, &parallel.model);
    assert!(
        difference < DATA_PARALLEL_TOLERANCE,
        "2 peers vs 1 device after {STEPS} steps: max parameter difference {difference:e} \
         (training moved them by up to {moved:e})"
    );
    // Training moved the parameters by far more than the tolerance: the comparison is not vacuous.
    assert!(moved > 100.0 * DATA_PARALLEL_TOLERANCE, "moved {moved:e}");
    // Peer 0 reports the all-reduced terms: the global batch's loss terms, step by step.
    assert_eq!(parallel_reports.len(), STEPS);
    assert_eq!(parallel.history.len(), STEPS);
    for (s, p) in single_reports.iter().zip(&parallel_reports) {
        assert_eq!(s.step, p.step);
        assert_eq!(s.learning_rate, p.learning_rate);
        for (name, a, b) in [
            ("total", Some(s.terms.total), Some(p.terms.total)),
            ("task", Some(s.terms.task), Some(p.terms.task)),
            ("aux", s.terms.aux, p.terms.aux),
            ("continuity", s.terms.continuity, p.terms.continuity),
            ("kl", s.terms.kl, p.terms.kl),
        ] {
            let (a, b) = (a.unwrap(), b.unwrap());
            // Same summation-order argument, on loss values of order 1 (f32 relative 1e-6).
            assert!(
                (a - b).abs() < 1e-5 * a.abs().max(1.0),
                "step {} {name}: {a} vs {b}",
                s.step
            );
        }
    }
}

#[test]
fn the_all_reduce_participates_one_shard_alone_trains_elsewhere() {
    let device = Default::default();
    let data = data(4);
    let start = model(&data);
    let training = training();
    let parallel = train_data_parallel(
        start.clone(),
        &data,
        &training,
        &RunFiles::default(),
        &[device, device],
        &mut |_| {},
    )
    .unwrap();
    let shard = FirstRows {
        inner: &data,
        rows: 2,
    };
    let alone = train(
        start,
        &shard,
        &training,
        &RunFiles::default(),
        &device,
        &mut |_| {},
    )
    .unwrap();
    let difference = max_difference(&parallel.model, &alone);
    assert!(
        difference > 100.0 * DATA_PARALLEL_TOLERANCE,
        "peer 0's shard alone gave the 2-peer parameters (difference {difference:e}): the other \
         peer's gradients did not take part"
    );
}

#[test]
fn a_batch_that_does_not_split_into_equal_shards_is_a_typed_error() {
    let device = Default::default();
    let data = data(3);
    let result = train_data_parallel(
        model(&data),
        &data,
        &training(),
        &RunFiles::default(),
        &[device, device],
        &mut |_| {},
    );
    match result {
        Err(CgtError::BatchNotDivisible {
            batch_size: 3,
            devices: 2,
            step: 0,
        }) => {}
        other => panic!(
            "expected BatchNotDivisible {{ 3, 2, 0 }}, got {:?}",
            other.err()
        ),
    }
    let no_devices = train_data_parallel(
        model(&data),
        &data,
        &training(),
        &RunFiles::default(),
        &[],
        &mut |_| {},
    );
    assert!(matches!(
        no_devices,
        Err(CgtError::InvalidTrainingConfig(_))
    ));
}

#[test]
fn peer_0_writes_the_log_and_a_checkpoint_that_single_device_training_resumes() {
    let device = Default::default();
    let data = data(4);
    let training = training();
    let dir = std::env::temp_dir().join(format!("tint-cgt-data-parallel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = RunFiles {
        checkpoint_dir: Some(dir.join("ckpt")),
        log_path: Some(dir.join("log.jsonl")),
    };
    let parallel = train_data_parallel(
        model(&data),
        &data,
        &training,
        &files,
        &[device, device],
        &mut |_| {},
    )
    .unwrap();
    let log = tint_cgt::train::read_log(&dir.join("log.jsonl")).unwrap();
    assert_eq!(
        log.iter().map(|r| r.step).collect::<Vec<_>>(),
        (0..STEPS).collect::<Vec<_>>()
    );
    // The final checkpoint is the ordinary one: single-device training finds it final and reloads
    // the same parameters.
    let resumed =
        train_with_history(model(&data), &data, &training, &files, &device, &mut |_| {}).unwrap();
    assert_eq!(resumed.resumed_at, STEPS);
    assert_eq!(resumed.history.len(), STEPS);
    assert_eq!(max_difference(&parallel.model, &resumed.model), 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}
