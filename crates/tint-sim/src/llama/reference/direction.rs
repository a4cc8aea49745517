//! The descent direction of one LLaMA reference step ([`LlamaDirection`], made by
//! [`LlamaReference::direction`]): the gradients of one forward-backward pass, applied at any step
//! size. A child of the reference, whose private passes it runs.

use burn::tensor::backend::Backend;

use super::sequence_step::SequenceStep;
use super::{LlamaReference, SequenceContext};
use crate::error::SimError;
use crate::family_step::{top_pass, StepFamily};
use crate::input::SimInput;
use crate::llama::step_gradients::StepGradients;

/// The descent direction of one step of a [`LlamaReference`] on one or more training sequences
/// ([`LlamaReference::direction`]): the reference updated at any step size, without a backward
/// pass per step size.
#[derive(Debug, Clone)]
pub struct LlamaDirection<B: Backend> {
    /// The reference the gradients were computed with (its weights are the ones updated).
    pub(crate) base: LlamaReference<B>,
    pub(crate) gradients: StepGradients<B>,
}

impl<B: Backend> LlamaDirection<B> {
    /// The reference whose weights are the base weights after the step at step size `inner_lr`:
    /// equal (to the bit) to [`LlamaReference::updated`] of the base reference configured with
    /// that step size, on the same sequence.
    pub fn updated(&self, inner_lr: f64) -> LlamaReference<B> {
        let mut params = self.base.params().clone();
        self.gradients.descend(&mut params, inner_lr);
        self.base.with_weights(params, inner_lr)
    }
}

impl<B: Backend> LlamaReference<B> {
    /// The descent direction of one step on the summed training loss of `inputs` (each a batch of
    /// one sequence; every sequence runs its own first pass on the base weights, and their
    /// gradients add up): the gradients the step computes before scaling them by `η`, from which
    /// [`LlamaDirection::updated`] gives the reference [`Self::updated`] would return at any step
    /// size — one first pass and backward pass for a whole grid of step sizes, and no final
    /// forward pass. One sequence is TinT's Multi format (demonstrations in one input); several
    /// are its Single format (each demonstration in an input of its own, as the official code's
    /// demonstration masks and restarted positions make them).
    ///
    /// # Shapes
    /// every `inputs[i].input_ids`: `[1, seq_length_i]`.
    ///
    /// # Errors
    /// As [`Self::updated`] for each input, [`SimError::InvalidInput`] for no input and for a
    /// step of more than one forward-backward pass (its later gradients depend on `η`).
    pub fn direction(&self, inputs: &[SimInput<B>]) -> Result<LlamaDirection<B>, SimError> {
        let steps = self.config.step.n_forward_backward;
        if steps != 1 {
            return Err(SimError::InvalidInput(format!(
                "a descent direction independent of the step size exists for one forward-backward \
                 pass; the step has {steps}"
            )));
        }
        let Some(first_input) = inputs.first() else {
            return Err(SimError::InvalidInput(
                "a descent direction needs at least one training sequence".into(),
            ));
        };
        for input in inputs {
            let [batch_size, _] = input.dims();
            if batch_size != 1 {
                return Err(SimError::InvalidInput(format!(
                    "each input of a descent direction is one sequence; got a batch of {batch_size}"
                )));
            }
            self.validate(input)?;
        }
        let device = first_input.input_ids.device();
        let gradients = tint_ops::branches::on_worker::<B, _, _>(&device, || {
            let gradients_of = |input: &SimInput<B>| {
                let contexts = self.sequence_contexts(input);
                self.step_gradients(&contexts[0])
            };
            inputs[1..]
                .iter()
                .fold(gradients_of(first_input), |sum, input| {
                    sum.plus(gradients_of(input))
                })
        });
        Ok(LlamaDirection {
            base: self.clone(),
            gradients,
        })
    }

    /// The gradients of one step on one sequence, from the base weights: the first pass, the loss
    /// gradient and the backward of [`SequenceStep`] (the step's own operations), without the
    /// descent.
    fn step_gradients(&self, ctx: &SequenceContext<B>) -> StepGradients<B> {
        let step = SequenceStep::new(self, None);
        let first = step.first;
        let pass = top_pass(
            &step,
            step.lower_state(ctx),
            &self.params.layers[first..],
            &self.params.final_norm,
            ctx,
        );
        let grad = step
            .targets(ctx)
            .loss_gradient(&pass.last, &step.head_matrix());
        let (mut delta, final_norm) =
            step.final_gradients(grad, &pass.last.state, &self.params.final_norm, ctx);
        let mut layers = Vec::with_capacity(pass.acts.len());
        for (l, trace) in pass.acts.iter().enumerate().rev() {
            let (delta_in, gradients) =
                step.layer_gradients(delta, &self.params.layers[first + l], trace, ctx, l);
            layers.push(gradients);
            delta = delta_in;
        }
        // Bottom to top, as the layers.
        layers.reverse();
        StepGradients {
            final_norm,
            first,
            layers,
        }
    }
}
