//! One sequence's step of the LLaMA functional reference in the shared step
//! ([`crate::family_step`]): [`SequenceStep`], the LLaMA family as a [`StepFamily`] on one
//! sequence's `[seq_length, d_model]` states, with the observer of
//! [`LlamaReference::forward_observed`]; and [`LlamaReference::layer_gradients`], one layer's
//! approximate backward, which the step descends at once and a descent direction keeps
//! ([`super::LlamaDirection`]).

use std::cell::{Cell, RefCell};

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::{
    attention_probs, attention_score_backward, layer_forward, sum_kv_groups, weight_gradient,
    LayerTrace, LlamaReference, Observer, SequenceContext,
};
use crate::family_step::{FinalPass, StepFamily, StepTargets, TopPass};
use crate::llama::math::{rms_gain_gradient, rms_norm, rms_norm_backward, swiglu_backward};
use crate::llama::params::LlamaLayerParams;
use crate::llama::step_gradients::{descend, LayerGradients};
use crate::math::{merge_heads, split_heads};
use crate::step_config::AttentionBackwardMode;

/// One sequence's step of a [`LlamaReference`]: the reference, the index of its first updated
/// layer, and the observer its intermediates go to (with the number of the step under way, for
/// their names).
pub(crate) struct SequenceStep<'r, 'o, B: Backend> {
    pub(crate) reference: &'r LlamaReference<B>,
    /// Index of the first updated layer in the model.
    pub(crate) first: usize,
    observer: RefCell<Observer<'o, B>>,
    /// The pass last completed (0: the first pass), the step that follows is its number.
    round: Cell<usize>,
}

impl<'r, 'o, B: Backend> SequenceStep<'r, 'o, B> {
    /// The step of `reference` on one sequence, reporting to `observer`.
    pub(crate) fn new(reference: &'r LlamaReference<B>, observer: Observer<'o, B>) -> Self {
        let n_layers = reference.params.layers.len();
        Self {
            reference,
            first: n_layers - reference.config.simulated_layers(n_layers),
            observer: RefCell::new(observer),
            round: Cell::new(0),
        }
    }

    /// Whether an observer listens.
    pub(crate) fn observing(&self) -> bool {
        self.observer.borrow().is_some()
    }

    /// Reports `t` as `name` (nothing without an observer).
    pub(crate) fn observe(&self, name: &str, t: Tensor<B, 2>) {
        if let Some(observe) = self.observer.borrow_mut().as_deref_mut() {
            observe(name, t);
        }
    }

    /// Reports `t` as `name` of the step under way: step `k > 0` prefixes `s{k} `.
    fn observe_step(&self, name: &str, t: Tensor<B, 2>) {
        match self.round.get() {
            0 => self.observe(name, t),
            k => self.observe(&format!("s{k} {name}"), t),
        }
    }

    /// The state entering the first updated layer: the embedded tokens through the layers below.
    ///
    /// # Shapes
    /// → `[seq_length, d_model]`
    pub(crate) fn lower_state(&self, ctx: &SequenceContext<B>) -> Tensor<B, 2> {
        let reference = self.reference;
        reference.embedded_through(&reference.params.layers[..self.first], ctx)
    }

    /// What the loss gradient of this sequence reads.
    pub(crate) fn targets(&self, ctx: &SequenceContext<B>) -> StepTargets<B> {
        let [seq_length] = ctx.ids.dims();
        let step = &self.reference.config.step;
        StepTargets {
            input_ids: ctx.ids.clone().reshape([1, seq_length]),
            next_target: ctx.next_target.clone().unsqueeze_dim::<3>(0),
            loss_gradient: step.loss_gradient,
            n_forward_backward: step.n_forward_backward,
        }
    }

    /// The final norm's backward from the loss gradient `grad` (`[1, seq_length, d_model]`) at
    /// its output: the gradient at its input, and its gain's gradient when norm gains move.
    pub(crate) fn final_gradients(
        &self,
        grad: Tensor<B, 3>,
        h_last: &Tensor<B, 2>,
        gain: &Tensor<B, 1>,
        ctx: &SequenceContext<B>,
    ) -> (Tensor<B, 2>, Option<Tensor<B, 1>>) {
        let config = &self.reference.config;
        let (s, mode, eps) = (
            config.step.scale_embeddings,
            config.step.derivatives,
            self.reference.params.rms_eps,
        );
        let [_, seq_length, d_model] = grad.dims();
        let grad = grad.reshape([seq_length, d_model]);
        self.observe_step("grad", grad.clone());
        let delta = rms_norm_backward(h_last.clone(), gain, grad.clone(), eps, mode, s);
        self.observe_step("delta_top", delta.clone());
        let gain_gradient = config
            .updates
            .norm_gains
            .then(|| rms_gain_gradient(h_last.clone(), grad, &ctx.train, eps));
        (delta, gain_gradient)
    }

    /// One updated layer's approximate backward (`index` among the updated layers, 0 the lowest):
    /// the gradient at its input and the gradients of its weights that the step updates. The
    /// observed `dw_*` are `−η ×` those gradients (computed only with an observer).
    ///
    /// # Shapes
    /// `delta`: `[seq_length, d_model]` → `[seq_length, d_model]`
    pub(crate) fn layer_gradients(
        &self,
        delta: Tensor<B, 2>,
        layer: &LlamaLayerParams<B>,
        trace: &LayerTrace<B>,
        ctx: &SequenceContext<B>,
        index: usize,
    ) -> (Tensor<B, 2>, LayerGradients<B>) {
        let reference = self.reference;
        let (params, cfg) = (&reference.params, &reference.config);
        let (lr, s, mode, eps) = (
            cfg.step.inner_lr,
            cfg.step.scale_embeddings,
            cfg.step.derivatives,
            params.rms_eps,
        );
        let updates = cfg.updates;
        let train = &ctx.train;
        let observing = self.observing();
        let see = |name: &str, t: &Tensor<B, 2>| {
            if observing {
                self.observe_step(&format!("L{} {name}", self.first + index), t.clone());
            }
        };
        let mut gradients = LayerGradients::default();
        // SwiGLU MLP.
        let d_hidden = delta.clone().matmul(layer.w_down.clone().transpose());
        see("d_hidden", &d_hidden);
        let (d_gate, d_up) =
            swiglu_backward(trace.gate_pre.clone(), trace.up.clone(), d_hidden, mode, s);
        see("d_gate", &d_gate);
        see("d_up", &d_up);
        let dm = d_gate.clone().matmul(layer.w_gate.clone().transpose())
            + d_up.clone().matmul(layer.w_up.clone().transpose());
        see("dm", &dm);
        if updates.mlp {
            gradients.w_down = Some(weight_gradient(
                &trace.hidden,
                &(delta.clone() * train.clone()),
            ));
            gradients.w_gate = Some(weight_gradient(&trace.m, &(d_gate * train.clone())));
            gradients.w_up = Some(weight_gradient(&trace.m, &(d_up * train.clone())));
        }
        if updates.norm_gains {
            gradients.mlp_norm = Some(rms_gain_gradient(
                trace.h_mid.clone(),
                dm.clone(),
                train,
                eps,
            ));
        }
        let rms2_back = rms_norm_backward(trace.h_mid.clone(), &layer.mlp_norm, dm, eps, mode, s);
        see("rms2_back", &rms2_back);
        let delta_mid = delta + rms2_back;
        see("delta_mid", &delta_mid);
        // Output projection and value-only attention backward (scores recomputed, not differentiated).
        let d_o = delta_mid.clone().matmul(layer.w_o.clone().transpose());
        see("d_o", &d_o);
        if updates.attn_output {
            gradients.w_o = Some(weight_gradient(
                &trace.o,
                &(delta_mid.clone() * train.clone()),
            ));
        }
        let probs = attention_probs(&trace.q_rot, &trace.k_rot, &ctx.attention_bias);
        let weights = probs.clone() * ctx.backward_mask.clone(); // [n_heads, i, j]
        let d_o_heads = split_heads(d_o, params.n_heads); // [n_heads, i, head_dim]
        let dv_heads = weights.swap_dims(1, 2).matmul(d_o_heads.clone()); // [n_heads, j, head_dim]
        let n_rep = params.n_heads / params.n_kv_heads;
        let dv = merge_heads(sum_kv_groups(dv_heads, n_rep)); // [seq_length, n_kv · head_dim]
        see("dv", &dv);
        let mut da = dv.clone().matmul(layer.w_v.clone().transpose());
        if cfg.step.attention_backward == AttentionBackwardMode::Exact {
            let d_scores = attention_score_backward(layer, params, trace, probs, d_o_heads, ctx);
            see("da_scores", &d_scores);
            da = da + d_scores;
        }
        see("da", &da);
        if updates.attn_value {
            gradients.w_v = Some(weight_gradient(&trace.a, &(dv * train.clone())));
        }
        if updates.norm_gains {
            gradients.attn_norm = Some(rms_gain_gradient(
                trace.h_in.clone(),
                da.clone(),
                train,
                eps,
            ));
        }
        let rms1_back = rms_norm_backward(trace.h_in.clone(), &layer.attn_norm, da, eps, mode, s);
        see("rms1_back", &rms1_back);
        let delta_in = delta_mid + rms1_back;
        see("delta_in", &delta_in);
        if observing {
            for (name, gradient, old) in [
                ("dw_gate", &gradients.w_gate, &layer.w_gate),
                ("dw_up", &gradients.w_up, &layer.w_up),
                ("dw_down", &gradients.w_down, &layer.w_down),
                ("dw_o", &gradients.w_o, &layer.w_o),
                ("dw_v", &gradients.w_v, &layer.w_v),
            ] {
                match gradient {
                    Some(g) => see(name, &g.clone().mul_scalar(-lr)),
                    None => see(name, &old.zeros_like()),
                }
            }
        }
        (delta_in, gradients)
    }
}

/// The LLaMA family's functional reference on one sequence: RMSNorm, rotary grouped-query
/// attention and SwiGLU as plain tensor maths (docs/tint-llama.md); the step subtracts `η` times
/// each layer's gradients as soon as they are computed (the layers below read only the gradient
/// at its input, computed before), and the final norm's gain when norm gains move.
impl<B: Backend> StepFamily<B> for SequenceStep<'_, '_, B> {
    type Context = SequenceContext<B>;
    /// `[seq_length, d_model]`.
    type State = Tensor<B, 2>;
    type LayerWeights = LlamaLayerParams<B>;
    /// The final norm's gain `[d_model]`.
    type FinalWeights = Tensor<B, 1>;
    type LayerActs = LayerTrace<B>;
    /// The last layer's output, the final norm's input.
    type FinalState = Tensor<B, 2>;

    fn head_matrix(&self) -> Tensor<B, 2> {
        self.reference.params.head_rows()
    }

    fn forward_layer(
        &self,
        h: Tensor<B, 2>,
        layer: &LlamaLayerParams<B>,
        ctx: &SequenceContext<B>,
    ) -> (Tensor<B, 2>, LayerTrace<B>) {
        layer_forward(layer, &self.reference.params, h, ctx)
    }

    fn final_norm(
        &self,
        h: Tensor<B, 2>,
        gain: &Tensor<B, 1>,
        _ctx: &SequenceContext<B>,
    ) -> FinalPass<B, Tensor<B, 2>> {
        let params = &self.reference.params;
        let hf = rms_norm(h.clone(), gain, params.rms_eps);
        let logits = hf.clone().matmul(params.head_rows().transpose());
        FinalPass {
            state: h,
            hf: hf.unsqueeze_dim::<3>(0),
            logits: logits.unsqueeze_dim::<3>(0),
        }
    }

    fn final_backward(
        &self,
        grad: Tensor<B, 3>,
        h_last: &Tensor<B, 2>,
        gain: &mut Tensor<B, 1>,
        ctx: &SequenceContext<B>,
    ) -> Tensor<B, 2> {
        let (delta, gain_gradient) = self.final_gradients(grad, h_last, gain, ctx);
        descend(gain, &gain_gradient, self.reference.config.step.inner_lr);
        delta
    }

    fn backward_layer(
        &self,
        delta: Tensor<B, 2>,
        layer: &mut LlamaLayerParams<B>,
        trace: &LayerTrace<B>,
        ctx: &SequenceContext<B>,
        index: usize,
    ) -> Tensor<B, 2> {
        let (delta_in, gradients) = self.layer_gradients(delta, layer, trace, ctx, index);
        gradients.descend_layer(layer, self.reference.config.step.inner_lr);
        delta_in
    }

    /// The first pass's intermediates (`L{l} {h_in|a|o|h_mid|m|gate_pre|up|hidden}`, `h_last`,
    /// `hf`, `first_logits`) go to the observer; after every pass, the number of the step that
    /// follows is kept for the names of its backward.
    fn passed(&self, round: usize, pass: &TopPass<B, Self>) {
        self.round.set(round);
        if round > 0 || !self.observing() {
            return;
        }
        for (l, trace) in pass.acts.iter().enumerate() {
            let l = self.first + l;
            for (name, t) in [
                ("h_in", &trace.h_in),
                ("a", &trace.a),
                ("o", &trace.o),
                ("h_mid", &trace.h_mid),
                ("m", &trace.m),
                ("gate_pre", &trace.gate_pre),
                ("up", &trace.up),
                ("hidden", &trace.hidden),
            ] {
                self.observe(&format!("L{l} {name}"), t.clone());
            }
        }
        let matrix = |t: &Tensor<B, 3>| {
            let [_, rows, width] = t.dims();
            t.clone().reshape([rows, width])
        };
        self.observe("h_last", pass.last.state.clone());
        self.observe("hf", matrix(&pass.last.hf));
        self.observe("first_logits", matrix(&pass.last.logits));
    }
}
