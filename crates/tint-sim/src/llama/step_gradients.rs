//! The gradients one approximate TinT step computes on a LLaMA-family model, before they are scaled
//! by the step size `η`, and the descent direction they give: with one forward-backward step the
//! update is `W − η G` with `G` independent of `η`, so a caller that tries several step sizes on
//! the same training part (tuning `η` on a grid) computes `G` once ([`crate::llama::LlamaDirection`]) and applies
//! each `η` to it, with the same floating-point operations as the step itself.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::params::{LlamaLayerParams, LlamaParams};

/// The gradients of one layer's updated weights (`None`: the weight is not updated).
#[derive(Debug, Clone)]
pub(crate) struct LayerGradients<B: Backend> {
    pub(crate) attn_norm: Option<Tensor<B, 1>>,
    pub(crate) w_v: Option<Tensor<B, 2>>,
    pub(crate) w_o: Option<Tensor<B, 2>>,
    pub(crate) mlp_norm: Option<Tensor<B, 1>>,
    pub(crate) w_gate: Option<Tensor<B, 2>>,
    pub(crate) w_up: Option<Tensor<B, 2>>,
    pub(crate) w_down: Option<Tensor<B, 2>>,
}

impl<B: Backend> Default for LayerGradients<B> {
    fn default() -> Self {
        Self {
            attn_norm: None,
            w_v: None,
            w_o: None,
            mlp_norm: None,
            w_gate: None,
            w_up: None,
            w_down: None,
        }
    }
}

impl<B: Backend> LayerGradients<B> {
    /// Subtracts `lr` times every gradient from its weight in `layer`.
    pub(crate) fn descend_layer(&self, layer: &mut LlamaLayerParams<B>, lr: f64) {
        descend(&mut layer.attn_norm, &self.attn_norm, lr);
        descend(&mut layer.w_v, &self.w_v, lr);
        descend(&mut layer.w_o, &self.w_o, lr);
        descend(&mut layer.mlp_norm, &self.mlp_norm, lr);
        descend(&mut layer.w_gate, &self.w_gate, lr);
        descend(&mut layer.w_up, &self.w_up, lr);
        descend(&mut layer.w_down, &self.w_down, lr);
    }
}

/// The gradients of one step: the final norm's gain and those of the updated layers.
#[derive(Debug, Clone)]
pub(crate) struct StepGradients<B: Backend> {
    /// Gradient of the final norm's gain, when norm gains are updated.
    pub(crate) final_norm: Option<Tensor<B, 1>>,
    /// Index of the first updated layer.
    pub(crate) first: usize,
    /// Layers `first..`, bottom to top.
    pub(crate) layers: Vec<LayerGradients<B>>,
}

/// `w − η g`, the descent of one weight (the step's own operation).
pub(crate) fn descend<B: Backend, const D: usize>(
    w: &mut Tensor<B, D>,
    g: &Option<Tensor<B, D>>,
    lr: f64,
) {
    if let Some(g) = g {
        *w = w.clone() - g.clone().mul_scalar(lr);
    }
}

/// `a + b` where both exist (the same weights are updated by every sequence of one step).
fn plus<B: Backend, const D: usize>(
    a: Option<Tensor<B, D>>,
    b: Option<Tensor<B, D>>,
) -> Option<Tensor<B, D>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

impl<B: Backend> StepGradients<B> {
    /// The gradients of the summed loss of two sequences: `self + other`, weight by weight.
    pub(crate) fn plus(self, other: Self) -> Self {
        let layers = self
            .layers
            .into_iter()
            .zip(other.layers)
            .map(|(a, b)| LayerGradients {
                attn_norm: plus(a.attn_norm, b.attn_norm),
                w_v: plus(a.w_v, b.w_v),
                w_o: plus(a.w_o, b.w_o),
                mlp_norm: plus(a.mlp_norm, b.mlp_norm),
                w_gate: plus(a.w_gate, b.w_gate),
                w_up: plus(a.w_up, b.w_up),
                w_down: plus(a.w_down, b.w_down),
            })
            .collect();
        Self {
            final_norm: plus(self.final_norm, other.final_norm),
            first: self.first,
            layers,
        }
    }

    /// Subtracts `lr` times every gradient from its weight in `params`.
    pub(crate) fn descend(&self, params: &mut LlamaParams<B>, lr: f64) {
        descend(&mut params.final_norm, &self.final_norm, lr);
        for (layer, g) in params.layers[self.first..].iter_mut().zip(&self.layers) {
            g.descend_layer(layer, lr);
        }
    }
}
