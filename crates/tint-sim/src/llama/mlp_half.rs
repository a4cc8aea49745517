//! The MLP half of a LLaMA block simulated with tint-ops modules:
//! `out = h_mid + SwiGLU(RMSNorm₂(h_mid))` forward, and its first-order backward + descent
//! `delta_mid = delta + RMSNorm₂ᵀ(SwiGLUᵀ(delta))` with the SwiGLU weights updated (the RMSNorm gain
//! is frozen, docs/tint-llama.md).

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_ops::{layout, prefix, SimContext, TintDims, TintOptions};
use tint_ops::{NormBackward, NormForward, NormKind};

use super::mlp_block::{SimulatedSwiGlu, SwiGluActs, SwiGluPrefixes};
use super::residual::add_token_residual;
use crate::error::SimError;

/// The modules of the MLP half-block.
#[derive(Debug)]
pub struct SimulatedMlpHalf<B: Backend> {
    norm_forward: NormForward<B>,
    norm_backward: NormBackward<B>,
    /// The SwiGLU MLP.
    pub mlp: SimulatedSwiGlu<B>,
    dims: TintDims,
}

/// Activations stored by [`SimulatedMlpHalf::forward`].
#[derive(Debug, Clone)]
pub struct MlpHalfActs<B: Backend> {
    norm: Tensor<B, 3>,
    mlp: SwiGluActs<B>,
}

impl<B: Backend> SimulatedMlpHalf<B> {
    /// Builds the modules (`options.ln_epsilon` must be the model's RMSNorm epsilon).
    ///
    /// # Errors
    /// [`SimError::Ops`] for invalid options.
    pub fn new(
        dims: &TintDims,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, SimError> {
        Ok(Self {
            norm_forward: NormForward::new(NormKind::Rms, dims, options, device)?,
            norm_backward: NormBackward::new(NormKind::Rms, dims, options, device)?,
            mlp: SimulatedSwiGlu::new(dims, options, device)?,
            dims: *dims,
        })
    }

    /// Parameters of (forward, backward) module copies of the half-block.
    pub fn num_module_params(&self) -> (usize, usize) {
        use burn::module::Module;
        let (mlp_forward, mlp_backward) = self.mlp.num_module_params();
        (
            self.norm_forward.num_params() + mlp_forward,
            self.norm_backward.num_params() + mlp_backward,
        )
    }

    /// The prefix block of the RMSNorm gain `[batch_size, D]`: `(diag(gain), 0)`.
    ///
    /// # Errors
    /// [`SimError::Ops`] for a gain of the wrong width.
    pub fn norm_prefix(&self, gain: Tensor<B, 2>) -> Result<Tensor<B, 3>, SimError> {
        let zero = gain.zeros_like();
        Ok(prefix::write_layer_norm(gain, zero, &self.dims)?)
    }

    /// Forward: `h_mid` in dims `[0, D)` of the token rows → `h_mid + SwiGLU(RMSNorm(h_mid))` there.
    ///
    /// # Shapes
    /// `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`.
    pub fn forward(
        &self,
        state: Tensor<B, 3>,
        norm_prefix: &Tensor<B, 3>,
        mlp_prefixes: &SwiGluPrefixes<B>,
        ctx: &SimContext<B>,
    ) -> (Tensor<B, 3>, MlpHalfActs<B>) {
        let p = self.dims.n_prefixes();
        let d = self.dims.d_model();
        let m = self.norm_forward.forward(
            layout::with_prefix_rows(state.clone(), norm_prefix.clone()),
            ctx,
        );
        let norm = layout::token_memory(m.clone(), p, self.dims.ln_memory_index());
        let (y, mlp) = self.mlp.forward(m, mlp_prefixes, ctx);
        // Token rows carry the residual sum; prefix rows stay those of the input.
        let out = add_token_residual(state, y, p, d);
        (out, MlpHalfActs { norm, mlp })
    }

    /// Backward + descent: `delta` in dims `[0, D)` → `delta + RMSNormᵀ(SwiGLUᵀ delta)` there, and
    /// the updated SwiGLU prefix blocks.
    ///
    /// # Shapes
    /// `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`.
    pub fn backward(
        &self,
        state: Tensor<B, 3>,
        norm_prefix: &Tensor<B, 3>,
        mlp_prefixes: &SwiGluPrefixes<B>,
        acts: &MlpHalfActs<B>,
        ctx: &SimContext<B>,
    ) -> (Tensor<B, 3>, SwiGluPrefixes<B>) {
        let p = self.dims.n_prefixes();
        let d = self.dims.d_model();
        let (dm, updated) = self
            .mlp
            .backward(state.clone(), mlp_prefixes, &acts.mlp, ctx);
        let dm = layout::with_token_memory(dm, p, self.dims.ln_memory_index(), acts.norm.clone());
        let dx = self
            .norm_backward
            .forward(layout::with_prefix_rows(dm, norm_prefix.clone()), ctx);
        (add_token_residual(state, dx, p, d), updated)
    }
}
