//! Sequence-parallel execution of a TinT step on CPU backends.
//!
//! The sequences of a batch are independent in TinT: each gets its own simulated update (its own
//! copy of the prefix weights, its own loss gradient; the paper, §2, and docs/construction.md §9),
//! so a batch's outputs are the concatenation of its sequences' outputs. On CPU backends they run
//! as parallel tasks ([`tint_ops::branches`]); on a GPU backend one batched kernel per op is the
//! better form, and the batch is run as it is.

use burn::tensor::backend::Backend;

use crate::error::SimError;
use crate::input::SimInput;
use crate::loss::EvalLoss;
use crate::output::SimOutput;
use tint_ops::branches::{map_in_order, on_worker, runs_in_parallel};

/// Sequence `b` of `input` as a batch of one.
///
/// # Shapes
/// `input.input_ids`: `[batch_size, seq_length]` → `[1, seq_length]` (each mask likewise)
pub fn sequence<B: Backend>(input: &SimInput<B>, b: usize) -> SimInput<B> {
    SimInput {
        input_ids: input.input_ids.clone().narrow(0, b, 1),
        train_mask: input.train_mask.clone().narrow(0, b, 1),
        gradient_mask: input.gradient_mask.clone().map(|m| m.narrow(0, b, 1)),
        icl_mask: input.icl_mask.clone().map(|m| m.narrow(0, b, 1)),
    }
}

/// The outputs of single sequences as the output of their batch, in order: logits concatenated
/// along the batch axis, per-sequence losses appended.
///
/// # Shapes
/// each `first_logits` / `final_logits`: `[1, seq_length, vocab_size]` → `[n, seq_length,
/// vocab_size]`
pub fn concat_outputs<B: Backend>(outputs: Vec<SimOutput<B>>) -> SimOutput<B> {
    let mut first_logits = Vec::with_capacity(outputs.len());
    let mut final_logits = Vec::with_capacity(outputs.len());
    let mut first_loss = EvalLoss::default();
    let mut final_loss = EvalLoss::default();
    for out in outputs {
        first_logits.push(out.first_logits);
        final_logits.push(out.final_logits);
        first_loss.append(out.first_loss);
        final_loss.append(out.final_loss);
    }
    SimOutput {
        first_logits: burn::tensor::Tensor::cat(first_logits, 0),
        final_logits: burn::tensor::Tensor::cat(final_logits, 0),
        first_loss,
        final_loss,
    }
}

/// `step(input)`, the engine's forward on validated input. On CPU backends
/// ([`runs_in_parallel`]) the sequences of a batch run as their own rayon tasks and their outputs
/// are concatenated, and a single sequence called from outside the rayon pool runs inside it
/// ([`on_worker`]), so that the branches of the step ([`tint_ops::branches`]) are forked from a
/// worker thread (a cheap local task) instead of being injected into the pool from outside (a
/// wake-up and a blocking wait each). Elsewhere (a GPU backend) `step` runs on the whole batch.
/// `input` must have passed the engine's validation (so every mask has the batch size of the ids).
///
/// # Errors
/// The first error of a sequence's step, in sequence order.
pub fn forward_in_parallel<B, F>(input: &SimInput<B>, step: F) -> Result<SimOutput<B>, SimError>
where
    B: Backend,
    F: Fn(&SimInput<B>) -> Result<SimOutput<B>, SimError> + Sync + Send,
{
    let [batch_size, _] = input.dims();
    let device = input.input_ids.device();
    if batch_size < 2 {
        return on_worker::<B, _, _>(&device, || step(input));
    }
    if !runs_in_parallel::<B>(&device) {
        return step(input);
    }
    let outputs = map_in_order::<B, _, _>(&device, batch_size, |b| step(&sequence(input, b)))
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    Ok(concat_outputs(outputs))
}
