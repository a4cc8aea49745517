//! The LLaMA functional reference: what one simulated TinT step computes on a LLaMA-family auxiliary
//! model (RMSNorm, SwiGLU, rotary embeddings, grouped-query attention), in the approximation style of
//! docs/construction.md §9 — first-order backward through the norms and the SwiGLU gate, value-only attention
//! backward (or, as diagnostics, exact derivatives and the exact attention backward), SGD on the summed next-token loss of the training tokens (docs/tint-llama.md).
//!
//! Sequences of a batch are independent (each gets its own update), so they are processed one at a
//! time with token-major activations `[seq_length, width]`.

use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Int, Tensor, TensorData};
use tint_aux::AuxModel;
use tint_ops::rotary::{apply_rotary, rotary_tables_dtype};

use super::config::LlamaTintConfig;
use super::math::{rms_norm, swiglu};
use super::params::{LlamaLayerParams, LlamaParams};
use crate::error::SimError;
use crate::family_step::{run_rounds, StepFamily};
use crate::input::SimInput;
use crate::math::{merge_heads, split_heads};
use crate::reference::SimOutput;

mod direction;
mod sequence_step;
pub use direction::LlamaDirection;
use sequence_step::SequenceStep;

/// Where a pass reports its intermediates by name; `None`: nowhere, and nothing is computed for
/// observation alone.
type Observer<'a, B> = Option<&'a mut dyn FnMut(&str, Tensor<B, 2>)>;

/// Additive score of masked attention entries: finite (no NaN) and small enough that `exp`
/// underflows to exactly 0 in float32 and float64.
const MASKED_SCORE: f64 = -1.0e30;

/// Activations of one block kept for its backward pass.
#[derive(Debug, Clone)]
pub(crate) struct LayerTrace<B: Backend> {
    /// Block input `[seq_length, d_model]`.
    h_in: Tensor<B, 2>,
    /// `RMSNorm₁(h_in)` `[seq_length, d_model]`.
    a: Tensor<B, 2>,
    /// Rotated queries `[n_heads, seq_length, head_dim]`.
    q_rot: Tensor<B, 3>,
    /// Rotated keys `[n_kv_heads, seq_length, head_dim]`.
    k_rot: Tensor<B, 3>,
    /// Heads concatenated before `W_O` `[seq_length, n_heads · head_dim]`.
    o: Tensor<B, 2>,
    /// Residual stream after attention `[seq_length, d_model]`.
    h_mid: Tensor<B, 2>,
    /// `RMSNorm₂(h_mid)` `[seq_length, d_model]`.
    m: Tensor<B, 2>,
    /// `m W_gate` `[seq_length, d_ff]`.
    gate_pre: Tensor<B, 2>,
    /// `m W_up` `[seq_length, d_ff]`.
    up: Tensor<B, 2>,
    /// `silu(gate_pre) ⊙ up` `[seq_length, d_ff]`.
    hidden: Tensor<B, 2>,
}

/// Per-sequence constants: rotary tables and float masks.
pub(crate) struct SequenceContext<B: Backend> {
    /// Token ids `[seq_length]`.
    ids: Tensor<B, 1, Int>,
    /// RoPE tables `[seq_length, head_dim]`.
    cos: Tensor<B, 2>,
    sin: Tensor<B, 2>,
    /// `[1, seq_length, seq_length]`: 0 where query `i` may attend key `j`, else [`MASKED_SCORE`].
    attention_bias: Tensor<B, 3>,
    /// `[1, seq_length, seq_length]`: `M[j, i]` at `[i, j]` = 1 if `i <= j` or `i` trains.
    backward_mask: Tensor<B, 3>,
    /// `[seq_length, 1]`: 1 on training tokens.
    train: Tensor<B, 2>,
    /// `[seq_length, 1]`: 1 where the target `t + 1` of position `t` counts in the loss.
    next_target: Tensor<B, 2>,
}

/// The LLaMA functional reference.
#[derive(Debug, Clone)]
pub struct LlamaReference<B: Backend> {
    params: LlamaParams<B>,
    config: LlamaTintConfig,
}

/// `[n_kv, s, d]` → `[n_kv · n_rep, s, d]`: query head `h` reads key/value head `h / n_rep`.
fn repeat_kv<B: Backend>(x: Tensor<B, 3>, n_rep: usize) -> Tensor<B, 3> {
    if n_rep == 1 {
        return x;
    }
    let [n_kv, s, d] = x.dims();
    x.unsqueeze_dim::<4>(1)
        .repeat_dim(1, n_rep)
        .reshape([n_kv * n_rep, s, d])
}

/// The adjoint of [`repeat_kv`]: sums the `n_rep` query heads sharing each key/value head.
fn sum_kv_groups<B: Backend>(x: Tensor<B, 3>, n_rep: usize) -> Tensor<B, 3> {
    if n_rep == 1 {
        return x;
    }
    let [n_heads, s, d] = x.dims();
    let n_kv = n_heads / n_rep;
    x.reshape([n_kv, n_rep, s, d])
        .sum_dim(1)
        .reshape([n_kv, s, d])
}

/// RoPE on `[n, seq_length, head_dim]`.
fn rotate<B: Backend>(x: Tensor<B, 3>, cos: &Tensor<B, 2>, sin: &Tensor<B, 2>) -> Tensor<B, 3> {
    apply_rotary(x.unsqueeze_dim::<4>(0), cos.clone(), sin.clone()).squeeze_dim::<3>(0)
}

/// Softmax attention probabilities `[n_heads, seq_length (query), seq_length (key)]` from rotated
/// queries and keys (the value-only backward recomputes them from the stored `q_rot`, `k_rot`).
fn attention_probs<B: Backend>(
    q_rot: &Tensor<B, 3>,
    k_rot: &Tensor<B, 3>,
    attention_bias: &Tensor<B, 3>,
) -> Tensor<B, 3> {
    let [n_heads, seq_length, head_dim] = q_rot.dims();
    let n_rep = n_heads / k_rot.dims()[0];
    let keys = repeat_kv(k_rot.clone(), n_rep);
    let scores = q_rot
        .clone()
        .matmul(keys.swap_dims(1, 2))
        .div_scalar((head_dim as f64).sqrt());
    // The bias as one `T²` row shared by the heads' rows: the same sums as broadcasting it over
    // the heads, in the layout the flex backend adds vectorised (a bias broadcast over the heads
    // is walked element by element).
    let square = seq_length * seq_length;
    let scores = scores.reshape([n_heads, square]) + attention_bias.clone().reshape([1, square]);
    softmax(scores.reshape([n_heads, seq_length, seq_length]), 2)
}

/// The gradient at the attention input `a` through the attention scores (the exact backward,
/// [`AttentionBackwardMode::Exact`]; TinT holds the probabilities constant): with `dP = dO Vᵀ`,
/// `dS = P ⊙ (dP − rowsum(P ⊙ dP)) / √head_dim`, `dQ_rot = dS K_rot`, `dK_rot = dSᵀ Q_rot` (summed
/// over the query heads sharing a key head), the rotations undone (RoPE's adjoint is the rotation
/// by `−θ`: `sin` negated), then `dQ W_Qᵀ + dK W_Kᵀ`. No mask: the rows of `dO` at positions
/// that do not train are zero in exact arithmetic.
///
/// # Shapes
/// `probs`: `[n_heads, seq_length, seq_length]`; `d_o_heads`: `[n_heads, seq_length, head_dim]`
/// → `[seq_length, d_model]`.
fn attention_score_backward<B: Backend>(
    layer: &LlamaLayerParams<B>,
    params: &LlamaParams<B>,
    trace: &LayerTrace<B>,
    probs: Tensor<B, 3>,
    d_o_heads: Tensor<B, 3>,
    ctx: &SequenceContext<B>,
) -> Tensor<B, 2> {
    let n_rep = params.n_heads / params.n_kv_heads;
    let values = repeat_kv(
        split_heads(trace.a.clone().matmul(layer.w_v.clone()), params.n_kv_heads),
        n_rep,
    );
    let d_probs = d_o_heads.matmul(values.swap_dims(1, 2)); // [n_heads, i, j]
    let centred = d_probs.clone() - (probs.clone() * d_probs).sum_dim(2);
    let d_scores = (probs * centred).div_scalar((params.head_dim as f64).sqrt());
    let d_q_rot = d_scores
        .clone()
        .matmul(repeat_kv(trace.k_rot.clone(), n_rep)); // [n_heads, i, head_dim]
    let d_k_rot = sum_kv_groups(d_scores.swap_dims(1, 2).matmul(trace.q_rot.clone()), n_rep);
    let unrotate = |x: Tensor<B, 3>| merge_heads(rotate(x, &ctx.cos, &ctx.sin.clone().neg()));
    unrotate(d_q_rot).matmul(layer.w_q.clone().transpose())
        + unrotate(d_k_rot).matmul(layer.w_k.clone().transpose())
}

/// The gradient `xᵀ dy` of a weight whose input is `x` (the rows of `dy` are already multiplied by
/// the training mask); the step subtracts `η` times it.
///
/// # Shapes
/// `x`: `[seq_length, in]`, `dy_train`: `[seq_length, out]` → `[in, out]`.
fn weight_gradient<B: Backend>(x: &Tensor<B, 2>, dy_train: &Tensor<B, 2>) -> Tensor<B, 2> {
    x.clone().transpose().matmul(dy_train.clone())
}

/// Runs one block; returns its output and, if `keep`, its trace.
///
/// # Shapes
/// `h`: `[seq_length, d_model]` → `[seq_length, d_model]`.
fn layer_forward<B: Backend>(
    layer: &LlamaLayerParams<B>,
    params: &LlamaParams<B>,
    h: Tensor<B, 2>,
    ctx: &SequenceContext<B>,
) -> (Tensor<B, 2>, LayerTrace<B>) {
    let eps = params.rms_eps;
    let a = rms_norm(h.clone(), &layer.attn_norm, eps);
    let q_rot = rotate(
        split_heads(a.clone().matmul(layer.w_q.clone()), params.n_heads),
        &ctx.cos,
        &ctx.sin,
    );
    let k_rot = rotate(
        split_heads(a.clone().matmul(layer.w_k.clone()), params.n_kv_heads),
        &ctx.cos,
        &ctx.sin,
    );
    let v = split_heads(a.clone().matmul(layer.w_v.clone()), params.n_kv_heads);
    let probs = attention_probs(&q_rot, &k_rot, &ctx.attention_bias);
    let n_rep = params.n_heads / params.n_kv_heads;
    let o = merge_heads(probs.matmul(repeat_kv(v, n_rep)));
    let h_mid = h.clone() + o.clone().matmul(layer.w_o.clone());
    let m = rms_norm(h_mid.clone(), &layer.mlp_norm, eps);
    let gate_pre = m.clone().matmul(layer.w_gate.clone());
    let up = m.clone().matmul(layer.w_up.clone());
    let hidden = swiglu(gate_pre.clone(), up.clone());
    let out = h_mid.clone() + hidden.clone().matmul(layer.w_down.clone());
    let trace = LayerTrace {
        h_in: h,
        a,
        q_rot,
        k_rot,
        o,
        h_mid,
        m,
        gate_pre,
        up,
        hidden,
    };
    (out, trace)
}

/// Reads a `[batch_size, seq_length]` bool tensor as rows.
fn bool_rows<B: Backend>(mask: &Tensor<B, 2, burn::tensor::Bool>) -> Vec<Vec<bool>> {
    let [batch_size, seq_length] = mask.dims();
    let flat: Vec<bool> = mask
        .to_data()
        .convert::<bool>()
        .to_vec()
        .unwrap_or_default();
    (0..batch_size)
        .map(|b| flat[b * seq_length..(b + 1) * seq_length].to_vec())
        .collect()
}

impl<B: Backend> LlamaReference<B> {
    /// Reads the weights of `model` (an [`AuxModel::Llama`]) and checks the configuration.
    ///
    /// # Errors
    /// [`SimError::UnsupportedModel`] (not a bias-free LLaMA model), [`SimError::InvalidConfig`].
    pub fn new(model: &AuxModel<B>, config: LlamaTintConfig) -> Result<Self, SimError> {
        Self::from_params(LlamaParams::from_aux(model)?, config)
    }

    /// The reference on given weights (e.g. [`LlamaParams::cast`] to `DType::F64`).
    ///
    /// # Errors
    /// [`SimError::InvalidConfig`], and [`SimError::UnsupportedModel`] when `n_kv_heads` does not
    /// divide `n_heads`.
    pub fn from_params(params: LlamaParams<B>, config: LlamaTintConfig) -> Result<Self, SimError> {
        config.validate(params.layers.len())?;
        if params.n_kv_heads == 0 || !params.n_heads.is_multiple_of(params.n_kv_heads) {
            return Err(SimError::UnsupportedModel(format!(
                "n_kv_heads = {} must divide n_heads = {}",
                params.n_kv_heads, params.n_heads
            )));
        }
        Ok(Self { params, config })
    }

    /// The configuration.
    pub fn config(&self) -> &LlamaTintConfig {
        &self.config
    }

    /// The auxiliary weights.
    pub fn params(&self) -> &LlamaParams<B> {
        &self.params
    }

    /// Float type of the computation (that of the weights).
    pub fn dtype(&self) -> DType {
        self.params.dtype()
    }

    /// Runs the forward pass, `n_forward_backward` approximate SGD steps and the final forward pass,
    /// each sequence with its own update. `input.icl_mask` restricts attention like in the GPT-2
    /// reference; `input.gradient_mask` restricts the loss targets.
    ///
    /// # Shapes
    /// `input.input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// [`SimError::InvalidInput`] for inconsistent shapes, sequences shorter than 2 or longer than the
    /// model's positions, and token ids outside the vocabulary.
    pub fn forward(&self, input: &SimInput<B>) -> Result<SimOutput<B>, SimError> {
        self.validate(input)?;
        crate::sequences::forward_in_parallel(input, |input| {
            self.forward_observed_validated(input, None)
                .map(|(out, _)| out)
        })
    }

    /// [`Self::forward`] with the training part of sequence `b` being its first `train_lengths[b]`
    /// tokens.
    ///
    /// # Shapes
    /// `input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// As [`Self::forward`], and a train length count different from the batch size or a train
    /// length above the sequence length.
    pub fn forward_with_train_lengths(
        &self,
        input_ids: Tensor<B, 2, Int>,
        train_lengths: &[usize],
    ) -> Result<SimOutput<B>, SimError> {
        self.forward(&SimInput::with_train_lengths(input_ids, train_lengths)?)
    }

    /// Like [`Self::forward`], also returning the updated weights of each sequence.
    ///
    /// # Errors
    /// As [`Self::forward`].
    pub fn forward_with_params(
        &self,
        input: &SimInput<B>,
    ) -> Result<(SimOutput<B>, Vec<LlamaParams<B>>), SimError> {
        self.validate(input)?;
        self.forward_observed_validated(input, None)
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
        self.validate(input)?;
        let device = input.input_ids.device();
        let (output, mut params) = tint_ops::branches::on_worker::<B, _, _>(&device, || {
            self.forward_observed_validated(input, None)
        })?;
        let config = self.config.clone();
        Ok((
            output,
            Self {
                params: params.remove(0),
                config,
            },
        ))
    }

    /// This reference with `params` (its own weights after a step) as weights and `inner_lr` as
    /// its step size.
    pub(crate) fn with_weights(&self, params: LlamaParams<B>, inner_lr: f64) -> Self {
        let mut config = self.config.clone();
        config.step.inner_lr = inner_lr;
        Self { params, config }
    }

    /// The plain forward of the auxiliary model with this reference's weights — embedding, every
    /// block, the final norm and the head; no step — computed by the same code as the final
    /// forward of [`Self::forward`]. On the reference [`Self::updated`] returns, the updated
    /// model's logits.
    ///
    /// # Shapes
    /// `input_ids`: `[batch_size, seq_length]` → logits `[batch_size, seq_length, vocab_size]`.
    ///
    /// # Errors
    /// [`SimError::InvalidInput`] for ids that do not fit the model (as [`Self::forward`]).
    pub fn logits(&self, input_ids: Tensor<B, 2, Int>) -> Result<Tensor<B, 3>, SimError> {
        let [batch_size, _] = input_ids.dims();
        let input = SimInput::with_train_lengths(input_ids, &vec![0; batch_size])?;
        self.validate(&input)?;
        // The final norm and head of the step's passes: `[1, seq_length, vocab_size]` a sequence.
        let step = SequenceStep::new(self, None);
        let logits = self
            .sequence_contexts(&input)
            .iter()
            .map(|ctx| {
                let h = self.embedded_through(&self.params.layers, ctx);
                step.final_norm(h, &self.params.final_norm, ctx).logits
            })
            .collect();
        Ok(Tensor::cat(logits, 0))
    }

    /// Like [`Self::forward_with_params`], reporting every intermediate of the step to `observe`
    /// (for numerical diagnostics, e.g. comparing a float32 run with a float64 one): its name and
    /// value `[rows, width]`, in the order computed. Names, with `b` the sequence and `l` the layer
    /// index in the model: `b{b} L{l} {h_in|a|o|h_mid|m|gate_pre|up|hidden}` (first forward pass),
    /// `b{b} {h_last|hf|first_logits}`, `b{b} grad` (loss gradient at the final norm output),
    /// `b{b} delta_top` (after the final-norm backward), `b{b} L{l} {d_hidden|d_gate|d_up|dm|
    /// rms2_back|delta_mid|d_o|dv|da|rms1_back|delta_in}` (backward, top to first layer),
    /// `b{b} L{l} {dw_gate|dw_up|dw_down|dw_o|dw_v}` (update minus old weight, `[in, out]`) and
    /// `b{b} final_logits`. Step `k > 0` of `n_forward_backward` prefixes the backward names with
    /// `s{k} `.
    ///
    /// # Shapes
    /// As [`Self::forward`].
    ///
    /// # Errors
    /// As [`Self::forward`].
    pub fn forward_observed(
        &self,
        input: &SimInput<B>,
        observe: &mut dyn FnMut(&str, Tensor<B, 2>),
    ) -> Result<(SimOutput<B>, Vec<LlamaParams<B>>), SimError> {
        self.validate(input)?;
        self.forward_observed_validated(input, Some(observe))
    }

    /// [`Self::forward_observed`] on an input that passed [`Self::validate`]; with no observer,
    /// nothing is computed for observation alone.
    fn forward_observed_validated(
        &self,
        input: &SimInput<B>,
        mut observe: Observer<'_, B>,
    ) -> Result<(SimOutput<B>, Vec<LlamaParams<B>>), SimError> {
        let (mut first_logits, mut final_logits, mut updated) = (vec![], vec![], vec![]);
        for (b, ctx) in self.sequence_contexts(input).iter().enumerate() {
            let (first, last, params) = match observe.as_deref_mut() {
                Some(observe) => {
                    let mut named =
                        |name: &str, t: Tensor<B, 2>| observe(&format!("b{b} {name}"), t);
                    self.run_sequence(ctx, Some(&mut named))
                }
                None => self.run_sequence(ctx, None),
            };
            first_logits.push(first);
            final_logits.push(last);
            updated.push(params);
        }
        let first_logits = Tensor::cat(first_logits, 0);
        let final_logits = Tensor::cat(final_logits, 0);
        let output = SimOutput::scored(input, first_logits, final_logits);
        Ok((output, updated))
    }

    /// First logits, final logits `[1, seq_length, vocab_size]` and updated weights of one
    /// sequence: the shared step ([`run_rounds`]) of its [`SequenceStep`].
    fn run_sequence(
        &self,
        ctx: &SequenceContext<B>,
        observe: Observer<'_, B>,
    ) -> (Tensor<B, 3>, Tensor<B, 3>, LlamaParams<B>) {
        let step = SequenceStep::new(self, observe);
        let first = step.first;
        let rounds = run_rounds(
            &step,
            ctx,
            &step.targets(ctx),
            step.lower_state(ctx),
            self.params.layers[first..].to_vec(),
            self.params.final_norm.clone(),
        );
        if step.observing() {
            let [_, seq_length, vocab_size] = rounds.final_logits.dims();
            let logits = rounds
                .final_logits
                .clone()
                .reshape([seq_length, vocab_size]);
            step.observe("final_logits", logits);
        }
        let mut params = self.params.clone();
        params.layers.truncate(first);
        params.layers.extend(rounds.layers);
        params.final_norm = rounds.final_weights;
        (rounds.first_logits, rounds.final_logits, params)
    }

    /// Runs `layers` (plain blocks, bottom to top, with this model's heads, rotary tables and
    /// RMSNorm epsilon) on the embedded tokens of every sequence of `input`, under its attention
    /// masks: the residual stream entering the block above them. `input` must have passed
    /// [`Self::validate`].
    ///
    /// # Shapes
    /// `input.input_ids`: `[batch_size, seq_length]` → `[batch_size, seq_length, d_model]`.
    pub(crate) fn run_blocks(
        &self,
        layers: &[LlamaLayerParams<B>],
        input: &SimInput<B>,
    ) -> Tensor<B, 3> {
        let hidden = self
            .sequence_contexts(input)
            .iter()
            .map(|ctx| self.embedded_through(layers, ctx).unsqueeze_dim::<3>(0))
            .collect();
        Tensor::cat(hidden, 0)
    }

    /// The embedded tokens of `ctx`'s sequence through `layers` (plain blocks, bottom to top, no
    /// trace kept): what enters the block above them.
    ///
    /// # Shapes
    /// → `[seq_length, d_model]`
    fn embedded_through(
        &self,
        layers: &[LlamaLayerParams<B>],
        ctx: &SequenceContext<B>,
    ) -> Tensor<B, 2> {
        let mut h = self.params.embedding.clone().select(0, ctx.ids.clone());
        for layer in layers {
            h = layer_forward(layer, &self.params, h, ctx).0;
        }
        h
    }

    /// The rotary tables and masks of every sequence of `input`.
    fn sequence_contexts(&self, input: &SimInput<B>) -> Vec<SequenceContext<B>> {
        let [batch_size, seq_length] = input.dims();
        let train = bool_rows(&input.train_mask);
        let gradient = input.gradient_mask.as_ref().map(bool_rows);
        let icl: Option<Vec<bool>> = input
            .icl_mask
            .as_ref()
            .map(|m| m.to_data().convert::<bool>().to_vec().unwrap_or_default());
        (0..batch_size)
            .map(|b| {
                let ids = input
                    .input_ids
                    .clone()
                    .slice([b..b + 1, 0..seq_length])
                    .reshape([seq_length]);
                let icl_rows = icl
                    .as_ref()
                    .map(|m| &m[b * seq_length * seq_length..(b + 1) * seq_length * seq_length]);
                self.context(
                    ids,
                    &train[b],
                    gradient.as_ref().map(|g| &g[b][..]),
                    icl_rows,
                )
            })
            .collect()
    }

    /// Checks `input` against the model (shapes, lengths, token ids).
    pub(crate) fn validate(&self, input: &SimInput<B>) -> Result<(), SimError> {
        input.validate(self.params.vocab_size(), self.params.max_positions)
    }

    /// Rotary tables and masks of one sequence.
    fn context(
        &self,
        ids: Tensor<B, 1, Int>,
        train: &[bool],
        gradient: Option<&[bool]>,
        icl: Option<&[bool]>,
    ) -> SequenceContext<B> {
        let seq_length = train.len();
        let device = ids.device();
        let dtype = self.params.dtype();
        // Angles in f64, rounded once to the weights' float type (as the auxiliary forward).
        let (cos, sin) = rotary_tables_dtype::<B>(
            seq_length,
            self.params.head_dim,
            self.params.rope_theta,
            &device,
            dtype,
        );
        let float = |values: Vec<f64>| {
            let n = values.len();
            Tensor::<B, 1>::from_data(TensorData::new(values, [n]), &device).cast(dtype)
        };
        let mut bias = Vec::with_capacity(seq_length * seq_length);
        let mut backward = Vec::with_capacity(seq_length * seq_length);
        for i in 0..seq_length {
            for j in 0..seq_length {
                let allowed = j <= i && icl.is_none_or(|m| m[i * seq_length + j]);
                bias.push(if allowed { 0.0 } else { MASKED_SCORE });
                backward.push(if i <= j || train[i] { 1.0 } else { 0.0 });
            }
        }
        let square = [1, seq_length, seq_length];
        let next_target: Vec<f64> = (0..seq_length)
            .map(|t| {
                let counts =
                    t + 1 < seq_length && train[t + 1] && gradient.is_none_or(|g| g[t + 1]);
                if counts {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        let train_values = train.iter().map(|&t| if t { 1.0 } else { 0.0 }).collect();
        SequenceContext {
            ids,
            cos,
            sin,
            attention_bias: float(bias).reshape(square),
            backward_mask: float(backward).reshape(square),
            train: float(train_values).reshape([seq_length, 1]),
            next_target: float(next_target).reshape([seq_length, 1]),
        }
    }
}
