//! TinT as an in-context classification method: one forward pass of the simulator (or its functional
//! reference) trains the simulated auxiliary model on the demonstrations at the start of the input and
//! scores the label words after the query with the updated model.
//!
//! TinT reads its training data from the same input, so it supports the Multi format (demonstrations
//! and query in one sequence) and zero-shot (training on the query's own context); the Single format
//! (a batch of separate demonstrations) is rejected. Calibration follows the same rule: the prior
//! `P(c | prompt)` is scored with the demonstrations (k-shot) or the prompt itself (zero-shot) as the
//! training part.

use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor, TensorData};
use tint_sim::{SimInput, SimOutput};

use super::error::IclError;
use super::method::{
    candidate_batch, next_token_log_probs, padded_ids, sum_candidate_log_probs, IclMethod,
    ScoreRequest,
};
use super::prompt::{DemoFormat, TrainingSequences};
use crate::methods::Tint;
use crate::non_finite::{weights_origin, NonFiniteOrigin};

/// TinT (simulator or functional reference) behind [`IclMethod`].
pub struct TintIcl<B: Backend> {
    /// The constructed TinT.
    pub tint: Tint<B>,
    /// Name in reports (e.g. `tint(eta=1e-5)`).
    pub label: String,
    device: B::Device,
}

impl<B: Backend> TintIcl<B> {
    /// Wraps a TinT built by [`Tint::simulator`] or [`Tint::reference`] for a model on `device`.
    pub fn new(tint: Tint<B>, label: impl Into<String>, device: &B::Device) -> Self {
        Self {
            tint,
            label: label.into(),
            device: device.clone(),
        }
    }
}

impl<B: Backend> IclMethod for TintIcl<B> {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn trains(&self) -> bool {
        true
    }

    fn supports(&self, format: DemoFormat) -> bool {
        format == DemoFormat::Multi
    }

    fn adapt(&mut self, train: &TrainingSequences) -> Result<(), IclError> {
        if train.ids.len() > 1 {
            return Err(IclError::InvalidSetting {
                name: "format",
                value: "single".into(),
                rule: "TinT trains inside its forward pass on one input: use the multi format"
                    .into(),
            });
        }
        Ok(())
    }

    fn score(&mut self, request: &ScoreRequest<'_>) -> Result<Vec<f64>, IclError> {
        let (output, ids, single_token) = self.forward(request)?;
        let context = request.context;
        if single_token {
            return next_token_log_probs(output.final_logits, context.len(), request.candidates);
        }
        sum_candidate_log_probs(output.final_logits, ids, context.len(), request.candidates)
    }

    /// Runs `request` again and looks at its first-pass logits ([`Tint::origin_of`]).
    fn non_finite_origin(&mut self, request: Option<&ScoreRequest<'_>>) -> NonFiniteOrigin {
        let weights = || weights_origin(self.tint.model()).unwrap_or(NonFiniteOrigin::Unknown);
        match request.map(|r| self.forward(r)) {
            Some(Ok((output, _, _))) => self.tint.origin_of(&output),
            _ => weights(),
        }
    }
}

impl<B: Backend> TintIcl<B> {
    /// The simulator's output for `request`, the ids it ran on, and whether the candidates are all
    /// single tokens (scored from the context alone).
    #[allow(clippy::type_complexity)]
    fn forward(
        &self,
        request: &ScoreRequest<'_>,
    ) -> Result<(SimOutput<B>, Tensor<B, 2, Int>, bool), IclError> {
        let context = request.context;
        // Single-token label words (the usual case) are all scored from the next-token
        // distribution after the context: one sequence instead of one per candidate. The update
        // is the same (it depends only on the training part) and causal attention makes the
        // logits at the last context position independent of what follows.
        let single_token =
            !request.candidates.is_empty() && request.candidates.iter().all(|c| c.len() == 1);
        let ids = if single_token {
            padded_ids::<B>(&[context.to_vec()], context[0], &self.device)
        } else {
            candidate_batch::<B>(context, request.candidates, &self.device)
        };
        let [batch_size, seq_length] = ids.dims();
        // Zero-shot: the training part is the whole context (the query or the prompt itself).
        let (train_len, targets): (usize, Vec<bool>) = if request.demo_len > 0 {
            (request.demo_len, request.demo_targets.to_vec())
        } else {
            let mut all = vec![true; context.len()];
            all[0] = false;
            (context.len(), all)
        };
        let row_targets: Vec<bool> = (0..seq_length)
            .map(|t| t < targets.len() && targets[t])
            .collect();
        let gradient_mask = Tensor::<B, 2, Bool>::from_data(
            TensorData::new(row_targets.repeat(batch_size), [batch_size, seq_length]),
            &self.device,
        );
        let input = SimInput::with_train_lengths(ids.clone(), &vec![train_len; batch_size])
            .map_err(|e| IclError::Eval(e.into()))?
            .with_gradient_mask(gradient_mask);
        let output = self.tint.run(&input)?;
        Ok((output, ids, single_token))
    }
}
