//! The simulated TinT step once for every model family (issue 64): what the GPT-2 / OPT simulator
//! ([`crate::TintSimulator`]) and the LLaMA simulator ([`crate::llama::LlamaSimulator`]) share.
//!
//! One call of [`simulate`] runs, on states of width `Ds`: the layers below the first simulated
//! one (once), the forward pass through the simulated layers and the final norm with the head's
//! logits, then `n_forward_backward` times the loss gradient (docs/construction.md §7), the final
//! norm's backward, every simulated layer's backward + descent from the top (§8) and the forward
//! pass again with the updated prefix blocks; and the evaluation losses of the first and the final
//! logits. A family ([`SimulatedFamily`]) supplies what differs: its constructed layer (norm,
//! attention, MLP and their placement), its final norm and the layers below.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_ops::{SimContext, TintDims};

use crate::error::SimError;
use crate::input::SimInput;
use crate::loss::{eval_loss, head_logits, loss_gradient_with_logits};
use crate::reference::{eval_targets, SimOutput};
use crate::step_config::StepConfig;

/// One model family's constructed network, as [`simulate`] drives it. Every state is a
/// `[batch_size, rows, Ds]` tensor whose rows the family chooses (token rows only, or prefix rows
/// and token rows); [`simulate`] only passes them from one method to the next.
pub(crate) trait SimulatedFamily<B: Backend> {
    /// The prefix blocks of one simulated layer, each `[batch_size, P, Ds]`.
    type LayerPrefixes;
    /// What one simulated layer's forward stores for its backward.
    type LayerActs;
    /// What the final norm's backward reads of the pass (the state after the final norm and
    /// its stored activation).
    type FinalState;

    /// The TinT sizes.
    fn dims(&self) -> &TintDims;

    /// The simulated step (steps, loss gradient).
    fn step(&self) -> &StepConfig;

    /// Whether the official code's quirks are reproduced (the masks of [`SimInput::masks`]).
    fn official_compat(&self) -> bool;

    /// The LM head's rows `[vocab_size, D]` (frozen).
    fn head_matrix(&self) -> &Tensor<B, 2>;

    /// The state entering the first simulated layer: the embeddings through the layers below it
    /// (no step updates them).
    ///
    /// # Shapes
    /// `input.input_ids`: `[batch_size, T]` → `[batch_size, rows, Ds]`
    fn lower_state(
        &self,
        input: &SimInput<B>,
        dims: &TintDims,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3>;

    /// The initial prefix blocks of the simulated layers (bottom to top) and of the final norm,
    /// for a batch of `batch_size`.
    fn top_prefixes(&self, batch_size: usize) -> (Vec<Self::LayerPrefixes>, Tensor<B, 3>);

    /// One simulated layer forward, storing what its backward reads.
    ///
    /// # Shapes
    /// `state`: `[batch_size, rows, Ds]` → `[batch_size, rows, Ds]`
    fn forward_layer(
        &self,
        state: Tensor<B, 3>,
        prefixes: &Self::LayerPrefixes,
        ctx: &SimContext<B>,
    ) -> (Tensor<B, 3>, Self::LayerActs);

    /// The final norm (or none) on the last layer's output: what its backward reads, and the
    /// head's input `h_f`.
    ///
    /// # Shapes
    /// `state`: `[batch_size, rows, Ds]` → `h_f`: `[batch_size, T, D]`
    fn final_norm(
        &self,
        state: Tensor<B, 3>,
        final_prefix: &Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> (Self::FinalState, Tensor<B, 3>);

    /// The final norm's backward (and its descent, where the family updates it) from the loss
    /// gradient at the head's input: the gradient state at the last layer's output.
    ///
    /// # Shapes
    /// `grad`: `[batch_size, T, D]` → `[batch_size, rows, Ds]`
    fn final_backward(
        &self,
        grad: Tensor<B, 3>,
        final_state: &Self::FinalState,
        final_prefix: &mut Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3>;

    /// One simulated layer's backward + descent: updates `prefixes` and returns the gradient
    /// state at the layer's input. `lowest`: the first simulated layer, whose input gradient no
    /// module reads.
    ///
    /// # Shapes
    /// `delta`: `[batch_size, rows, Ds]` → `[batch_size, rows, Ds]`
    fn backward_layer(
        &self,
        delta: Tensor<B, 3>,
        prefixes: &mut Self::LayerPrefixes,
        acts: &Self::LayerActs,
        ctx: &SimContext<B>,
        lowest: bool,
    ) -> Tensor<B, 3>;
}

/// A forward pass from the first simulated layer up.
struct TopPass<B: Backend, F: SimulatedFamily<B>> {
    acts: Vec<F::LayerActs>,
    final_state: F::FinalState,
    /// The head's input `[batch_size, T, D]`.
    hf: Tensor<B, 3>,
    /// `hf Hᵀ`, `[batch_size, T, vocab_size]`.
    logits: Tensor<B, 3>,
}

/// The simulated layers, the final norm and the head's logits from `state`.
fn top_pass<B: Backend, F: SimulatedFamily<B>>(
    family: &F,
    mut state: Tensor<B, 3>,
    prefixes: &[F::LayerPrefixes],
    final_prefix: &Tensor<B, 3>,
    ctx: &SimContext<B>,
) -> TopPass<B, F> {
    let mut acts = Vec::with_capacity(prefixes.len());
    for blocks in prefixes {
        let (out, layer_acts) = family.forward_layer(state, blocks, ctx);
        acts.push(layer_acts);
        state = out;
    }
    let (final_state, hf) = family.final_norm(state, final_prefix, ctx);
    let logits = head_logits(hf.clone(), family.head_matrix());
    TopPass {
        acts,
        final_state,
        hf,
        logits,
    }
}

/// The TinT step of `family` on `input` (which passed [`SimInput::validate`]): first-pass and
/// final logits and their evaluation losses.
///
/// # Shapes
/// `input.input_ids`: `[batch_size, T]` → logits `[batch_size, T, vocab_size]`
///
/// # Errors
/// [`SimError`] for a sequence length or masks the TinT sizes cannot hold.
pub(crate) fn simulate<B: Backend, F: SimulatedFamily<B>>(
    family: &F,
    input: &SimInput<B>,
) -> Result<SimOutput<B>, SimError> {
    let [batch_size, seq_length] = input.dims();
    let head = family.head_matrix();
    let (dtype, device) = (head.dtype(), head.device());
    let dims = family.dims().with_seq_length(seq_length)?;
    let masks = input.masks(dtype, family.official_compat());
    let mut ctx = SimContext::new(&dims, input.train_mask.clone().float().cast(dtype), &device)?;
    if let Some(icl) = &input.icl_mask {
        ctx = ctx.with_icl_mask(icl.clone().float().cast(dtype))?;
    }
    let state = family.lower_state(input, &dims, &ctx);
    let (mut prefixes, mut final_prefix) = family.top_prefixes(batch_size);
    let mut pass = top_pass(family, state.clone(), &prefixes, &final_prefix, &ctx);
    let first_logits = pass.logits.clone();
    let step = family.step();
    for _ in 0..step.n_forward_backward {
        // The pass's logits are `hf Hᵀ` already: the gradient reads their training rows.
        let grad = loss_gradient_with_logits(
            pass.hf.clone(),
            Some(pass.logits.clone()),
            head,
            &input.input_ids,
            &masks.next_target,
            step.loss_gradient,
        );
        let mut delta = family.final_backward(grad, &pass.final_state, &mut final_prefix, &ctx);
        for l in (0..prefixes.len()).rev() {
            delta = family.backward_layer(delta, &mut prefixes[l], &pass.acts[l], &ctx, l == 0);
        }
        pass = top_pass(family, state.clone(), &prefixes, &final_prefix, &ctx);
    }
    let scored = eval_targets(input);
    let first_loss = eval_loss(first_logits.clone(), &input.input_ids, &scored);
    let final_loss = eval_loss(pass.logits.clone(), &input.input_ids, &scored);
    Ok(SimOutput {
        first_logits,
        final_logits: pass.logits,
        first_loss,
        final_loss,
    })
}
