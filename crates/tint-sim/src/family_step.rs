//! The TinT step once for every engine and model family (issue 64): what the GPT-2 / OPT and the
//! LLaMA simulators ([`crate::TintSimulator`], [`crate::llama::LlamaSimulator`]) and functional
//! references ([`crate::FunctionalReference`], [`crate::llama::LlamaReference`]) share.
//!
//! [`run_rounds`] runs, from the state entering the first updated layer: the forward pass through
//! the updated layers and the final norm with the head's logits, then `n_forward_backward` times the
//! loss gradient (docs/construction.md §7), the final norm's backward, every updated layer's
//! backward + descent from the top (§8, §9) and the forward pass again with the updated weights.
//! [`simulate`] adds what the two simulators also share: the context of the masks, the layers
//! below, and the evaluation losses. A family ([`StepFamily`]) supplies what differs: its layer
//! (norm, attention, MLP and their placement) as constructed modules on prefix blocks or as plain
//! tensor maths on weights, its final norm, and its state (`[batch_size, rows, Ds]` states of the
//! simulators, `[batch_size, T, D]` or one sequence's `[T, D]` of the references).

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};
use tint_ops::{SimContext, TintDims};

use crate::error::SimError;
use crate::input::SimInput;
use crate::loss::{eval_loss, loss_gradient_with_logits};
use crate::output::SimOutput;
use crate::step_config::{LossGradientKind, StepConfig};

/// One engine of one model family, as [`run_rounds`] drives it: the forward and the backward +
/// descent of one updated layer and of the final norm. [`run_rounds`] only passes states, weights
/// and stored activations from one method to the next.
pub(crate) trait StepFamily<B: Backend> {
    /// What every module of a pass reads besides its weights (masks, position tables).
    type Context;
    /// The residual stream between layers.
    type State: Clone;
    /// The weights of one updated layer (its prefix blocks, or plain weights).
    type LayerWeights;
    /// The weights of the final norm (its prefix block, or plain weights).
    type FinalWeights;
    /// What one updated layer's forward stores for its backward.
    type LayerActs;
    /// What the final norm's backward reads of the pass.
    type FinalState;

    /// The LM head's rows `[vocab_size, D]` (frozen).
    fn head_matrix(&self) -> Tensor<B, 2>;

    /// One updated layer forward, storing what its backward reads.
    ///
    /// # Shapes
    /// `state` (the family's: `[batch_size, rows, Ds]`, `[batch_size, T, D]` or `[T, D]`) → the
    /// same shape
    fn forward_layer(
        &self,
        state: Self::State,
        weights: &Self::LayerWeights,
        ctx: &Self::Context,
    ) -> (Self::State, Self::LayerActs);

    /// The final norm (or none) on the last layer's output, the head's input `h_f` and the
    /// logits `h_f Hᵀ`.
    ///
    /// # Shapes
    /// → `h_f`: `[batch_size, T, D]`, logits: `[batch_size, T, vocab_size]`
    fn final_norm(
        &self,
        state: Self::State,
        weights: &Self::FinalWeights,
        ctx: &Self::Context,
    ) -> FinalPass<B, Self::FinalState>;

    /// The final norm's backward (and its descent, where the family updates it) from the loss
    /// gradient at the head's input: the gradient at the last layer's output.
    ///
    /// # Shapes
    /// `grad`: `[batch_size, T, D]`
    fn final_backward(
        &self,
        grad: Tensor<B, 3>,
        final_state: &Self::FinalState,
        weights: &mut Self::FinalWeights,
        ctx: &Self::Context,
    ) -> Self::State;

    /// One updated layer's backward + descent: updates `weights` and returns the gradient at the
    /// layer's input. `index`: the layer's place among the updated layers, 0 the lowest (whose
    /// input gradient nothing reads).
    ///
    /// # Shapes
    /// `delta` (the gradient at the layer's output, shaped as its state) → the same shape
    fn backward_layer(
        &self,
        delta: Self::State,
        weights: &mut Self::LayerWeights,
        acts: &Self::LayerActs,
        ctx: &Self::Context,
        index: usize,
    ) -> Self::State;

    /// Called after every pass (`round` 0: the first pass, before any step) with what it
    /// computed; a family with an observer reports its intermediates here. Default: nothing.
    fn passed(&self, round: usize, pass: &TopPass<B, Self>)
    where
        Self: Sized,
    {
        let _ = (round, pass);
    }
}

/// The final norm's part of a pass.
pub(crate) struct FinalPass<B: Backend, S> {
    /// What the final norm's backward reads.
    pub(crate) state: S,
    /// The head's input `[batch_size, T, D]`.
    pub(crate) hf: Tensor<B, 3>,
    /// `h_f Hᵀ`, `[batch_size, T, vocab_size]`.
    pub(crate) logits: Tensor<B, 3>,
}

/// A forward pass from the first updated layer up.
pub(crate) struct TopPass<B: Backend, F: StepFamily<B>> {
    /// What each updated layer stored, bottom to top.
    pub(crate) acts: Vec<F::LayerActs>,
    /// The final norm's part.
    pub(crate) last: FinalPass<B, F::FinalState>,
}

/// The updated layers, the final norm and the head's logits from `state`.
pub(crate) fn top_pass<B: Backend, F: StepFamily<B>>(
    family: &F,
    mut state: F::State,
    layers: &[F::LayerWeights],
    final_weights: &F::FinalWeights,
    ctx: &F::Context,
) -> TopPass<B, F> {
    let mut acts = Vec::with_capacity(layers.len());
    for weights in layers {
        let (out, layer_acts) = family.forward_layer(state, weights, ctx);
        acts.push(layer_acts);
        state = out;
    }
    TopPass {
        acts,
        last: family.final_norm(state, final_weights, ctx),
    }
}

/// What the loss gradient of a step reads besides the pass: the token ids and which next tokens
/// count, how the gradient is formed and how many steps run.
pub(crate) struct StepTargets<B: Backend> {
    /// `[batch_size, T]`.
    pub(crate) input_ids: Tensor<B, 2, Int>,
    /// `[batch_size, T, 1]`: 1 where the target `t + 1` of position `t` counts in the loss.
    pub(crate) next_target: Tensor<B, 3>,
    /// The loss gradient's form (§7).
    pub(crate) loss_gradient: LossGradientKind,
    /// Forward-backward steps.
    pub(crate) n_forward_backward: usize,
}

impl<B: Backend> StepTargets<B> {
    /// The loss gradient at the head's input of `pass` (its logits are `hf Hᵀ` already: the
    /// gradient reads their training rows).
    ///
    /// # Shapes
    /// → `[batch_size, T, D]`
    pub(crate) fn loss_gradient<S>(
        &self,
        pass: &FinalPass<B, S>,
        head_matrix: &Tensor<B, 2>,
    ) -> Tensor<B, 3> {
        loss_gradient_with_logits(
            pass.hf.clone(),
            Some(pass.logits.clone()),
            head_matrix,
            &self.input_ids,
            &self.next_target,
            self.loss_gradient,
        )
    }
}

/// What [`run_rounds`] returns: the first and the final logits and the updated weights.
pub(crate) struct Rounds<B: Backend, F: StepFamily<B>> {
    /// Logits of the first pass, before any step.
    pub(crate) first_logits: Tensor<B, 3>,
    /// Logits of the last pass, after every step.
    pub(crate) final_logits: Tensor<B, 3>,
    /// The updated layers' weights, bottom to top.
    pub(crate) layers: Vec<F::LayerWeights>,
    /// The final norm's weights.
    pub(crate) final_weights: F::FinalWeights,
}

/// The step of `family` from `state` (the input of the first updated layer) with the updated
/// layers' and the final norm's initial weights: the first pass, then `n_forward_backward` times
/// loss gradient, backward + descent from the top, and the pass again.
pub(crate) fn run_rounds<B: Backend, F: StepFamily<B>>(
    family: &F,
    ctx: &F::Context,
    targets: &StepTargets<B>,
    state: F::State,
    mut layers: Vec<F::LayerWeights>,
    mut final_weights: F::FinalWeights,
) -> Rounds<B, F> {
    let head = family.head_matrix();
    let mut pass = top_pass(family, state.clone(), &layers, &final_weights, ctx);
    family.passed(0, &pass);
    let first_logits = pass.last.logits.clone();
    for round in 1..=targets.n_forward_backward {
        let grad = targets.loss_gradient(&pass.last, &head);
        let mut delta = family.final_backward(grad, &pass.last.state, &mut final_weights, ctx);
        for l in (0..layers.len()).rev() {
            delta = family.backward_layer(delta, &mut layers[l], &pass.acts[l], ctx, l);
        }
        pass = top_pass(family, state.clone(), &layers, &final_weights, ctx);
        family.passed(round, &pass);
    }
    Rounds {
        first_logits,
        final_logits: pass.last.logits,
        layers,
        final_weights,
    }
}

/// What a simulator adds to its [`StepFamily`]: its sizes, its step, the layers below the first
/// simulated one and the initial prefix blocks; every state is a `[batch_size, rows, Ds]` tensor
/// whose rows the family chooses (token rows only, or prefix rows and token rows).
pub(crate) trait SimulatedFamily<B: Backend>:
    StepFamily<B, Context = SimContext<B>, State = Tensor<B, 3>, FinalWeights = Tensor<B, 3>> + Sized
{
    /// The TinT sizes.
    fn dims(&self) -> &TintDims;

    /// The simulated step (steps, loss gradient).
    fn step(&self) -> &StepConfig;

    /// Whether the official code's quirks are reproduced (the masks of [`SimInput::masks`]).
    fn official_compat(&self) -> bool;

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

    /// The initial prefix blocks of the simulated layers (bottom to top) and of the final norm
    /// (`[batch_size, P, Ds]` each), for a batch of `batch_size`.
    fn top_prefixes(&self, batch_size: usize) -> (Vec<Self::LayerWeights>, Tensor<B, 3>);
}

/// The TinT step of simulator `family` on `input` (which passed [`SimInput::validate`]):
/// first-pass and final logits and their evaluation losses.
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
    let (prefixes, final_prefix) = family.top_prefixes(batch_size);
    let step = family.step();
    let targets = StepTargets {
        input_ids: input.input_ids.clone(),
        next_target: masks.next_target,
        loss_gradient: step.loss_gradient,
        n_forward_backward: step.n_forward_backward,
    };
    let rounds = run_rounds(family, &ctx, &targets, state, prefixes, final_prefix);
    Ok(SimOutput::scored(
        input,
        rounds.first_logits,
        rounds.final_logits,
    ))
}

impl<B: Backend> SimOutput<B> {
    /// The output of a step on `input`: its logits and their evaluation losses on the tokens that
    /// do not train ([`eval_targets`]).
    pub(crate) fn scored(
        input: &SimInput<B>,
        first_logits: Tensor<B, 3>,
        final_logits: Tensor<B, 3>,
    ) -> Self {
        let scored = eval_targets(input);
        let first_loss = eval_loss(first_logits.clone(), &input.input_ids, &scored);
        let final_loss = eval_loss(final_logits.clone(), &input.input_ids, &scored);
        SimOutput {
            first_logits,
            final_logits,
            first_loss,
            final_loss,
        }
    }
}

/// The evaluation targets: position `t` is scored against token `t + 1` iff that token is not a
/// training token (docs/construction.md §9.3: positions `Ltr-1 .. T-2`).
fn eval_targets<B: Backend>(input: &SimInput<B>) -> Vec<Vec<bool>> {
    let [batch_size, seq_length] = input.dims();
    let train: Vec<bool> = input
        .train_mask
        .to_data()
        .convert::<bool>()
        .to_vec()
        .unwrap_or_default();
    (0..batch_size)
        .map(|b| {
            (0..seq_length - 1)
                .map(|t| !train[b * seq_length + t + 1])
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use burn::backend::Flex;
    use burn::tensor::{Distribution, TensorData};

    use super::*;

    type B = Flex;

    /// A family of linear layers `h ← h W` without a final norm, whose backward is the exact
    /// gradient of the linear maps and whose descent is SGD with step `lr`: the driver's rounds can
    /// be written out by hand. Records the calls in order.
    struct Linear {
        head: Tensor<B, 2>,
        lr: f64,
        calls: RefCell<Vec<String>>,
    }

    impl StepFamily<B> for Linear {
        type Context = ();
        type State = Tensor<B, 3>;
        type LayerWeights = Tensor<B, 2>;
        type FinalWeights = ();
        /// The layer's input.
        type LayerActs = Tensor<B, 3>;
        type FinalState = ();

        fn head_matrix(&self) -> Tensor<B, 2> {
            self.head.clone()
        }

        fn forward_layer(
            &self,
            h: Tensor<B, 3>,
            w: &Tensor<B, 2>,
            _: &(),
        ) -> (Tensor<B, 3>, Tensor<B, 3>) {
            (h.clone().matmul(w.clone().unsqueeze_dim::<3>(0)), h)
        }

        fn final_norm(&self, h: Tensor<B, 3>, _: &(), _: &()) -> FinalPass<B, ()> {
            let logits = crate::loss::head_logits(h.clone(), &self.head);
            FinalPass {
                state: (),
                hf: h,
                logits,
            }
        }

        fn final_backward(&self, grad: Tensor<B, 3>, _: &(), _: &mut (), _: &()) -> Tensor<B, 3> {
            self.calls.borrow_mut().push("final".into());
            grad
        }

        fn backward_layer(
            &self,
            delta: Tensor<B, 3>,
            w: &mut Tensor<B, 2>,
            input: &Tensor<B, 3>,
            _: &(),
            index: usize,
        ) -> Tensor<B, 3> {
            self.calls.borrow_mut().push(format!("layer {index}"));
            let delta_in = delta
                .clone()
                .matmul(w.clone().transpose().unsqueeze_dim::<3>(0));
            let [_, t, d] = input.dims();
            let grad_w = input
                .clone()
                .reshape([t, d])
                .transpose()
                .matmul(delta.reshape([t, d]));
            *w = w.clone() - grad_w.mul_scalar(self.lr);
            delta_in
        }

        fn passed(&self, round: usize, _: &TopPass<B, Self>) {
            self.calls.borrow_mut().push(format!("pass {round}"));
        }
    }

    /// Two rounds on two linear layers equal SGD written out by hand with the same loss gradient
    /// (the same float operations in the same order: tolerance 0), the passes and backwards come in
    /// the step's order (the final norm first, then the layers from the top with their indices), and
    /// the updated weights are returned.
    #[test]
    fn rounds_are_sgd_on_the_updated_layers_from_the_top() {
        let device = Default::default();
        let (t, d, vocab, lr) = (5, 3, 7, 0.1);
        let normal = Distribution::Normal(0.0, 1.0);
        let x = Tensor::<B, 3>::random([1, t, d], normal, &device);
        let layers = vec![
            Tensor::<B, 2>::random([d, d], normal, &device),
            Tensor::<B, 2>::random([d, d], normal, &device),
        ];
        let head = Tensor::<B, 2>::random([vocab, d], normal, &device);
        let ids: Vec<i64> = (0..t as i64).map(|i| (3 * i + 1) % vocab as i64).collect();
        let targets = StepTargets {
            input_ids: Tensor::from_data(TensorData::new(ids, [1, t]), &device),
            next_target: Tensor::from_data(
                TensorData::new(vec![1.0f32, 1.0, 0.0, 0.0, 0.0], [1, t, 1]),
                &device,
            ),
            loss_gradient: LossGradientKind::Prediction,
            n_forward_backward: 2,
        };
        let family = Linear {
            head: head.clone(),
            lr,
            calls: RefCell::new(Vec::new()),
        };
        let rounds = run_rounds(&family, &(), &targets, x.clone(), layers.clone(), ());
        assert_eq!(
            family.calls.borrow().as_slice(),
            [
                "pass 0", "final", "layer 1", "layer 0", "pass 1", "final", "layer 1", "layer 0",
                "pass 2"
            ]
        );

        // By hand.
        let lift = |w: &Tensor<B, 2>| w.clone().unsqueeze_dim::<3>(0);
        let (mut w1, mut w2) = (layers[0].clone(), layers[1].clone());
        let logits_of = |w1: &Tensor<B, 2>, w2: &Tensor<B, 2>| {
            let hf = x.clone().matmul(lift(w1)).matmul(lift(w2));
            (hf.clone(), crate::loss::head_logits(hf, &head))
        };
        let first = logits_of(&w1, &w2).1;
        for _ in 0..2 {
            let h1 = x.clone().matmul(lift(&w1));
            let (hf, logits) = logits_of(&w1, &w2);
            let grad = loss_gradient_with_logits(
                hf,
                Some(logits),
                &head,
                &targets.input_ids,
                &targets.next_target,
                LossGradientKind::Prediction,
            );
            let delta_1 = grad
                .clone()
                .matmul(w2.clone().transpose().unsqueeze_dim::<3>(0));
            let step = |input: Tensor<B, 3>, delta: Tensor<B, 3>| {
                input
                    .reshape([t, d])
                    .transpose()
                    .matmul(delta.reshape([t, d]))
                    .mul_scalar(lr)
            };
            let new_w2 = w2.clone() - step(h1, grad);
            let new_w1 = w1.clone() - step(x.clone(), delta_1);
            (w1, w2) = (new_w1, new_w2);
        }
        let last = logits_of(&w1, &w2).1;
        assert_eq!(rounds.first_logits.into_data(), first.into_data());
        assert_eq!(rounds.final_logits.into_data(), last.into_data());
        assert_eq!(rounds.layers[0].clone().into_data(), w1.into_data());
        assert_eq!(rounds.layers[1].clone().into_data(), w2.into_data());
    }
}
