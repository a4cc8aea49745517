//! [`SimOutput`]: what a TinT step returns, whichever engine ran it (the simulators, the functional
//! references, the sequence-by-sequence runner of `crate::sequences`).

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use crate::loss::EvalLoss;

/// Logits and evaluation losses before and after the simulated SGD steps.
#[derive(Debug, Clone)]
pub struct SimOutput<B: Backend> {
    /// Logits of the first (unchanged) forward pass `[batch_size, seq_length, vocab_size]`.
    pub first_logits: Tensor<B, 3>,
    /// Logits after `n_forward_backward` simulated steps `[batch_size, seq_length, vocab_size]`.
    pub final_logits: Tensor<B, 3>,
    /// Cross-entropy of `first_logits` on the evaluation targets (targets that are not training tokens).
    pub first_loss: EvalLoss,
    /// Cross-entropy of `final_logits` on the evaluation targets.
    pub final_loss: EvalLoss,
}
