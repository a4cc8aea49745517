//! The SwiGLU feed-forward of LLaMA: `down(silu(gate(x)) ⊙ up(x))`.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::activation::silu;
use burn::tensor::{backend::Backend, Tensor};

/// SwiGLU MLP; weights are `[d_input, d_output]` (burn `Linear`), no biases.
#[derive(Module, Debug)]
pub struct SwiGluMlp<B: Backend> {
    /// Gate projection `[d_model, d_ff]`.
    pub gate: Linear<B>,
    /// Up projection `[d_model, d_ff]`.
    pub up: Linear<B>,
    /// Down projection `[d_ff, d_model]`.
    pub down: Linear<B>,
}

/// The intermediates of one SwiGLU forward.
#[derive(Debug, Clone)]
pub struct SwiGluTrace<B: Backend> {
    /// `x W_gate`, `[batch_size, seq_length, d_ff]`.
    pub gate_pre_activation: Tensor<B, 3>,
    /// `x W_up`, `[batch_size, seq_length, d_ff]`.
    pub up_output: Tensor<B, 3>,
    /// `silu(x W_gate) ⊙ x W_up`, `[batch_size, seq_length, d_ff]`.
    pub hidden: Tensor<B, 3>,
    /// Output, `[batch_size, seq_length, d_model]`.
    pub output: Tensor<B, 3>,
}

impl<B: Backend> SwiGluMlp<B> {
    /// The MLP with its intermediates.
    ///
    /// # Shapes
    /// - x: `[batch_size, seq_length, d_model]`
    /// - output fields: see [`SwiGluTrace`]
    pub fn forward_trace(&self, x: Tensor<B, 3>) -> SwiGluTrace<B> {
        let gate_pre_activation = self.gate.forward(x.clone());
        let up_output = self.up.forward(x);
        let hidden = silu(gate_pre_activation.clone()) * up_output.clone();
        let output = self.down.forward(hidden.clone());
        SwiGluTrace {
            gate_pre_activation,
            up_output,
            hidden,
            output,
        }
    }

    /// The MLP.
    ///
    /// # Shapes
    /// - x: `[batch_size, seq_length, d_model]`
    /// - output: `[batch_size, seq_length, d_model]`
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.down
            .forward(silu(self.gate.forward(x.clone())) * self.up.forward(x))
    }
}
