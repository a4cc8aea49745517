//! The loss gradient fed to the simulated backward pass (docs/construction.md §7) and the evaluation loss.

use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{IndexingUpdateOp, Int, Tensor, TensorData};

use crate::step_config::LossGradientKind;

/// `dL/dh` of the summed next-token loss at the final hidden state `hf`, approximated by `kind`:
/// `pred_t - E[id_{t+1}]`, multiplied by `next_target` (1 where target `t + 1` is a training token).
///
/// # Shapes
/// `hf`: `[batch_size, seq_length, d_model]`, `token_embedding` `E`: `[vocab_size, d_model]`,
/// `input_ids`: `[batch_size, seq_length]`, `next_target`: `[batch_size, seq_length, 1]`
/// → `[batch_size, seq_length, d_model]`.
pub fn loss_gradient<B: Backend>(
    hf: Tensor<B, 3>,
    token_embedding: &Tensor<B, 2>,
    input_ids: &Tensor<B, 2, Int>,
    next_target: &Tensor<B, 3>,
    kind: LossGradientKind,
) -> Tensor<B, 3> {
    loss_gradient_with_logits(hf, None, token_embedding, input_ids, next_target, kind)
}

/// [`loss_gradient`] with the logits `hf E^T` given when the caller already has them (the
/// functional reference's forward pass computed them): the same values without the `T D V`
/// product again.
///
/// # Shapes
/// As [`loss_gradient`]; `logits`: `[batch_size, seq_length, vocab_size]`.
pub fn loss_gradient_with_logits<B: Backend>(
    hf: Tensor<B, 3>,
    logits: Option<Tensor<B, 3>>,
    token_embedding: &Tensor<B, 2>,
    input_ids: &Tensor<B, 2, Int>,
    next_target: &Tensor<B, 3>,
    kind: LossGradientKind,
) -> Tensor<B, 3> {
    let [batch_size, seq_length, d_model] = hf.dims();
    let device = hf.device();
    let dtype = hf.dtype();
    let n = batch_size * seq_length;
    // Only the rows with a nonzero `next_target` are computed (every other row of the result is
    // 0): flat row `r = b T + t`. Each row's formula is unchanged; the matrix products may sum in
    // another order for another row count (rounding only). The target of row `r` is token
    // `r + 1`; the last position of a sequence has none (its target embedding is 0 and nothing is
    // removed from its prediction).
    let weights: Vec<f64> = next_target
        .to_data()
        .convert::<f64>()
        .to_vec()
        .unwrap_or_default();
    let rows: Vec<usize> = (0..n)
        .filter(|&r| weights.get(r).is_some_and(|&w| w != 0.0))
        .collect();
    if rows.is_empty() {
        return Tensor::zeros([batch_size, seq_length, d_model], (&device, dtype));
    }
    let n_rows = rows.len();
    let has_next: Vec<bool> = rows
        .iter()
        .map(|r| r % seq_length + 1 < seq_length)
        .collect();
    let index = |values: Vec<i64>| {
        Tensor::<B, 1, Int>::from_data(TensorData::new(values, [n_rows]), &device)
    };
    let row_index = index(rows.iter().map(|&r| r as i64).collect());
    // Rows without a next token read their own id (any valid one): its entries are zeroed below.
    let next_index = index(
        rows.iter()
            .zip(&has_next)
            .map(|(&r, &next)| (if next { r + 1 } else { r }) as i64)
            .collect(),
    );
    let has_next = Tensor::<B, 1>::from_data(
        TensorData::new(
            has_next
                .iter()
                .map(|&next| if next { 1.0f32 } else { 0.0 })
                .collect::<Vec<_>>(),
            [n_rows],
        ),
        &device,
    )
    .cast(dtype)
    .reshape([1, n_rows, 1]);
    let take = |t: Tensor<B, 3>| {
        let width = t.dims()[2];
        t.reshape([n, width])
            .select(0, row_index.clone())
            .unsqueeze_dim::<3>(0)
    };
    let hf = take(hf);
    let logits = logits.map(take);
    let next_ids = input_ids.clone().reshape([n]).select(0, next_index);
    let target = token_embedding
        .clone()
        .select(0, next_ids.clone())
        .unsqueeze_dim::<3>(0)
        * has_next.clone(); // [1, n_rows, d_model]
    let embedding = token_embedding.clone().unsqueeze_dim::<3>(0); // [1, vocab_size, d_model]
    let logits = |hf: Tensor<B, 3>| logits.unwrap_or_else(|| head_logits(hf, token_embedding));
    let gradient = match kind {
        LossGradientKind::Prediction => prediction_minus_target(
            softmax(logits(hf), 2),
            &embedding,
            next_ids.reshape([1, n_rows, 1]),
            has_next,
            target,
        ),
        LossGradientKind::Quadratic => logits(hf).matmul(embedding.clone()) - target,
        LossGradientKind::MeanEmbedding => {
            embedding.mean_dim(1).expand([1, n_rows, d_model]) - target
        }
    };
    let gradient = (gradient * take(next_target.clone())).reshape([n_rows, d_model]);
    Tensor::<B, 2>::zeros([n, d_model], (&device, dtype))
        .select_assign(0, row_index, gradient, IndexingUpdateOp::Add)
        .reshape([batch_size, seq_length, d_model])
}

/// Logits `hf Hᵀ` of final hidden states against the LM head's `[vocab_size, d_model]` rows.
///
/// The head gets its batch axis before the transposed view: flex cannot add an axis to a
/// transposed view without copying it (the whole head, on every call), while its matmul reads the
/// strided operand as it is.
///
/// # Shapes
/// `hf`: `[batch_size, rows, d_model]`, `head_rows`: `[vocab_size, d_model]` →
/// `[batch_size, rows, vocab_size]`.
pub(crate) fn head_logits<B: Backend>(hf: Tensor<B, 3>, head_rows: &Tensor<B, 2>) -> Tensor<B, 3> {
    hf.matmul(head_rows.clone().unsqueeze_dim::<3>(0).transpose())
}

/// `p E − E[y]` for softmax rows `p` and next tokens `y`, evaluated without cancellation.
///
/// Written literally, `p E` is a sum over the vocabulary dominated by `p_y E[y]` when the model is
/// confident (`p_y → 1`), and subtracting `E[y]` cancels it: the float32 rounding of the
/// `vocab_size`-term product, of the size of `|E[y]|`, survives in a difference of the size of
/// `(1 − p_y) |E[y]|`. On SmolLM2 this was the largest float32 error of the whole simulated step
/// (docs/tint-llama.md, "Float32 numerics"). The same quantity, since `Σ_v p_v = 1`, is
/// `Σ_{v≠y} p_v E[v] − (Σ_{v≠y} p_v) E[y]`: every term is small, so every rounding is relative to the
/// result. The target entry is removed exactly (`p_y + (−p_y) = 0`); a row without a next token
/// (`has_next` 0, its `target` row 0) keeps `p E`.
///
/// # Shapes
/// `probs`: `[batch_size, rows, vocab_size]`, `embedding`: `[1, vocab_size, d_model]`,
/// `next_ids`: `[batch_size, rows, 1]`, `has_next`: `[batch_size, rows, 1]` (1 or 0), `target`
/// (`E[y]`, 0 where there is no next token): `[batch_size, rows, d_model]` →
/// `[batch_size, rows, d_model]`.
fn prediction_minus_target<B: Backend>(
    probs: Tensor<B, 3>,
    embedding: &Tensor<B, 3>,
    next_ids: Tensor<B, 3, Int>,
    has_next: Tensor<B, 3>,
    target: Tensor<B, 3>,
) -> Tensor<B, 3> {
    let target_prob = probs.clone().gather(2, next_ids.clone()) * has_next;
    let others = probs.scatter(2, next_ids, target_prob.neg(), IndexingUpdateOp::Add);
    let others_mass = others.clone().sum_dim(2); // Σ_{v≠y} p_v, [batch_size, rows, 1]
    others.matmul(embedding.clone()) - target * others_mass
}

/// Next-token cross-entropy on the evaluation part of each sequence.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalLoss {
    /// Summed negative log-likelihood per sequence.
    pub nll_sum: Vec<f64>,
    /// Number of scored targets per sequence.
    pub n_targets: Vec<usize>,
}

impl EvalLoss {
    /// Mean negative log-likelihood over all scored targets of the batch (NaN if there are none).
    pub fn mean(&self) -> f64 {
        let n: usize = self.n_targets.iter().sum();
        self.nll_sum.iter().sum::<f64>() / n as f64
    }

    /// Appends the sequences of `other` after those of `self` (the loss of a batch from the losses
    /// of its parts).
    pub fn append(&mut self, other: Self) {
        self.nll_sum.extend(other.nll_sum);
        self.n_targets.extend(other.n_targets);
    }
}

/// Cross-entropy of the logits at position `t` against token `t + 1`, scored where `scored[b][t]`.
///
/// # Shapes
/// `logits`: `[batch_size, seq_length, vocab_size]`, `input_ids`: `[batch_size, seq_length]`;
/// `scored`: `batch_size` rows of `seq_length - 1` flags.
pub fn eval_loss<B: Backend>(
    logits: Tensor<B, 3>,
    input_ids: &Tensor<B, 2, Int>,
    scored: &[Vec<bool>],
) -> EvalLoss {
    let [batch_size, seq_length, vocab_size] = logits.dims();
    // Only the scored rows: flat row `b T + t` against token `t + 1` of sequence `b`.
    let (mut rows, mut owner) = (Vec::new(), Vec::new());
    for (b, flags) in scored.iter().enumerate().take(batch_size) {
        for (t, _) in flags
            .iter()
            .enumerate()
            .take(seq_length - 1)
            .filter(|(_, &s)| s)
        {
            rows.push((b * seq_length + t) as i64);
            owner.push(b);
        }
    }
    let mut nll_sum = vec![0.0; batch_size];
    let mut n_targets = vec![0; batch_size];
    if rows.is_empty() {
        return EvalLoss { nll_sum, n_targets };
    }
    let device = input_ids.device();
    let n_rows = rows.len();
    let row_index = Tensor::<B, 1, Int>::from_data(TensorData::new(rows, [n_rows]), &device);
    let target_index = row_index.clone().add_scalar(1);
    let logits = logits
        .reshape([batch_size * seq_length, vocab_size])
        .select(0, row_index);
    let targets = input_ids
        .clone()
        .reshape([batch_size * seq_length])
        .select(0, target_index)
        .reshape([n_rows, 1]);
    // The log-softmax at the target only: `(x_t - max) - log Σ exp(x - max)`, the arithmetic of
    // burn's `log_softmax` at that entry without its full-size last subtraction; each row's
    // reductions run over its own vocabulary entries only.
    let shifted = logits.clone() - logits.max_dim(1);
    let log_sum_exp = shifted.clone().exp().sum_dim(1).log();
    let picked: Vec<f64> = (shifted.gather(1, targets) - log_sum_exp)
        .into_data()
        .convert::<f64>()
        .to_vec()
        .unwrap_or_default();
    for (&b, value) in owner.iter().zip(&picked) {
        nll_sum[b] -= value;
        n_targets[b] += 1;
    }
    EvalLoss { nll_sum, n_targets }
}
