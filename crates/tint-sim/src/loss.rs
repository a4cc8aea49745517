//! The loss gradient fed to the simulated backward pass (docs/construction.md §7) and the evaluation loss.

use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{IndexingUpdateOp, Int, Tensor};

use crate::config::LossGradientKind;

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
    let embedding = token_embedding.clone().unsqueeze_dim::<3>(0); // [1, vocab_size, d_model]
    let logits =
        |hf: Tensor<B, 3>| logits.unwrap_or_else(|| hf.matmul(embedding.clone().swap_dims(1, 2)));
    // Target of position t is token t + 1; the last position has none (its target embedding is 0).
    let next_ids = input_ids.clone().slice([0..batch_size, 1..seq_length]);
    let next_embedding = token_embedding
        .clone()
        .select(0, next_ids.clone().reshape([batch_size * (seq_length - 1)]))
        .reshape([batch_size, seq_length - 1, d_model]);
    let target = Tensor::cat(
        vec![
            next_embedding,
            Tensor::zeros([batch_size, 1, d_model], (&device, dtype)),
        ],
        1,
    );
    let gradient = match kind {
        LossGradientKind::Prediction => {
            prediction_minus_target(softmax(logits(hf), 2), &embedding, next_ids, target)
        }
        LossGradientKind::Quadratic => logits(hf).matmul(embedding.clone()) - target,
        LossGradientKind::MeanEmbedding => {
            embedding
                .mean_dim(1)
                .expand([batch_size, seq_length, d_model])
                - target
        }
    };
    gradient * next_target.clone()
}

/// `p E − E[y]` for softmax rows `p` and next tokens `y`, evaluated without cancellation.
///
/// Written literally, `p E` is a sum over the vocabulary dominated by `p_y E[y]` when the model is
/// confident (`p_y → 1`), and subtracting `E[y]` cancels it: the float32 rounding of the
/// `vocab_size`-term product, of the size of `|E[y]|`, survives in a difference of the size of
/// `(1 − p_y) |E[y]|`. On SmolLM2 this was the largest float32 error of the whole simulated step
/// (docs/tint-llama.md, "Float32 numerics"). The same quantity, since `Σ_v p_v = 1`, is
/// `Σ_{v≠y} p_v E[v] − (Σ_{v≠y} p_v) E[y]`: every term is small, so every rounding is relative to the
/// result. The target entry is removed exactly (`p_y + (−p_y) = 0`); the last position, which has no
/// next token, keeps `p E` (its `target` row is 0).
///
/// # Shapes
/// `probs`: `[batch_size, seq_length, vocab_size]`, `embedding`: `[1, vocab_size, d_model]`,
/// `next_ids`: `[batch_size, seq_length − 1]`, `target` (`E[y]`, last row 0):
/// `[batch_size, seq_length, d_model]` → `[batch_size, seq_length, d_model]`.
fn prediction_minus_target<B: Backend>(
    probs: Tensor<B, 3>,
    embedding: &Tensor<B, 3>,
    next_ids: Tensor<B, 2, Int>,
    target: Tensor<B, 3>,
) -> Tensor<B, 3> {
    let [batch_size, seq_length, _] = probs.dims();
    let device = probs.device();
    // Index of each row's target, [batch_size, seq_length, 1]; the last row takes index 0 with a
    // removed probability of 0, which leaves its row unchanged.
    let index = Tensor::cat(
        vec![
            next_ids,
            Tensor::<B, 2, Int>::zeros([batch_size, 1], &device),
        ],
        1,
    )
    .unsqueeze_dim::<3>(2);
    let has_next = Tensor::cat(
        vec![
            Tensor::<B, 3>::ones([batch_size, seq_length - 1, 1], (&device, probs.dtype())),
            Tensor::zeros([batch_size, 1, 1], (&device, probs.dtype())),
        ],
        1,
    );
    let target_prob = probs.clone().gather(2, index.clone()) * has_next;
    let others = probs.scatter(2, index, target_prob.neg(), IndexingUpdateOp::Add);
    let others_mass = others.clone().sum_dim(2); // Σ_{v≠y} p_v, [batch_size, seq_length, 1]
    others.matmul(embedding.clone()) - target * others_mass
}

/// Next-token cross-entropy on the evaluation part of each sequence.
#[derive(Debug, Clone, PartialEq)]
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
    let [batch_size, seq_length, _] = logits.dims();
    // The log-softmax at the target only: `(x_t - max) - log Σ exp(x - max)`, the arithmetic of
    // burn's `log_softmax` at that entry without its full-size last subtraction. Every row is
    // gathered (the last position against token 0, dropped below): a row-sliced view would be
    // walked element by element.
    let shifted = logits.clone() - logits.max_dim(2);
    let log_sum_exp = shifted.clone().exp().sum_dim(2).log();
    let targets = Tensor::cat(
        vec![
            input_ids.clone().slice([0..batch_size, 1..seq_length]),
            Tensor::zeros([batch_size, 1], &input_ids.device()),
        ],
        1,
    )
    .unsqueeze_dim::<3>(2);
    let picked: Vec<f64> = (shifted.gather(2, targets) - log_sum_exp)
        .into_data()
        .convert::<f64>()
        .to_vec()
        .unwrap_or_default();
    let mut nll_sum = vec![0.0; batch_size];
    let mut n_targets = vec![0; batch_size];
    for b in 0..batch_size {
        for t in 0..seq_length - 1 {
            if scored[b][t] {
                nll_sum[b] -= picked[b * seq_length + t];
                n_targets[b] += 1;
            }
        }
    }
    EvalLoss { nll_sum, n_targets }
}
