//! Next-token negative log-likelihoods and masked language-modelling losses.

use burn::tensor::{activation::log_softmax, backend::Backend, Bool, Int, Tensor, TensorData};

use crate::model::AuxModel;
use crate::AuxError;

/// How per-token losses are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LossReduction {
    /// Average over the counted targets (HF's `labels` loss).
    #[default]
    Mean,
    /// Sum over the counted targets (the loss TinT's `eta` refers to).
    Sum,
}

/// Which next-token targets of a sequence count in the loss.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LossMask {
    /// Every token after the first: targets `1..seq_length` (predicted from positions `0..seq_length - 1`).
    #[default]
    AllTokens,
    /// `targets[b][j]` says whether token `j` of sequence `b` is a target (predicted from the tokens
    /// before it), like HF `labels != -100`. Shape `[batch_size][seq_length]`; `targets[b][0]` must be
    /// false.
    Targets(Vec<Vec<bool>>),
}

impl LossMask {
    /// Mask over predicting positions `[batch_size, seq_length - 1]` (`true` = counted) and the number
    /// of counted targets.
    pub(crate) fn position_mask(
        &self,
        batch_size: usize,
        seq_length: usize,
    ) -> Result<(Vec<bool>, usize), AuxError> {
        if seq_length < 2 {
            return Err(AuxError::InvalidOption {
                reason: format!("a loss needs at least 2 tokens, got seq_length {seq_length}"),
            });
        }
        let mask = match self {
            LossMask::AllTokens => vec![true; batch_size * (seq_length - 1)],
            LossMask::Targets(targets) => {
                let shape_ok = targets.len() == batch_size
                    && targets.iter().all(|row| row.len() == seq_length);
                if !shape_ok {
                    return Err(AuxError::InvalidOption {
                        reason: format!(
                            "loss mask must be [{batch_size}][{seq_length}], got [{}][{:?}]",
                            targets.len(),
                            targets.iter().map(Vec::len).collect::<Vec<_>>()
                        ),
                    });
                }
                if targets.iter().any(|row| row[0]) {
                    return Err(AuxError::InvalidOption {
                        reason: "token 0 cannot be a target (nothing predicts it)".to_string(),
                    });
                }
                targets
                    .iter()
                    .flat_map(|row| row[1..].iter().copied())
                    .collect()
            }
        };
        let count = mask.iter().filter(|&&m| m).count();
        if count == 0 {
            return Err(AuxError::InvalidOption {
                reason: "the loss mask selects no target".to_string(),
            });
        }
        Ok((mask, count))
    }
}

/// Negative log-likelihood of each next token: `out[b, t] = -log softmax(logits[b, t])[ids[b, t + 1]]`.
///
/// # Shapes
///
/// - logits: `[batch_size, seq_length, vocab_size]`
/// - input_ids: `[batch_size, seq_length]`
/// - output: `[batch_size, seq_length - 1]`
pub fn next_token_nll<B: Backend>(
    logits: Tensor<B, 3>,
    input_ids: Tensor<B, 2, Int>,
) -> Tensor<B, 2> {
    let [batch_size, seq_length, vocab_size] = logits.dims();
    let n_pred = seq_length - 1;
    // [batch_size, seq_length - 1, vocab_size]
    let log_probs = log_softmax(logits.slice([0..batch_size, 0..n_pred, 0..vocab_size]), 2);
    // [batch_size, seq_length - 1, 1]
    let targets = input_ids
        .slice([0..batch_size, 1..seq_length])
        .reshape([batch_size, n_pred, 1]);
    log_probs
        .gather(2, targets)
        .reshape([batch_size, n_pred])
        .neg()
}

/// The language-modelling loss of `model` on `input_ids` over the targets `mask` selects.
///
/// # Shapes
///
/// - input_ids: `[batch_size, seq_length]`
/// - output: `[1]`
///
/// # Errors
///
/// Invalid input ids (see [`AuxModel::forward`]) or a mask of the wrong shape or selecting nothing.
pub fn lm_loss<B: Backend>(
    model: &AuxModel<B>,
    input_ids: Tensor<B, 2, Int>,
    mask: &LossMask,
    reduction: LossReduction,
) -> Result<Tensor<B, 1>, AuxError> {
    let [batch_size, seq_length] = input_ids.dims();
    // The mask is checked before the forward pass.
    mask.position_mask(batch_size, seq_length)?;
    let logits = model.forward(input_ids.clone())?;
    masked_loss_of_logits(logits, input_ids, mask, reduction)
}

/// [`lm_loss`] from the logits of `input_ids` already computed (what a backward pass run block by
/// block reads, [`crate::dyn_eval`]).
///
/// # Shapes
///
/// - logits: `[batch_size, seq_length, vocab_size]`
/// - input_ids: `[batch_size, seq_length]`
/// - output: `[1]`
///
/// # Errors
///
/// A mask of the wrong shape or selecting nothing.
pub(crate) fn masked_loss_of_logits<B: Backend>(
    logits: Tensor<B, 3>,
    input_ids: Tensor<B, 2, Int>,
    mask: &LossMask,
    reduction: LossReduction,
) -> Result<Tensor<B, 1>, AuxError> {
    let [batch_size, seq_length] = input_ids.dims();
    let (counted, count) = mask.position_mask(batch_size, seq_length)?;
    let nll = next_token_nll(logits, input_ids);
    let ignored = Tensor::<B, 2, Bool>::from_data(
        TensorData::new(
            counted.iter().map(|&c| !c).collect::<Vec<_>>(),
            [batch_size, seq_length - 1],
        ),
        &nll.device(),
    );
    let total = nll.mask_fill(ignored, 0.0).sum();
    Ok(match reduction {
        LossReduction::Sum => total,
        LossReduction::Mean => total / count as f64,
    })
}

/// Per-target negative log-likelihoods of tokens `from..seq_length` of each sequence (the evaluation
/// part), as `f64`: `out[b][k]` is the NLL of token `from + k`.
///
/// # Errors
///
/// Invalid input ids, or `from` outside `1..seq_length`.
pub fn continuation_nll<B: Backend>(
    model: &AuxModel<B>,
    input_ids: Tensor<B, 2, Int>,
    from: usize,
) -> Result<Vec<Vec<f64>>, AuxError> {
    let seq_length = input_ids.dims()[1];
    check_from(from, seq_length)?;
    let logits = model.forward(input_ids.clone())?;
    continuation_nll_of_logits(logits, input_ids, from)
}

/// [`continuation_nll`] from logits already computed (e.g. a TinT engine's first pass).
///
/// # Shapes
/// `logits`: `[batch_size, seq_length, vocab_size]`, `input_ids`: `[batch_size, seq_length]` →
/// `batch_size` rows of `seq_length - from` values.
///
/// # Errors
///
/// `from` outside `1..seq_length`, or losses that cannot be read back.
pub fn continuation_nll_of_logits<B: Backend>(
    logits: Tensor<B, 3>,
    input_ids: Tensor<B, 2, Int>,
    from: usize,
) -> Result<Vec<Vec<f64>>, AuxError> {
    let [batch_size, seq_length] = input_ids.dims();
    check_from(from, seq_length)?;
    // [batch_size, seq_length - from]
    let nll = next_token_nll(logits, input_ids).slice([0..batch_size, from - 1..seq_length - 1]);
    let values = nll
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .map_err(|e| AuxError::InvalidOption {
            reason: format!("cannot read losses: {e:?}"),
        })?;
    Ok(values
        .chunks(seq_length - from)
        .map(<[f64]>::to_vec)
        .collect())
}

/// The evaluation part `from..seq_length` must hold at least one target and leave one token of
/// context.
fn check_from(from: usize, seq_length: usize) -> Result<(), AuxError> {
    if from == 0 || from >= seq_length {
        return Err(AuxError::InvalidOption {
            reason: format!("evaluation must start inside 1..{seq_length}, got {from}"),
        });
    }
    Ok(())
}
