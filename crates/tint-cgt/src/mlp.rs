//! The two-layer GELU MLP of a transformer block.

use burn::module::Module;
use burn::nn::{Initializer, Linear, LinearConfig};
use burn::tensor::activation::gelu;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// `W2 gelu(W1 h + b1) + b2`. Should be created with [`Mlp::new`].
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// Input projection `[d_input, d_hidden]`.
    pub fc: Linear<B>,
    /// Output projection `[d_hidden, d_output]`.
    pub proj: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    /// Creates the MLP with normal(0, `init_std`) weights and biases.
    pub fn new(
        d_input: usize,
        d_hidden: usize,
        d_output: usize,
        init_std: f64,
        device: &B::Device,
    ) -> Self {
        let init = Initializer::Normal {
            mean: 0.0,
            std: init_std,
        };
        Self {
            fc: LinearConfig::new(d_input, d_hidden)
                .with_initializer(init.clone())
                .init(device),
            proj: LinearConfig::new(d_hidden, d_output)
                .with_initializer(init)
                .init(device),
        }
    }

    /// # Shapes
    /// - `input`: `[batch_size, seq_length, d_input]`
    /// - output: `[batch_size, seq_length, d_output]`
    pub fn forward(&self, input: Tensor<B, 3>) -> Tensor<B, 3> {
        self.proj.forward(gelu(self.fc.forward(input)))
    }
}
