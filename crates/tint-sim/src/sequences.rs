//! Sequence-parallel execution of a TinT step on CPU backends.
//!
//! The sequences of a batch are independent in TinT: each gets its own simulated update (its own
//! copy of the prefix weights, its own loss gradient; the paper, §2, and docs/construction.md §9),
//! so a batch's outputs are the concatenation of its sequences' outputs. On burn-flex most of a
//! step is element-wise work that runs on one thread (only the larger products use every core), so
//! a batch of `B` sequences run one after the other in one op stream leaves cores idle; running its
//! sequences as separate rayon tasks fills them (docs/performance.md, "Sequences in parallel"). On a
//! GPU backend one batched kernel per op is the better form, and the batch is run as it is.

use burn::tensor::backend::Backend;
use rayon::prelude::*;

use crate::error::SimError;
use crate::input::SimInput;
use crate::loss::EvalLoss;
use crate::reference::SimOutput;

/// Whether a step on `B` runs the sequences of a batch as parallel tasks: on CPU backends (flex,
/// ndarray: element-wise kernels on one thread) when rayon has more than one thread; never on GPU
/// backends. Decided by the backend's name (`flex`, `autodiff<flex>`, `ndarray`).
pub fn runs_sequences_in_parallel<B: Backend>(device: &B::Device) -> bool {
    let name = B::name(device);
    (name.contains("flex") || name.contains("ndarray")) && rayon::current_num_threads() > 1
}

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

/// Runs `step` on each sequence of `input` as its own rayon task and concatenates the outputs, when
/// the batch has more than one sequence and [`runs_sequences_in_parallel`] holds for its device;
/// `Ok(None)` otherwise (the caller runs the batch as it is). `step` must treat a batch of one as
/// it treats any batch (every engine's `forward` does; each is called here with one sequence, so
/// it does not come back here).
///
/// # Errors
/// The first error of a sequence's step, in sequence order.
pub fn forward_in_parallel<B, F>(
    input: &SimInput<B>,
    step: F,
) -> Result<Option<SimOutput<B>>, SimError>
where
    B: Backend,
    F: Fn(&SimInput<B>) -> Result<SimOutput<B>, SimError> + Sync,
{
    let [batch_size, _] = input.dims();
    if batch_size < 2 || !runs_sequences_in_parallel::<B>(&input.input_ids.device()) {
        return Ok(None);
    }
    let outputs = (0..batch_size)
        .into_par_iter()
        .map(|b| step(&sequence(input, b)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(concat_outputs(outputs)))
}
