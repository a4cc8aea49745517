//! Train a Contextually Guided Transformer briefly and fold a prompt into its weights, as a library
//! user does: the smallest preset (`icl-tiny`, in-context arithmetic) trains for a few steps with the
//! full objective (auxiliary loss and regularisers); then the context summary `y` of a prompt (the
//! first examples of a task) is frozen at the prompt's last token and folded into the later layers
//! (`CgtModel::specialise`), giving a plain transformer without the `y` stream. Its logits must
//! equal those of the CGT model run with that frozen `y`, on the whole sequence and with the prompt
//! hidden (the specialised model answers the query alone).
//!
//! ```sh
//! cargo run -p tint-cgt --example fold_prompt
//! ```
//!
//! Checkpoint and loss log go to a temporary directory, removed at the end. It exits with an error
//! if the folded model and the frozen-`y` model differ beyond the float32 tolerance below.
#![allow(clippy::print_stdout)] // the example reports on the terminal

use std::path::Path;

use burn::backend::{Autodiff, Flex};
use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Tensor};
use tint_cgt::data::{ArithmeticVocab, BatchSource, HostBatch};
use tint_cgt::loss::{task_loss, TargetTensor};
use tint_cgt::presets::{DataPreset, ExperimentPreset, Variant};
use tint_cgt::train::{inference_model, train_with_history, RunFiles};
use tint_cgt::CgtModel;

/// Folded vs frozen-`y` logits, f32: folding only reorders sums (bound of tests/all/model.rs; seen 4e-7).
const FOLD_TOL: f32 = 1e-4;

/// Optimiser steps: enough for the loss to fall, a few seconds on two cores.
const STEPS: usize = 40;

/// A batch of the data stream that training (steps `0..STEPS`) never sees.
const HELD_OUT_STEP: u64 = 1_000_000;

/// Mean next-token loss of `model` on `batch`.
fn loss<B: Backend>(
    model: &CgtModel<B>,
    batch: &HostBatch,
    device: &B::Device,
) -> Result<f32, Box<dyn std::error::Error>> {
    let logits = model.forward(&batch.input_tensor(device))?.logits;
    let targets = TargetTensor::from_batch(batch, device);
    Ok(task_loss(logits, &targets, batch.mask_tensor(device))
        .into_scalar()
        .elem())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("tint-cgt-fold-prompt-{}", std::process::id()));
    // A leftover checkpoint of another run would be resumed from: start clean.
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let result = run(&dir);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    result
}

fn run(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let preset = ExperimentPreset::by_name("icl-tiny")?;
    let DataPreset::Arithmetic(data) = &preset.data else {
        return Err("icl-tiny trains on arithmetic".into());
    };
    let variant = Variant::CgtAuxReg;
    let mut training = preset.training_for(variant);
    training.steps = STEPS;

    let device = Default::default();
    Flex::seed(&device, 0); // the same initial weights on every run
    let model = CgtModel::<Autodiff<Flex>>::new(&preset.model_for(variant), &device)?;
    let held_out = data.batch(HELD_OUT_STEP);
    let before = loss(&inference_model(&model), &held_out, &device)?;

    let files = RunFiles {
        checkpoint_dir: Some(dir.join("checkpoint")),
        log_path: Some(dir.join("log.jsonl")),
    };
    let outcome = train_with_history(model, data, &training, &files, &device, &mut |_| {})?;
    let model = inference_model(&outcome.model);
    let after = loss(&model, &held_out, &device)?;
    let (first, last) = match (outcome.history.first(), outcome.history.last()) {
        (Some(first), Some(last)) => (first.terms.task, last.terms.task),
        _ => return Err("training logged no step".into()),
    };
    println!(
        "{} ({}), {STEPS} steps: training batch loss {first:.3} -> {last:.3}, held-out NLL \
         {before:.3} -> {after:.3}",
        preset.name,
        variant.title()
    );

    // The prompt: the first task's examples but the last; the query: that last example.
    let (batch, sequences) = data.annotated_batch(HELD_OUT_STEP);
    let batch = batch.rows(0..1)?;
    let examples = &sequences[0].tasks[0].examples;
    let query = examples.last().ok_or("a task without examples")?;
    let tokens = &sequences[0].tokens;
    println!(
        "prompt {:?}, query {:?}",
        ArithmeticVocab::decode(&tokens[..query.start]),
        ArithmeticVocab::decode(&tokens[query.start..query.end])
    );

    // y at the prompt's last token, [1, 1, d_y], folded into a plain model.
    let input = batch.input_tensor(&device);
    let y = model.context(&input)?.mean.narrow(1, query.start - 1, 1);
    let d_y = y.dims()[2];
    let folded = model.specialise(y.clone().reshape([d_y]))?;

    // Whole sequence, and the query alone (the prompt hidden from attention).
    let frozen = model.forward_x_path(&input, Some(y.clone()), None)?;
    let plain = folded.forward(&input)?.logits;
    let gap = max_abs_diff(frozen, plain);
    let frozen_query = model.forward_x_path(&input, Some(y), Some(&[query.start]))?;
    let plain_query = folded.forward_x_path(&input, None, Some(&[query.start]))?;
    let gap_query = max_abs_diff(frozen_query, plain_query);
    println!(
        "specialised model ({} plain layers, y of d_y = {d_y} folded in): logits differ from the \
         frozen-y CGT by {gap:.1e} (whole sequence), {gap_query:.1e} (prompt hidden); tolerance \
         {FOLD_TOL:.0e}",
        folded.upper.len()
    );

    let worst = gap.max(gap_query);
    if worst > FOLD_TOL {
        return Err(format!("folded and frozen-y logits differ by {worst} > {FOLD_TOL}").into());
    }
    Ok(())
}

/// Largest absolute difference of two logit tensors.
fn max_abs_diff(a: Tensor<Flex, 3>, b: Tensor<Flex, 3>) -> f32 {
    (a - b).abs().max().into_scalar()
}
