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
//! to it (`crates/tint-aux/tests/all/dyn_eval.rs`). A sparse loss mask (padded rows, label
//! words) runs each row only up to its last target, rows of like length together, and the LM
//! head only where a target is predicted.

use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::tensor::activation::log_softmax;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};

use super::block::LlamaBlock;
use super::model::LlamaModel;
use crate::loss::{masked_loss_of_logits, LossMask, LossReduction};
use crate::AuxError;

/// The loss of `model` on `input_ids` and its gradients, one container per backward pass: the
/// loss head's (final norm and LM head, so the tied embedding too), one per block from the top,
/// then the embedding's (when the embedding trains). A parameter's gradient is the sum of what
/// the containers hold for it (two for a tied embedding, one for every other parameter).
///
/// A mask that counts every position runs the batch as it is. A sparser mask (the targets of
/// padded sequences, or label words only) runs only what its targets need: each row up to its
/// last target (the attention is causal, so the positions after it change nothing before it),
/// rows of like length together ([`pieces`]: at most [`MAX_PIECES`] padded lengths, rows without
/// a target left out), and the LM head and its log-softmax only at the positions that predict a
/// target. The loss is the same sum over the same targets, so the gradients are equal to the
/// whole batch's up to float32 summation order (`crates/tint-aux/tests/all/dyn_eval.rs`).
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
    let (counted, count) = mask.position_mask(batch_size, seq_length)?;
    let device = input_ids.device();
    let pieces = if counted.iter().all(|&c| c) {
        vec![Piece {
            ids: input_ids,
            picked: None,
        }]
    } else {
        pieces(&input_ids, &counted, seq_length, &device)?
    };

    // Forward without autodiff, keeping each block's input and the last block's output, per
    // piece: `hidden[piece][layer]`, `[rows, length, d_model]` each, n_layers + 1 per piece.
    let plain = model.valid();
    let mut hidden: Vec<Vec<Tensor<B::InnerBackend, 3>>> = Vec::with_capacity(pieces.len());
    for piece in &pieces {
        let (cos, sin) = plain.rope(piece.ids.dims()[1], &device);
        let mut states = Vec::with_capacity(model.blocks.len() + 1);
        states.push(plain.embedding.forward(piece.ids.clone().inner()));
        for block in &plain.blocks {
            let h = states.last().expect("the embedding output is pushed first");
            states.push(block.forward(h.clone(), cos.clone(), sin.clone()));
        }
        hidden.push(states);
    }

    // The loss head on the last block's output of every piece, in one backward pass.
    let mut passes = Vec::with_capacity(model.blocks.len() + 2);
    let tops: Vec<Tensor<B, 3>> = hidden
        .iter_mut()
        .map(|states| {
            Tensor::<B, 3>::from_inner(states.pop().expect("n_layers + 1 states")).require_grad()
        })
        .collect();
    let parts = pieces
        .iter()
        .zip(&tops)
        .map(|(piece, top)| match &piece.picked {
            None => {
                let logits = model.head(model.final_norm.forward(top.clone()));
                masked_loss_of_logits(logits, piece.ids.clone(), mask, reduction)
            }
            Some(picked) => Ok(picked.nll_sum(model, top.clone())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let loss = parts.into_iter().reduce(|sum, part| sum + part);
    let mut loss = loss.expect("a mask that selects a target leaves at least one piece");
    if pieces.iter().any(|p| p.picked.is_some()) && reduction == LossReduction::Mean {
        loss = loss / count as f64;
    }
    let mut grads = loss.clone().backward();
    let mut upstream: Vec<Option<_>> = tops.iter().map(|t| t.grad_remove(&mut grads)).collect();
    passes.push(grads);

    // Each block, top to bottom: back-propagate `upstream` (the gradient of its output) through
    // it by the surrogate `sum(output ⊙ upstream)` over the pieces, whose gradient with respect
    // to each output is its `upstream` itself; below the lowest block that trains (and no trained
    // embedding) nothing needs a gradient, and the walk stops there, as the whole graph's
    // backward would.
    let embedding_trains = model.embedding.weight.is_require_grad();
    let lowest_needed = if embedding_trains {
        Some(0)
    } else {
        model.blocks.iter().position(any_trainable)
    };
    let ropes: Vec<_> = pieces
        .iter()
        .map(|p| model.rope(p.ids.dims()[1], &device))
        .collect();
    for (layer, block) in model.blocks.iter().enumerate().rev() {
        if lowest_needed.is_none_or(|lowest| layer < lowest) || upstream.iter().all(Option::is_none)
        {
            upstream.iter_mut().for_each(|u| *u = None);
            break;
        }
        let mut inputs = Vec::with_capacity(pieces.len());
        let mut parts = Vec::with_capacity(pieces.len());
        for ((states, gradient), (cos, sin)) in hidden.iter_mut().zip(&mut upstream).zip(&ropes) {
            let input = states.pop().expect("one stored input per block");
            let Some(gradient) = gradient.take() else {
                inputs.push(None);
                continue;
            };
            let input = Tensor::<B, 3>::from_inner(input).require_grad();
            let output = block.forward(input.clone(), cos.clone(), sin.clone());
            parts.push((output * Tensor::from_inner(gradient)).sum());
            inputs.push(Some(input));
        }
        let Some(surrogate) = parts.into_iter().reduce(|sum, part| sum + part) else {
            break;
        };
        let mut grads = surrogate.backward();
        upstream = inputs
            .iter()
            .map(|input| input.as_ref().and_then(|i| i.grad_remove(&mut grads)))
            .collect();
        passes.push(grads);
    }

    // The embedding, when it trains.
    if embedding_trains {
        let surrogate = pieces
            .iter()
            .zip(upstream)
            .filter_map(|(piece, gradient)| {
                let gradient = gradient?;
                let embedded = model.embedding.forward(piece.ids.clone());
                Some((embedded * Tensor::from_inner(gradient)).sum())
            })
            .reduce(|sum, part| sum + part);
        if let Some(surrogate) = surrogate {
            passes.push(surrogate.backward());
        }
    }
    Ok((loss, passes))
}

/// The most padded lengths a batch is split into ([`pieces`]).
pub(crate) const MAX_PIECES: usize = 4;

/// Rows of a batch run together in the block-by-block backward.
struct Piece<B: AutodiffBackend> {
    /// `[rows, length]`: the rows, each cut at the piece's length.
    ids: Tensor<B, 2, Int>,
    /// The positions with a target and their targets; `None`: the whole batch, every position
    /// counted (the loss of [`masked_loss_of_logits`]).
    picked: Option<Picked<B>>,
}

/// The positions of a piece that predict a target, and the targets.
struct Picked<B: AutodiffBackend> {
    /// `[n]`: flat indices `row · length + position` into the piece.
    positions: Tensor<B, 1, Int>,
    /// `[n]`: the token each of them predicts.
    targets: Tensor<B, 1, Int>,
}

impl<B: AutodiffBackend> Picked<B> {
    /// The summed next-token NLL of the picked positions: the final norm, the LM head and its
    /// log-softmax at those positions only.
    ///
    /// # Shapes
    ///
    /// - top: `[rows, length, d_model]` (the last block's output)
    /// - output: `[1]`
    fn nll_sum(&self, model: &LlamaModel<B>, top: Tensor<B, 3>) -> Tensor<B, 1> {
        let [rows, length, d_model] = top.dims();
        let n = self.positions.dims()[0];
        // [1, n, d_model]
        let picked = top
            .reshape([rows * length, d_model])
            .select(0, self.positions.clone())
            .reshape([1, n, d_model]);
        // [1, n, vocab_size]
        let log_probs = log_softmax(model.head(model.final_norm.forward(picked)), 2);
        log_probs
            .gather(2, self.targets.clone().reshape([1, n, 1]))
            .sum()
            .neg()
    }
}

/// Splits a batch whose mask leaves positions out into pieces of rows of like length: each row
/// needs its positions up to its last counted one (`counted[row · (seq_length − 1) + p]`: position
/// `p` predicts a counted target, token `p + 1`); rows without one are left out; rows sorted by
/// that length are cut into at most [`MAX_PIECES`] runs with the fewest padded positions in all.
fn pieces<B: AutodiffBackend>(
    input_ids: &Tensor<B, 2, Int>,
    counted: &[bool],
    seq_length: usize,
    device: &B::Device,
) -> Result<Vec<Piece<B>>, AuxError> {
    let ids = input_ids
        .to_data()
        .convert::<i64>()
        .to_vec::<i64>()
        .map_err(|e| AuxError::InvalidOption {
            reason: format!("the input ids cannot be read back: {e:?}"),
        })?;
    let n_pred = seq_length - 1;
    // (length needed, row) of every row with a target, shortest first.
    let mut rows: Vec<(usize, usize)> = counted
        .chunks(n_pred)
        .enumerate()
        .filter_map(|(row, c)| c.iter().rposition(|&x| x).map(|last| (last + 1, row)))
        .collect();
    rows.sort_unstable();
    let lengths: Vec<usize> = rows.iter().map(|&(l, _)| l).collect();
    let mut pieces = Vec::new();
    let mut begin = 0;
    for end in fewest_padded_cuts(&lengths, MAX_PIECES) {
        let length = lengths[end - 1];
        let members = &rows[begin..end];
        let mut piece_ids = Vec::with_capacity(members.len() * length);
        let (mut positions, mut targets) = (Vec::new(), Vec::new());
        for (i, &(_, row)) in members.iter().enumerate() {
            let source = &ids[row * seq_length..(row + 1) * seq_length];
            piece_ids.extend_from_slice(&source[..length]);
            for p in 0..length {
                if counted[row * n_pred + p] {
                    positions.push((i * length + p) as i64);
                    targets.push(source[p + 1]);
                }
            }
        }
        let n = positions.len();
        let int = |values: Vec<i64>, shape: Vec<usize>| {
            Tensor::<B, 1, Int>::from_data(TensorData::new(values, shape), device)
        };
        pieces.push(Piece {
            ids: Tensor::from_data(TensorData::new(piece_ids, [members.len(), length]), device),
            picked: Some(Picked {
                positions: int(positions, vec![n]),
                targets: int(targets, vec![n]),
            }),
        });
        begin = end;
    }
    Ok(pieces)
}

/// Where to cut `lengths` (sorted ascending) into at most `max_runs` runs so that the padded
/// positions `Σ run's rows × its last length` are fewest: the end index of every run (the last
/// is `lengths.len()`; none for no lengths).
pub(crate) fn fewest_padded_cuts(lengths: &[usize], max_runs: usize) -> Vec<usize> {
    let n = lengths.len();
    if n == 0 {
        return Vec::new();
    }
    let runs = max_runs.clamp(1, n);
    // cost[r][e]: fewest padded positions of lengths[..e] in r + 1 runs; from[r][e]: where the
    // last run begins.
    let mut cost = vec![vec![usize::MAX; n + 1]; runs];
    let mut from = vec![vec![0; n + 1]; runs];
    for e in 1..=n {
        cost[0][e] = e * lengths[e - 1];
    }
    for r in 1..runs {
        for e in 1..=n {
            for b in r..e {
                let c = cost[r - 1][b].saturating_add((e - b) * lengths[e - 1]);
                if c < cost[r][e] {
                    cost[r][e] = c;
                    from[r][e] = b;
                }
            }
        }
    }
    // Fewer runs where they pad no more (ties keep the fewest).
    let best = (0..runs)
        .min_by_key(|&r| cost[r][n])
        .expect("at least one run");
    let mut cuts = vec![n];
    let (mut r, mut e) = (best, n);
    while r > 0 {
        e = from[r][e];
        cuts.push(e);
        r -= 1;
    }
    cuts.reverse();
    cuts
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

#[cfg(test)]
mod tests {
    use super::fewest_padded_cuts;

    #[test]
    fn rows_are_cut_where_the_padding_is_least() {
        // One length: one run.
        assert_eq!(fewest_padded_cuts(&[5, 5, 5], 4), vec![3]);
        // Two clusters in two runs: 2·3 + 2·9 = 24 instead of 4·9 = 36.
        assert_eq!(fewest_padded_cuts(&[2, 3, 8, 9], 2), vec![2, 4]);
        // Four runs: no padding.
        assert_eq!(fewest_padded_cuts(&[2, 3, 8, 9], 4), vec![1, 2, 3, 4]);
        // At most one run: the whole batch.
        assert_eq!(fewest_padded_cuts(&[1, 2, 8, 9], 1), vec![4]);
        // Every length its own run when allowed.
        assert_eq!(fewest_padded_cuts(&[1, 2, 3], 3), vec![1, 2, 3]);
        assert!(fewest_padded_cuts(&[], 4).is_empty());
    }
}
