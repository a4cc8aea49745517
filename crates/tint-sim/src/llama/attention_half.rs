//! The attention half of a LLaMA block simulated with tint-ops modules:
//! `h_mid = h_in + W_O · GQA-RoPE-Attention(RMSNorm₁(h_in))` forward, and its backward + descent
//! `delta_in = delta_mid + RMSNorm₁ᵀ(W_Vᵀ · Attnᵀ_value(W_Oᵀ delta_mid))` with `W_O` and `W_V` updated
//! (value-only attention backward, scores recomputed from the stored rotated Q/K; the norm gain and
//! `W_Q`, `W_K` frozen, docs/tint-llama.md).
//!
//! Prefix blocks (`[batch_size, P, Ds]` each): the norm `(diag(gain), 0)`, `W_Q` (`D × D`), `W_K`
//! and `W_V` (`D → n_kv h_a`, zero-padded to `D × D`), `W_O` (`D × D`). LLaMA layers have no biases:
//! the descent modules are built with a zero bias step
//! ([`LinearBackwardDescent::with_bias_step_scale`]), so every bias slot stays 0.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_ops::{
    layout, prefix, AttentionBackprop, AttentionVariant, DescentUpdate, LinearBackwardDescent,
    LinearForward, NormBackward, NormForward, NormKind, QkvPrefixes, SelfAttentionBackwardDescent,
    SelfAttentionForward, SimContext, TintDims, TintOptions,
};

use super::residual::add_token_residual;
use crate::error::SimError;

/// The modules of the attention half-block (shared by every layer).
#[derive(Debug)]
pub struct SimulatedAttentionHalf<B: Backend> {
    norm_forward: NormForward<B>,
    norm_backward: NormBackward<B>,
    attention_forward: SelfAttentionForward<B>,
    attention_backward: SelfAttentionBackwardDescent<B>,
    output_forward: LinearForward<B>,
    output_backward: LinearBackwardDescent<B>,
    variant: AttentionVariant,
    dims: TintDims,
}

/// The prefix blocks of one attention half, each `[batch_size, P, Ds]`.
#[derive(Debug, Clone)]
pub struct AttentionPrefixes<B: Backend> {
    /// RMSNorm₁ gain `(diag(gain), 0)`.
    pub norm: Tensor<B, 3>,
    /// `W_Q`.
    pub query: Tensor<B, 3>,
    /// `W_K`, output rows `>= n_kv h_a` zero.
    pub key: Tensor<B, 3>,
    /// `W_V`, output rows `>= n_kv h_a` zero.
    pub value: Tensor<B, 3>,
    /// `W_O`.
    pub output: Tensor<B, 3>,
}

/// Token-row memories stored by [`SimulatedAttentionHalf::forward`].
#[derive(Debug, Clone)]
pub struct AttentionHalfActs<B: Backend> {
    /// `[f(h_in), h_in]` (RMSNorm memory, `[batch_size, T, 2D]`).
    norm: Tensor<B, 3>,
    /// `[Q_rot, K_rot, a]` (attention memory, `[batch_size, T, 3D]`).
    attention: Tensor<B, 3>,
    /// `o` (the `W_O` input, `[batch_size, T, D]`).
    output_in: Tensor<B, 3>,
}

/// Attention weights in `[in, out]` layout (as [`super::LlamaLayerParams`]).
#[derive(Debug, Clone)]
pub struct AttentionWeights<B: Backend> {
    /// `[batch_size, D, D]`.
    pub w_q: Tensor<B, 3>,
    /// `[batch_size, D, n_kv h_a]`.
    pub w_k: Tensor<B, 3>,
    /// `[batch_size, D, n_kv h_a]`.
    pub w_v: Tensor<B, 3>,
    /// `[batch_size, D, D]`.
    pub w_o: Tensor<B, 3>,
}

/// Zero-pads the last dimension of `[batch_size, D, width]` to `D` columns.
fn pad_columns<B: Backend>(w: Tensor<B, 3>, d: usize) -> Tensor<B, 3> {
    let [batch_size, rows, width] = w.dims();
    if width == d {
        return w;
    }
    let zeros = Tensor::zeros([batch_size, rows, d - width], (&w.device(), w.dtype()));
    Tensor::cat(vec![w, zeros], 2)
}

impl<B: Backend> SimulatedAttentionHalf<B> {
    /// Builds the modules (`options.ln_epsilon` must be the model's RMSNorm epsilon).
    ///
    /// # Errors
    /// [`SimError::Ops`] for invalid options or attention variant.
    pub fn new(
        dims: &TintDims,
        variant: &AttentionVariant,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, SimError> {
        let lin = dims.linear_memory_index();
        Ok(Self {
            norm_forward: NormForward::new(NormKind::Rms, dims, options, device)?,
            norm_backward: NormBackward::new(NormKind::Rms, dims, options, device)?,
            attention_forward: SelfAttentionForward::new(dims, variant, options, device)?,
            attention_backward: SelfAttentionBackwardDescent::with_bias_step_scale(
                dims,
                variant,
                AttentionBackprop::ThroughAttention,
                0.0,
                options,
                device,
            )?,
            output_forward: LinearForward::new(dims, Some(lin), options, device)?,
            output_backward: LinearBackwardDescent::with_bias_step_scale(
                dims,
                lin,
                DescentUpdate::WeightAndBias,
                0.0,
                options,
                device,
            )?,
            variant: *variant,
            dims: *dims,
        })
    }

    /// Number of constructed module parameters (one copy of each module kind).
    pub fn num_module_params(&self) -> (usize, usize) {
        use burn::module::Module;
        let forward = self.norm_forward.num_params()
            + self.attention_forward.num_params()
            + self.output_forward.num_params();
        let backward = self.norm_backward.num_params()
            + self.attention_backward.num_params()
            + self.output_backward.num_params();
        (forward, backward)
    }

    /// Writes the norm gain `[batch_size, D]` and the attention weights (`[in, out]` layout:
    /// `w_q` `[batch_size, D, H h_a]`, `w_k`, `w_v` `[batch_size, D, n_kv h_a]`, `w_o`
    /// `[batch_size, H h_a, D]`) into prefix blocks.
    ///
    /// # Errors
    /// [`SimError::InvalidInput`] for shapes that do not match `D`, `H h_a = D` and `n_kv h_a`.
    pub fn write_prefixes(
        &self,
        gain: Tensor<B, 2>,
        weights: &AttentionWeights<B>,
    ) -> Result<AttentionPrefixes<B>, SimError> {
        let d = self.dims.d_model();
        let kv = self.variant.n_kv_heads * self.dims.head_dim_aux();
        let [batch_size, _, _] = weights.w_q.dims();
        let expected = [
            [batch_size, d, d],
            [batch_size, d, kv],
            [batch_size, d, kv],
            [batch_size, d, d],
        ];
        let actual = [
            weights.w_q.dims(),
            weights.w_k.dims(),
            weights.w_v.dims(),
            weights.w_o.dims(),
        ];
        if actual != expected || gain.dims() != [batch_size, d] {
            return Err(SimError::InvalidInput(format!(
                "attention weights {actual:?} / gain {:?} do not match D = {d}, n_kv h_a = {kv} \
                 (expected {expected:?})",
                gain.dims()
            )));
        }
        let bias = Tensor::zeros([batch_size, d], (&gain.device(), gain.dtype()));
        // prefix::write_linear takes `[out, in]` weights.
        let block = |w: Tensor<B, 3>| {
            prefix::write_linear(pad_columns(w, d).swap_dims(1, 2), bias.clone(), &self.dims)
        };
        Ok(AttentionPrefixes {
            norm: prefix::write_layer_norm(gain, bias.clone(), &self.dims)?,
            query: block(weights.w_q.clone())?,
            key: block(weights.w_k.clone())?,
            value: block(weights.w_v.clone())?,
            output: block(weights.w_o.clone())?,
        })
    }

    /// Reads the (possibly updated) attention weights back, `[in, out]` layout, padding removed.
    ///
    /// # Errors
    /// [`SimError::Ops`] for malformed blocks.
    pub fn read_weights(
        &self,
        prefixes: &AttentionPrefixes<B>,
    ) -> Result<AttentionWeights<B>, SimError> {
        let kv = self.variant.n_kv_heads * self.dims.head_dim_aux();
        let read = |block: &Tensor<B, 3>| -> Result<Tensor<B, 3>, SimError> {
            Ok(prefix::read_linear(block.clone(), &self.dims)?
                .0
                .swap_dims(1, 2))
        };
        Ok(AttentionWeights {
            w_q: read(&prefixes.query)?,
            w_k: read(&prefixes.key)?.narrow(2, 0, kv),
            w_v: read(&prefixes.value)?.narrow(2, 0, kv),
            w_o: read(&prefixes.output)?,
        })
    }

    /// Forward: `h_in` in dims `[0, D)` of the token rows → `h_mid = h_in + W_O Attn(RMSNorm(h_in))`
    /// there (other dims and the prefix rows: those of `state`), with the stored memories.
    ///
    /// # Shapes
    /// `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`.
    pub fn forward(
        &self,
        state: Tensor<B, 3>,
        prefixes: &AttentionPrefixes<B>,
        ctx: &SimContext<B>,
    ) -> (Tensor<B, 3>, AttentionHalfActs<B>) {
        let (p, d) = (self.dims.n_prefixes(), self.dims.d_model());
        let a = self.norm_forward.forward(
            layout::with_prefix_rows(state.clone(), prefixes.norm.clone()),
            ctx,
        );
        let norm = layout::token_memory(a.clone(), p, self.dims.ln_memory_index());
        let qkv = QkvPrefixes {
            query: prefixes.query.clone(),
            key: prefixes.key.clone(),
            value: prefixes.value.clone(),
        };
        let at = self.attention_forward.forward(a, &qkv, ctx);
        let attention = layout::token_memory(at.clone(), p, self.dims.attn_memory_index());
        let o = self
            .output_forward
            .forward(layout::with_prefix_rows(at, prefixes.output.clone()), ctx);
        let output_in = layout::token_memory(o.clone(), p, self.dims.linear_memory_index());
        let out = add_token_residual(state, o, p, d);
        (
            out,
            AttentionHalfActs {
                norm,
                attention,
                output_in,
            },
        )
    }

    /// Backward + descent: `delta_mid` in dims `[0, D)` → `delta_mid + RMSNormᵀ(W_Vᵀ dv)` there, and
    /// the prefix blocks with `W_O`, `W_V` updated (`update_output`, `update_value` select which;
    /// the others are returned unchanged).
    ///
    /// # Shapes
    /// `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`.
    pub fn backward(
        &self,
        state: Tensor<B, 3>,
        prefixes: &AttentionPrefixes<B>,
        acts: &AttentionHalfActs<B>,
        ctx: &SimContext<B>,
        update_output: bool,
        update_value: bool,
    ) -> (Tensor<B, 3>, AttentionPrefixes<B>) {
        let (p, d) = (self.dims.n_prefixes(), self.dims.d_model());
        let (st, updated) = self.descend(
            state.clone(),
            prefixes,
            acts,
            ctx,
            update_output,
            update_value,
        );
        let dx = self.norm_backward.forward(
            layout::with_prefix_rows(
                layout::with_token_memory(st, p, self.dims.ln_memory_index(), acts.norm.clone()),
                prefixes.norm.clone(),
            ),
            ctx,
        );
        (add_token_residual(state, dx, p, d), updated)
    }

    /// The descent of [`Self::backward`] without its input gradient: the same `W_O`, `W_V`
    /// updates, and the module output before the RMSNorm backward (`W_Vᵀ dv` in dims `[0, D)`).
    /// For the lowest simulated layer, whose input gradient nothing reads, [`Self::backward`]
    /// would spend an RMSNorm backward and a residual sum on a dead value.
    ///
    /// # Shapes
    /// `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`.
    pub fn descend(
        &self,
        state: Tensor<B, 3>,
        prefixes: &AttentionPrefixes<B>,
        acts: &AttentionHalfActs<B>,
        ctx: &SimContext<B>,
        update_output: bool,
        update_value: bool,
    ) -> (Tensor<B, 3>, AttentionPrefixes<B>) {
        let p = self.dims.n_prefixes();
        let prepare = |s: Tensor<B, 3>, mem: usize, act: &Tensor<B, 3>, block: &Tensor<B, 3>| {
            layout::with_prefix_rows(
                layout::with_token_memory(s, p, mem, act.clone()),
                block.clone(),
            )
        };
        let mut updated = prefixes.clone();
        let st = self.output_backward.forward(
            prepare(
                state,
                self.dims.linear_memory_index(),
                &acts.output_in,
                &prefixes.output,
            ),
            ctx,
        );
        if update_output {
            updated.output = layout::prefix_rows(st.clone(), p);
        }
        let st = self.attention_backward.forward(
            prepare(
                st,
                self.dims.attn_memory_index(),
                &acts.attention,
                &prefixes.value,
            ),
            ctx,
        );
        if update_value {
            updated.value = layout::prefix_rows(st.clone(), p);
        }
        (st, updated)
    }
}
