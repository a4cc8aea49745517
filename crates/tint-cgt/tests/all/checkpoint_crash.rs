//! Crash-safe CGT checkpoints (issue 20): the model and optimiser files of a checkpoint are tagged
//! with their step and `state.json` (written atomically after them) names the step, so a crash while
//! the next checkpoint is being written — its files cut or half there — resumes from the previous
//! checkpoint and reaches the numbers of an uninterrupted run.

use std::path::{Path, PathBuf};

use burn::backend::{Autodiff, Flex};
use burn::tensor::{Distribution, Tensor};
use tint_cgt::train::{load_checkpoint_model, train, train_with_history, RunFiles};
use tint_cgt::{CgtInput, CgtModel};

use crate::common::{tiny_regression_data, tiny_regression_model, tiny_training};

type AB = Autodiff<Flex>;

/// Resumed and uninterrupted runs replay the same f32 steps (same batches, same optimiser state);
/// the existing resume test bounds their logits by the same value.
const RESUME_TOLERANCE: f32 = 1e-5;

/// A fresh scratch directory `tint-cgt-TAG-PID` with a checkpoint directory `ckpt` in it, and run
/// files that checkpoint there (and log to `log`, when given).
fn scratch_run(tag: &str, log: Option<&str>) -> (PathBuf, PathBuf, RunFiles) {
    let dir = std::env::temp_dir().join(format!("tint-cgt-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ckpt = dir.join("ckpt");
    let files = RunFiles {
        checkpoint_dir: Some(ckpt.clone()),
        log_path: log.map(|name| dir.join(name)),
    };
    (dir, ckpt, files)
}

/// The sorted file names in `dir` (none when it does not exist).
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_crash_while_writing_the_next_checkpoint_resumes_from_the_previous_one() {
    let device = Default::default();
    let data = tiny_regression_data();
    let config = tiny_regression_model();
    let mut training = tiny_training(6, 2);
    let (dir, ckpt, files) = scratch_run("crash", Some("log.jsonl"));
    let start = CgtModel::<AB>::new(&config, &device).unwrap();
    let full = train(
        start.clone(),
        &data,
        &training,
        &RunFiles::default(),
        &device,
        &mut |_| {},
    )
    .unwrap();
    // Checkpoints every 3 steps; stop right after the one at step 3.
    training.checkpoint_every = 3;
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        train(start.clone(), &data, &training, &files, &device, &mut |r| {
            if r.step == 3 {
                panic!("simulated crash after the checkpoint at 3 steps");
            }
        })
    }));
    assert!(stopped.is_err());
    assert_eq!(
        listing(&ckpt),
        ["model-3.mpk", "optimizer-3.mpk", "state.json"]
    );
    // The crash while writing the checkpoint at step 6: a cut model file, no optimiser file, the
    // state not yet replaced.
    std::fs::write(ckpt.join("model-6.mpk"), b"cut").unwrap();
    let resumed = train(start, &data, &training, &files, &device, &mut |_| {}).unwrap();
    let input = CgtInput::Vectors(Tensor::random(
        [1, 8, 4],
        Distribution::Normal(0.0, 1.0),
        &device,
    ));
    let a = full.forward(&input).unwrap().logits;
    let b = resumed.forward(&input).unwrap().logits;
    let diff = (a.clone() - b).abs().max().into_scalar();
    assert!(diff < RESUME_TOLERANCE, "resume diff {diff}");
    // The finished run's checkpoint names its own files only, and loads as the trained model.
    assert_eq!(
        listing(&ckpt),
        ["model-6.mpk", "optimizer-6.mpk", "state.json"]
    );
    let loaded = load_checkpoint_model(
        CgtModel::<AB>::new(&config, &device).unwrap(),
        &ckpt,
        &device,
    )
    .unwrap();
    let c = loaded.forward(&input).unwrap().logits;
    let diff = (a - c).abs().max().into_scalar();
    assert!(diff < RESUME_TOLERANCE, "loaded diff {diff}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_checkpoint_is_an_error_naming_its_file() {
    let device = Default::default();
    let config = tiny_regression_model();
    let training = tiny_training(2, 0);
    let (dir, ckpt, files) = scratch_run("damaged", None);
    let start = CgtModel::<AB>::new(&config, &device).unwrap();
    train(
        start.clone(),
        &tiny_regression_data(),
        &training,
        &files,
        &device,
        &mut |_| {},
    )
    .unwrap();
    let load = || load_checkpoint_model(start.clone(), &ckpt, &device).map(|_| ());
    // The error of loading now, which must start with `prefix`.
    let error_starting = |prefix: String| {
        let message = load().unwrap_err().to_string();
        assert!(
            message.starts_with(&prefix),
            "want {prefix:?}…, got {message}"
        );
        message
    };
    let model_file = ckpt.join("model-2.mpk");
    let whole = std::fs::read(&model_file).unwrap();

    std::fs::write(&model_file, &whole[..100]).unwrap();
    let cut = error_starting(format!(
        "cannot read checkpoint file {}: ",
        model_file.display()
    ));
    assert!(
        !cut.contains("Unknown("),
        "the recorder's Debug form: {cut}"
    );
    // The file state.json names, not the untagged fallback `model.mpk`.
    std::fs::remove_file(&model_file).unwrap();
    error_starting(format!(
        "cannot read checkpoint file {}: missing",
        model_file.display()
    ));

    std::fs::write(&model_file, &whole).unwrap();
    load().unwrap();
    let state = ckpt.join("state.json");
    std::fs::write(&state, "{\"next_step\":").unwrap();
    error_starting(format!(
        "{}: not a checkpoint state file (",
        state.display()
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 66: a checkpoint file replaced by another valid one (here the model of a run with
/// another seed) loads without a recorder error, so its SHA-256, recorded in `state.json` when it
/// was written, is what catches it: loading and resuming are errors naming the file and both
/// digests.
#[test]
fn a_replaced_checkpoint_file_fails_its_recorded_digest() {
    let device = Default::default();
    let config = tiny_regression_model();
    let dir = std::env::temp_dir().join(format!("tint-cgt-digest-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let fresh = || CgtModel::<AB>::new(&config, &device).unwrap();
    // A 4-step run that stops right after its checkpoint at step 2.
    let stopped_run = |name: &str, seed: u64| {
        let ckpt = dir.join(name);
        let files = RunFiles {
            checkpoint_dir: Some(ckpt.clone()),
            log_path: None,
        };
        let training = tint_cgt::train::TrainingConfig {
            seed,
            checkpoint_every: 2,
            ..tiny_training(4, 0)
        };
        let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            train(
                fresh(),
                &tiny_regression_data(),
                &training,
                &files,
                &device,
                &mut |r| {
                    if r.step == 2 {
                        panic!("simulated stop after the checkpoint at 2 steps");
                    }
                },
            )
        }));
        assert!(stopped.is_err());
        (ckpt, files, training)
    };
    let (ours, files, training) = stopped_run("ours", 0);
    let (theirs, _, _) = stopped_run("theirs", 1);
    let model_file = ours.join("model-2.mpk");
    assert!(load_checkpoint_model(fresh(), &ours, &device).is_ok());
    std::fs::copy(theirs.join("model-2.mpk"), &model_file).unwrap();
    let prefix = format!(
        "cannot read checkpoint file {}: its SHA-256",
        model_file.display()
    );
    let message = load_checkpoint_model(fresh(), &ours, &device)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with(&prefix) && message.contains("state.json recorded"),
        "{message}"
    );
    // Resuming the run refuses it the same way.
    match train(
        fresh(),
        &tiny_regression_data(),
        &training,
        &files,
        &device,
        &mut |_| {},
    ) {
        Err(e) => assert!(e.to_string().starts_with(&prefix), "{e}"),
        Ok(_) => panic!("a replaced checkpoint file must not be resumed"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 66: two runs training into one checkpoint directory would overwrite each other's
/// checkpoints. While one run trains (here: inside its progress callback), a second `train` on the
/// same directory is refused before it reads or writes anything, naming the directory and its lock,
/// and the first run's checkpoint stays as it wrote it; once the first run has ended, the same call
/// is admitted (and finds the finished checkpoint).
#[test]
fn a_second_run_on_a_checkpoint_directory_is_refused_while_the_first_trains() {
    let device = Default::default();
    let data = tiny_regression_data();
    let config = tiny_regression_model();
    let mut training = tiny_training(4, 2);
    training.checkpoint_every = 2;
    let (dir, ckpt, files) = scratch_run("busy", None);
    let start = CgtModel::<AB>::new(&config, &device).unwrap();
    let mut refused = None;
    train(start.clone(), &data, &training, &files, &device, &mut |r| {
        if r.step == 2 {
            let before = listing(&ckpt);
            let second = train(
                start.clone(),
                &data,
                &training,
                &files,
                &device,
                &mut |_| {},
            );
            refused = Some((second.map(|_| ()), before, listing(&ckpt)));
        }
    })
    .unwrap();
    let (second, before, after) = refused.expect("the callback ran at step 2");
    let message = second.unwrap_err().to_string();
    assert!(
        message.contains("another run is training into the checkpoint directory")
            && message.contains(&ckpt.display().to_string())
            && message.contains("ckpt.lock"),
        "{message}"
    );
    assert_eq!(before, ["model-2.mpk", "optimizer-2.mpk", "state.json"]);
    assert_eq!(after, before, "the refused run changed the checkpoint");
    assert!(!dir.join("ckpt.lock").exists(), "the lock outlived its run");
    // The first run has ended: the same call runs (nothing left to train at step 4 of 4).
    let resumed =
        train_with_history(start, &data, &training, &files, &device, &mut |_| {}).unwrap();
    assert_eq!(resumed.resumed_at, 4);
    std::fs::remove_dir_all(&dir).unwrap();
}
