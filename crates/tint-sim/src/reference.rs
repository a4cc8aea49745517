//! The functional reference of docs/construction.md §9: what one simulated TinT step computes, written with plain
//! tensor ops on the auxiliary weights (forward, approximate backward, descent, final forward).
//!
//! It is the oracle for the simulator and a fast path: `O(aux forward)` per pass instead of the
//! `(S+1)^2`-times wider TinT network.

use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

use crate::config::TintConfig;
use crate::error::SimError;
use crate::family_step::{run_rounds, FinalPass, StepFamily, StepTargets};
use crate::input::{Masks, SimInput};
use crate::loss::head_logits;
use crate::math::{
    activate, activation_backward, layer_norm_backward, merge_heads, normalize, split_heads,
};
pub use crate::output::SimOutput;
use crate::params::{AuxParams, LayerNormParams, LayerParams, NormPlacement};

/// Activations of one layer kept for its backward pass (docs/construction.md §9.1).
#[derive(Debug, Clone)]
pub(crate) struct LayerTrace<B: Backend> {
    /// Layer input `[batch_size, seq_length, d_model]`.
    pub h_in: Tensor<B, 3>,
    /// Attention input: the LayerNorm-1 output (pre-LN) or the layer input (post-LN).
    pub a: Tensor<B, 3>,
    /// Attention probabilities `[batch_size, n_heads, seq_length, seq_length]` (query, key).
    pub probs: Tensor<B, 4>,
    /// Concatenated head outputs before the output projection.
    pub o: Tensor<B, 3>,
    /// Residual stream after attention (post-LN: the LayerNorm-1 input).
    pub h_mid: Tensor<B, 3>,
    /// MLP input: the LayerNorm-2 output (pre-LN) or the LayerNorm-1 output (post-LN).
    pub m: Tensor<B, 3>,
    /// MLP pre-activation `[batch_size, seq_length, d_inner]`.
    pub u: Tensor<B, 3>,
    /// MLP activation.
    pub v: Tensor<B, 3>,
    /// Residual stream after the MLP: the layer output (pre-LN) or the LayerNorm-2 input (post-LN).
    pub h_post: Tensor<B, 3>,
}

fn layer_norm<B: Backend>(x: Tensor<B, 3>, ln: &LayerNormParams<B>, eps: f64) -> Tensor<B, 3> {
    normalize(x, eps) * ln.gamma.clone() + ln.beta.clone()
}

/// Descent step `W - eta x^T (train * dy)` for weights `[copies, in, out]`.
fn descend_weight<B: Backend>(
    w: &Tensor<B, 3>,
    x: &Tensor<B, 3>,
    dy_train: &Tensor<B, 3>,
    lr: f64,
) -> Tensor<B, 3> {
    w.clone()
        - x.clone()
            .swap_dims(1, 2)
            .matmul(dy_train.clone())
            .mul_scalar(lr)
}

/// Descent step `b - eta Σ_t train_t dy_t` for biases `[copies, 1, out]`.
fn descend_bias<B: Backend>(b: &Tensor<B, 3>, dy_train: &Tensor<B, 3>, lr: f64) -> Tensor<B, 3> {
    b.clone() - dy_train.clone().sum_dim(1).mul_scalar(lr)
}

/// Runs one block (pre-LN or post-LN, [`AuxParams::norm_placement`]; docs/construction.md §9.1, §16);
/// returns its output and, if `keep`, its trace.
///
/// # Shapes
/// `h`: `[batch_size, seq_length, d_model]`; `attention_bias`: `[batch_size, 1, seq_length, seq_length]`.
pub(crate) fn layer_forward<B: Backend>(
    layer: &LayerParams<B>,
    h: Tensor<B, 3>,
    aux: &AuxParams<B>,
    attention_bias: &Tensor<B, 4>,
    eps: f64,
) -> (Tensor<B, 3>, LayerTrace<B>) {
    let n_heads = aux.n_heads;
    let post_ln = aux.norm_placement == NormPlacement::PostLn;
    let a = if post_ln {
        h.clone()
    } else {
        layer_norm(h.clone(), &layer.ln_1, eps)
    };
    let q = split_heads(
        a.clone().matmul(layer.w_q.clone()) + layer.b_q.clone(),
        n_heads,
    );
    let k = split_heads(
        a.clone().matmul(layer.w_k.clone()) + layer.b_k.clone(),
        n_heads,
    );
    let v_heads = split_heads(
        a.clone().matmul(layer.w_v.clone()) + layer.b_v.clone(),
        n_heads,
    );
    let head_dim = q.dims()[3];
    // [batch_size, n_heads, seq_length (query), seq_length (key)]
    let scores = q
        .matmul(k.swap_dims(2, 3))
        .div_scalar((head_dim as f64).sqrt())
        + attention_bias.clone();
    let probs = softmax(scores, 3);
    let o = merge_heads(probs.clone().matmul(v_heads));
    let h_mid = h.clone() + o.clone().matmul(layer.w_o.clone()) + layer.b_o.clone();
    let m = if post_ln {
        layer_norm(h_mid.clone(), &layer.ln_1, eps)
    } else {
        layer_norm(h_mid.clone(), &layer.ln_2, eps)
    };
    let u = m.clone().matmul(layer.w_fc.clone()) + layer.b_fc.clone();
    let v = activate(u.clone(), aux.activation);
    let mlp = v.clone().matmul(layer.w_proj.clone()) + layer.b_proj.clone();
    let h_post = if post_ln {
        m.clone() + mlp
    } else {
        h_mid.clone() + mlp
    };
    let out = if post_ln {
        layer_norm(h_post.clone(), &layer.ln_2, eps)
    } else {
        h_post.clone()
    };
    let trace = LayerTrace {
        h_in: h,
        a,
        probs,
        o,
        h_mid,
        m,
        u,
        v,
        h_post,
    };
    (out, trace)
}

/// Token + position embeddings `[batch_size, seq_length, d_model]`.
pub(crate) fn embed<B: Backend>(aux: &AuxParams<B>, input: &SimInput<B>) -> Tensor<B, 3> {
    let [batch_size, seq_length] = input.dims();
    let d_model = aux.dims().d_model;
    let tokens = aux
        .token_embedding
        .clone()
        .select(
            0,
            input.input_ids.clone().reshape([batch_size * seq_length]),
        )
        .reshape([batch_size, seq_length, d_model]);
    let positions = aux
        .position_embedding
        .clone()
        .slice([
            aux.position_offset..aux.position_offset + seq_length,
            0..d_model,
        ])
        .unsqueeze_dim::<3>(0);
    tokens + positions
}

/// The functional reference (docs/construction.md §9): a TinT step computed directly on the auxiliary weights.
#[derive(Debug, Clone)]
pub struct FunctionalReference<B: Backend> {
    aux: AuxParams<B>,
    config: TintConfig,
}

impl<B: Backend> FunctionalReference<B> {
    /// Checks the model and the configuration (the reference needs no TinT size constraint).
    pub fn new(aux: AuxParams<B>, config: TintConfig) -> Result<Self, SimError> {
        aux.check_shapes()?;
        config.validate_reference(aux.layers.len())?;
        Ok(Self { aux, config })
    }

    /// The configuration.
    pub fn config(&self) -> &TintConfig {
        &self.config
    }

    /// The auxiliary weights.
    pub fn aux(&self) -> &AuxParams<B> {
        &self.aux
    }

    /// Runs the forward pass, `n_forward_backward` approximate SGD steps and the final forward pass.
    ///
    /// # Shapes
    /// `input.input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    pub fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError> {
        input.validate(self.aux.dims().vocab_size, self.aux.max_seq_length())?;
        crate::sequences::forward_in_parallel(input, |input| {
            self.forward_validated(input).map(|(out, _)| out)
        })
    }

    /// Like [`Self::forward`], also returning the updated weights (layers that were updated carry one
    /// copy per sequence).
    pub fn forward_with_params(
        &self,
        input: &SimInput<B>,
    ) -> Result<(SimOutput<B>, AuxParams<B>), SimError> {
        input.validate(self.aux.dims().vocab_size, self.aux.max_seq_length())?;
        self.forward_validated(input)
    }

    /// One TinT step on `input`, a batch of one sequence, and the reference whose weights are the
    /// updated ones: its [`Self::logits`] is the plain forward of the updated model (on `input`'s
    /// ids, the step's `final_logits`; on other ids, what a model trained on `input` predicts).
    ///
    /// # Shapes
    /// `input.input_ids`: `[1, seq_length]` → logits `[1, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// As [`Self::forward`], and [`SimError::InvalidInput`] for a batch of more than one sequence
    /// (each would get its own update).
    pub fn updated(&self, input: &SimInput<B>) -> Result<(SimOutput<B>, Self), SimError> {
        let [batch_size, _] = input.dims();
        if batch_size != 1 {
            return Err(SimError::InvalidInput(format!(
                "an updated model comes from one sequence; got a batch of {batch_size}"
            )));
        }
        input.validate(self.aux.dims().vocab_size, self.aux.max_seq_length())?;
        let device = self.aux.device();
        let (output, aux) =
            tint_ops::branches::on_worker::<B, _, _>(&device, || self.forward_validated(input))?;
        let config = self.config.clone();
        Ok((output, Self { aux, config }))
    }

    /// The plain forward of the auxiliary model with this reference's weights — embeddings, every
    /// block, the final LayerNorm and the head; no step — computed by the same code as the final
    /// forward of [`Self::forward`]. On the reference [`Self::updated`] returns, the updated
    /// model's logits.
    ///
    /// # Shapes
    /// `input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// [`SimError::InvalidInput`] for ids that do not fit the model (as [`SimInput::validate`]),
    /// and for weights holding one copy per sequence of a batch of another size.
    pub fn logits(&self, input_ids: Tensor<B, 2, Int>) -> Result<Tensor<B, 3>, SimError> {
        let [batch_size, _] = input_ids.dims();
        let input = SimInput::with_train_lengths(input_ids, &vec![0; batch_size])?;
        input.validate(self.aux.dims().vocab_size, self.aux.max_seq_length())?;
        let mut copies = self.aux.layers.iter().map(|l| l.w_v.dims()[0]);
        if let Some(copies) = copies.find(|&c| c != 1 && c != batch_size) {
            return Err(SimError::InvalidInput(format!(
                "the weights hold {copies} copies (one per sequence of their step); \
                 a batch of {batch_size} sequences needs 1 or {batch_size}"
            )));
        }
        let eps = self.config.epsilon;
        // As in `forward_validated`: the score mask repeated over the heads once.
        let mut masks = input.masks(self.aux.dtype(), self.config.official_compat);
        masks.attention_bias = masks.attention_bias.repeat_dim(1, self.aux.n_heads);
        let mut h = embed(&self.aux, &input);
        for layer in &self.aux.layers {
            h = layer_forward(layer, h, &self.aux, &masks.attention_bias, eps).0;
        }
        Ok(self.final_norm(h, &self.aux.ln_f, &masks).logits)
    }

    /// [`Self::forward_with_params`] on an input that passed [`SimInput::validate`].
    fn forward_validated(
        &self,
        input: &SimInput<B>,
    ) -> Result<(SimOutput<B>, AuxParams<B>), SimError> {
        let dims = self.aux.dims();
        let cfg = &self.config;
        let mut masks = input.masks(self.aux.dtype(), cfg.official_compat);
        // The score masks repeated over the heads once: flex walks an operand broadcast over a
        // middle dimension element by element, at every layer of every pass.
        masks.attention_bias = masks.attention_bias.repeat_dim(1, self.aux.n_heads);
        masks.backward = masks.backward.repeat_dim(1, self.aux.n_heads);
        let first = dims.n_layers - cfg.simulated_layers(dims.n_layers);
        let mut h = embed(&self.aux, input);
        for layer in &self.aux.layers[..first] {
            h = layer_forward(layer, h, &self.aux, &masks.attention_bias, cfg.epsilon).0;
        }
        let targets = StepTargets {
            input_ids: input.input_ids.clone(),
            next_target: masks.next_target.clone(),
            loss_gradient: cfg.step.loss_gradient,
            n_forward_backward: cfg.step.n_forward_backward,
        };
        let rounds = run_rounds(
            self,
            &masks,
            &targets,
            h,
            self.aux.layers[first..].to_vec(),
            self.aux.ln_f.clone(),
        );
        let mut params = self.aux.clone();
        params.layers.truncate(first);
        params.layers.extend(rounds.layers);
        params.ln_f = rounds.final_weights;
        let output = SimOutput::scored(input, rounds.first_logits, rounds.final_logits);
        Ok((output, params))
    }
}

/// The GPT-2 / OPT family's functional reference in the shared step: plain tensor maths on the
/// auxiliary weights (docs/construction.md §9), `[batch_size, T, D]` states; every updated layer
/// and `ln_f` descend (weights that hold one copy per sequence after the first step).
impl<B: Backend> StepFamily<B> for FunctionalReference<B> {
    /// The masks, the score masks repeated over the heads.
    type Context = Masks<B>;
    type State = Tensor<B, 3>;
    type LayerWeights = LayerParams<B>;
    /// `ln_f` (none for post-LN OPT).
    type FinalWeights = Option<LayerNormParams<B>>;
    type LayerActs = LayerTrace<B>;
    /// The last layer's output, `ln_f`'s input.
    type FinalState = Tensor<B, 3>;

    fn head_matrix(&self) -> Tensor<B, 2> {
        self.aux.head_matrix().clone()
    }

    fn forward_layer(
        &self,
        h: Tensor<B, 3>,
        layer: &LayerParams<B>,
        masks: &Masks<B>,
    ) -> (Tensor<B, 3>, LayerTrace<B>) {
        layer_forward(
            layer,
            h,
            &self.aux,
            &masks.attention_bias,
            self.config.epsilon,
        )
    }

    /// Logits `LN_f(h) Hᵀ` (`H` the LM head, [`AuxParams::head_matrix`]; no `LN_f` for post-LN
    /// OPT).
    fn final_norm(
        &self,
        h: Tensor<B, 3>,
        ln_f: &Option<LayerNormParams<B>>,
        _masks: &Masks<B>,
    ) -> FinalPass<B, Tensor<B, 3>> {
        let hf = match ln_f {
            Some(ln_f) => layer_norm(h.clone(), ln_f, self.config.epsilon),
            None => h.clone(),
        };
        let logits = head_logits(hf.clone(), self.aux.head_matrix());
        FinalPass {
            state: h,
            hf,
            logits,
        }
    }

    /// `ln_f`'s backward and its bias's descent (docs/construction.md §9.2).
    fn final_backward(
        &self,
        grad: Tensor<B, 3>,
        h_last: &Tensor<B, 3>,
        ln_f: &mut Option<LayerNormParams<B>>,
        masks: &Masks<B>,
    ) -> Tensor<B, 3> {
        let step = &self.config.step;
        let Some(ln_f) = ln_f else {
            return grad;
        };
        let delta = layer_norm_backward(
            h_last.clone(),
            ln_f.gamma.clone(),
            grad.clone(),
            self.config.epsilon,
            step.derivatives,
            step.scale_embeddings,
        );
        ln_f.beta = descend_bias(&ln_f.beta, &(grad * masks.train.clone()), step.inner_lr);
        delta
    }

    /// One layer's approximate backward and descent (docs/construction.md §9.2); every layer
    /// descends its `ln_1` bias, the lowest one too (`index` is not used).
    fn backward_layer(
        &self,
        delta: Tensor<B, 3>,
        layer_weights: &mut LayerParams<B>,
        trace: &LayerTrace<B>,
        masks: &Masks<B>,
        _index: usize,
    ) -> Tensor<B, 3> {
        let cfg = &self.config;
        let (lr, eps, s, mode) = (
            cfg.step.inner_lr,
            cfg.epsilon,
            cfg.step.scale_embeddings,
            cfg.step.derivatives,
        );
        let activation = self.aux.activation;
        let train = &masks.train;
        let post_ln = self.aux.norm_placement == NormPlacement::PostLn;
        let d_model = self.aux.dims().d_model;
        let ln_back = |x: &Tensor<B, 3>, ln: &LayerNormParams<B>, dy: Tensor<B, 3>| {
            layer_norm_backward(x.clone(), ln.gamma.clone(), dy, eps, mode, s)
        };
        let layer = &*layer_weights;
        let n_heads = self.aux.n_heads;
        // Post-LN: the block ends with LN_2 after the MLP residual add (docs/construction.md §16):
        // its backward comes first and its bias takes the step of the gradient at its output.
        let delta_mlp = if post_ln {
            ln_back(&trace.h_post, &layer.ln_2, delta.clone())
        } else {
            delta.clone()
        };
        // MLP (all chunks at once: chunking is element-wise equivalent).
        let delta_train = delta_mlp.clone() * train.clone();
        let dv = delta_mlp
            .clone()
            .matmul(layer.w_proj.clone().swap_dims(1, 2));
        let du = activation_backward(trace.u.clone(), dv, activation, mode, s);
        let du_train = du.clone() * train.clone();
        let dm = du.matmul(layer.w_fc.clone().swap_dims(1, 2));
        let n_chunks = layer.w_fc.dims()[2] / d_model;
        let bias_lr = if cfg.official_compat {
            lr * n_chunks as f64
        } else {
            lr
        };
        // `delta_mid`: the gradient at the attention residual sum; `ln_1_grad` / `ln_2_grad`:
        // the gradients at the LayerNorm outputs (their bias steps).
        let (delta_mid, ln_1_post_grad, ln_2_grad) = if post_ln {
            let dm_total = delta_mlp + dm;
            let delta_mid = ln_back(&trace.h_mid, &layer.ln_1, dm_total.clone());
            (delta_mid, Some(dm_total), delta.clone())
        } else {
            let delta_mid = delta.clone() + ln_back(&trace.h_mid, &layer.ln_2, dm.clone());
            (delta_mid, None, dm)
        };
        let delta_mid_train = delta_mid.clone() * train.clone();
        // Attention output projection and value-only attention backward (stop-gradient on scores).
        let d_o = delta_mid.clone().matmul(layer.w_o.clone().swap_dims(1, 2));
        let weights = trace.probs.clone() * masks.backward.clone(); // [B, H, i, j]
        let dv_att = merge_heads(weights.swap_dims(2, 3).matmul(split_heads(d_o, n_heads)));
        let dv_att_train = dv_att.clone() * train.clone();
        let da = dv_att.matmul(layer.w_v.clone().swap_dims(1, 2));
        let (delta_in, ln_1_grad) = match ln_1_post_grad {
            Some(grad) => (delta_mid.clone() + da, grad),
            None => (
                delta_mid.clone() + ln_back(&trace.h_in, &layer.ln_1, da.clone()),
                da,
            ),
        };
        let updated = LayerParams {
            ln_1: LayerNormParams {
                gamma: layer.ln_1.gamma.clone(),
                beta: descend_bias(&layer.ln_1.beta, &(ln_1_grad * train.clone()), lr),
            },
            w_q: layer.w_q.clone(),
            b_q: layer.b_q.clone(),
            w_k: layer.w_k.clone(),
            b_k: layer.b_k.clone(),
            w_v: descend_weight(&layer.w_v, &trace.a, &dv_att_train, lr),
            b_v: descend_bias(&layer.b_v, &dv_att_train, lr),
            w_o: descend_weight(&layer.w_o, &trace.o, &delta_mid_train, lr),
            b_o: descend_bias(&layer.b_o, &delta_mid_train, lr),
            ln_2: LayerNormParams {
                gamma: layer.ln_2.gamma.clone(),
                beta: descend_bias(&layer.ln_2.beta, &(ln_2_grad * train.clone()), lr),
            },
            w_fc: descend_weight(&layer.w_fc, &trace.m, &du_train, lr),
            b_fc: descend_bias(&layer.b_fc, &du_train, lr),
            w_proj: descend_weight(&layer.w_proj, &trace.v, &delta_train, lr),
            b_proj: descend_bias(&layer.b_proj, &delta_train, bias_lr),
        };
        *layer_weights = updated;
        delta_in
    }
}
