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
use crate::input::{Masks, SimInput};
use crate::loss::{eval_loss, head_logits, loss_gradient_with_logits};
use crate::math::{activate, activation_backward, layer_norm_backward, normalize};
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

/// `[batch_size, seq_length, d_model]` → `[batch_size, n_heads, seq_length, head_dim]`.
fn split_heads<B: Backend>(x: Tensor<B, 3>, n_heads: usize) -> Tensor<B, 4> {
    let [batch_size, seq_length, d_model] = x.dims();
    x.reshape([batch_size, seq_length, n_heads, d_model / n_heads])
        .swap_dims(1, 2)
}

/// `[batch_size, n_heads, seq_length, head_dim]` → `[batch_size, seq_length, d_model]`.
fn merge_heads<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 3> {
    let [batch_size, n_heads, seq_length, head_dim] = x.dims();
    x.swap_dims(1, 2)
        .reshape([batch_size, seq_length, n_heads * head_dim])
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
    keep: bool,
) -> (Tensor<B, 3>, Option<LayerTrace<B>>) {
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
    let trace = keep.then(|| LayerTrace {
        h_in: h,
        a,
        probs,
        o,
        h_mid,
        m,
        u,
        v,
        h_post,
    });
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

/// Logits `LN_f(h) Hᵀ` (`H` the LM head, [`AuxParams::head_matrix`]; no `LN_f` for post-LN OPT) and
/// the LN_f output.
fn head<B: Backend>(aux: &AuxParams<B>, h: Tensor<B, 3>, eps: f64) -> (Tensor<B, 3>, Tensor<B, 3>) {
    let hf = match &aux.ln_f {
        Some(ln_f) => layer_norm(h, ln_f, eps),
        None => h,
    };
    let logits = head_logits(hf.clone(), aux.head_matrix());
    (logits, hf)
}

/// The evaluation targets: position `t` is scored against token `t + 1` iff that token is not a
/// training token (docs/construction.md §9.3: positions `Ltr-1 .. T-2`).
pub(crate) fn eval_targets<B: Backend>(input: &SimInput<B>) -> Vec<Vec<bool>> {
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

/// The functional reference (docs/construction.md §9): a TinT step computed directly on the auxiliary weights.
#[derive(Debug, Clone)]
pub struct FunctionalReference<B: Backend> {
    aux: AuxParams<B>,
    config: TintConfig,
}

/// A forward pass from layer `first` up, with traces.
struct TopPass<B: Backend> {
    traces: Vec<LayerTrace<B>>,
    h_last: Tensor<B, 3>,
    hf: Tensor<B, 3>,
    logits: Tensor<B, 3>,
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
        let masks = input.masks(self.aux.dtype(), self.config.official_compat);
        let attention_bias = masks.attention_bias.repeat_dim(1, self.aux.n_heads);
        let mut h = embed(&self.aux, &input);
        for layer in &self.aux.layers {
            h = layer_forward(layer, h, &self.aux, &attention_bias, eps, false).0;
        }
        Ok(head(&self.aux, h, eps).0)
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
            h = layer_forward(
                layer,
                h,
                &self.aux,
                &masks.attention_bias,
                cfg.epsilon,
                false,
            )
            .0;
        }
        let continued = h;
        let mut params = self.aux.clone();
        let mut pass = self.top_pass(&params, continued.clone(), first, &masks);
        let first_logits = pass.logits.clone();
        for _ in 0..cfg.step.n_forward_backward {
            self.descend(&mut params, &pass, first, input, &masks);
            pass = self.top_pass(&params, continued.clone(), first, &masks);
        }
        let scored = eval_targets(input);
        let first_loss = eval_loss(first_logits.clone(), &input.input_ids, &scored);
        let final_loss = eval_loss(pass.logits.clone(), &input.input_ids, &scored);
        Ok((
            SimOutput {
                first_logits,
                final_logits: pass.logits,
                first_loss,
                final_loss,
            },
            params,
        ))
    }

    fn top_pass(
        &self,
        params: &AuxParams<B>,
        mut h: Tensor<B, 3>,
        first: usize,
        masks: &Masks<B>,
    ) -> TopPass<B> {
        let mut traces = Vec::with_capacity(params.layers.len() - first);
        for layer in &params.layers[first..] {
            let (out, trace) = layer_forward(
                layer,
                h,
                params,
                &masks.attention_bias,
                self.config.epsilon,
                true,
            );
            traces.extend(trace);
            h = out;
        }
        let (logits, hf) = head(params, h.clone(), self.config.epsilon);
        TopPass {
            traces,
            h_last: h,
            hf,
            logits,
        }
    }

    /// One approximate backward pass and descent step (docs/construction.md §9.2) on `params`.
    fn descend(
        &self,
        params: &mut AuxParams<B>,
        pass: &TopPass<B>,
        first: usize,
        input: &SimInput<B>,
        masks: &Masks<B>,
    ) {
        let cfg = &self.config;
        let (lr, eps, s, mode) = (
            cfg.step.inner_lr,
            cfg.epsilon,
            cfg.step.scale_embeddings,
            cfg.step.derivatives,
        );
        let activation = params.activation;
        let train = &masks.train;
        let grad = loss_gradient_with_logits(
            pass.hf.clone(),
            Some(pass.logits.clone()),
            params.head_matrix(),
            &input.input_ids,
            &masks.next_target,
            cfg.step.loss_gradient,
        );
        let mut delta = match &mut params.ln_f {
            Some(ln_f) => {
                let delta = layer_norm_backward(
                    pass.h_last.clone(),
                    ln_f.gamma.clone(),
                    grad.clone(),
                    eps,
                    mode,
                    s,
                );
                ln_f.beta = descend_bias(&ln_f.beta, &(grad * train.clone()), lr);
                delta
            }
            None => grad,
        };
        let post_ln = params.norm_placement == NormPlacement::PostLn;
        let d_model = params.dims().d_model;
        let ln_back = |x: &Tensor<B, 3>, ln: &LayerNormParams<B>, dy: Tensor<B, 3>| {
            layer_norm_backward(x.clone(), ln.gamma.clone(), dy, eps, mode, s)
        };
        for (l, trace) in pass.traces.iter().enumerate().rev() {
            let layer = &params.layers[first + l];
            let n_heads = params.n_heads;
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
            params.layers[first + l] = updated;
            delta = delta_in;
        }
    }
}
