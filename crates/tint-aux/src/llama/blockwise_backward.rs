//! The gradient of a language-modelling loss computed one block at a time (activation
//! recomputation): a forward pass without autodiff keeps only each block's input, then the loss
//! head and every block, top to bottom, are run again with autodiff from their stored input and
//! back-propagated alone, each passing the gradient of its input down to the block below.
//!
//! The whole-graph backward keeps every block's intermediates at once, among them each layer's
//! `[batch_size, n_heads, seq_length, seq_length]` attention scores and probabilities: about 24 GB
//! for SmolLM2-135M over 2,048 positions, more than a 23 GB machine has. Block by block, the peak
//! is one block's intermediates and the loss head's logits, at the price of a second forward pass
//! (about a third more compute). The operations are the whole graph's, so the gradients are equal
//! to it (`crates/tint-aux/tests/all/dyn_eval.rs`).

use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};

use super::block::LlamaBlock;
use super::model::LlamaModel;
use crate::loss::{masked_loss_of_logits, LossMask, LossReduction};
use crate::AuxError;

/// The loss of `model` on `input_ids` and its gradients, one container per backward pass: the
/// loss head's (final norm and LM head, so the tied embedding too), one per block from the top,
/// then the embedding's (when the embedding trains). A parameter's gradient is the sum of what
/// the containers hold for it (two for a tied embedding, one for every other parameter).
///
/// Parameters to train must be marked (`require_grad`) and the others detached, as for the
/// whole-graph backward.
///
/// # Shapes
///
/// - input_ids: `[batch_size, seq_length]`
///
/// # Errors
///
/// Invalid input ids and a loss mask of the wrong shape or selecting nothing.
pub(crate) fn blockwise_loss_and_gradients<B: AutodiffBackend>(
    model: &LlamaModel<B>,
    input_ids: Tensor<B, 2, Int>,
    mask: &LossMask,
    reduction: LossReduction,
) -> Result<(Tensor<B, 1>, Vec<B::Gradients>), AuxError> {
    model.validate_input(&input_ids)?;
    let [batch_size, seq_length] = input_ids.dims();
    // Checked before any pass.
    mask.position_mask(batch_size, seq_length)?;
    let device = input_ids.device();

    // Forward without autodiff, keeping each block's input and the last block's output.
    let plain = model.valid();
    let (cos, sin) = plain.rope(seq_length, &device);
    // [batch_size, seq_length, d_model] each, n_layers + 1 of them
    let mut hidden = Vec::with_capacity(model.blocks.len() + 1);
    hidden.push(plain.embedding.forward(input_ids.clone().inner()));
    for block in &plain.blocks {
        let h = hidden.last().expect("the embedding output is pushed first");
        hidden.push(block.forward(h.clone(), cos.clone(), sin.clone()));
    }

    // The loss head on the last block's output.
    let mut passes = Vec::with_capacity(model.blocks.len() + 2);
    let top = Tensor::<B, 3>::from_inner(hidden.pop().expect("n_layers + 1 states")).require_grad();
    let logits = model.head(model.final_norm.forward(top.clone()));
    let loss = masked_loss_of_logits(logits, input_ids.clone(), mask, reduction)?;
    let mut grads = loss.clone().backward();
    let mut upstream = top.grad_remove(&mut grads);
    passes.push(grads);

    // Each block, top to bottom: back-propagate `upstream` (the gradient of its output) through
    // it by the surrogate `sum(output ⊙ upstream)`, whose gradient with respect to the output is
    // `upstream` itself; below the lowest block that trains (and no trained embedding) nothing
    // needs a gradient, and the walk stops there, as the whole graph's backward would.
    let embedding_trains = model.embedding.weight.is_require_grad();
    let lowest_needed = if embedding_trains {
        Some(0)
    } else {
        model.blocks.iter().position(any_trainable)
    };
    let (cos, sin) = model.rope(seq_length, &device);
    for (layer, block) in model.blocks.iter().enumerate().rev() {
        if lowest_needed.is_none_or(|lowest| layer < lowest) {
            upstream = None;
            break;
        }
        let Some(gradient) = upstream else { break };
        let input = hidden.pop().expect("one stored input per block");
        let input = Tensor::<B, 3>::from_inner(input).require_grad();
        let output = block.forward(input.clone(), cos.clone(), sin.clone());
        let surrogate = (output * Tensor::from_inner(gradient)).sum();
        let mut grads = surrogate.backward();
        upstream = input.grad_remove(&mut grads);
        passes.push(grads);
    }

    // The embedding, when it trains.
    if let (Some(gradient), true) = (upstream, embedding_trains) {
        let embedded = model.embedding.forward(input_ids);
        passes.push((embedded * Tensor::from_inner(gradient)).sum().backward());
    }
    Ok((loss, passes))
}

/// Whether any parameter of `block` is marked to train.
fn any_trainable<B: AutodiffBackend>(block: &LlamaBlock<B>) -> bool {
    struct Trainable(bool);
    impl<B: Backend> ModuleVisitor<B> for Trainable {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0 |= param.is_require_grad();
        }
    }
    let mut visitor = Trainable(false);
    block.visit(&mut visitor);
    visitor.0
}
