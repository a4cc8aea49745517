//! Gates (TINT_SPEC §3.3): mix a module's input and output row by row, by position class.

use burn::{
    module::{Module, Param},
    tensor::{backend::Backend, Tensor},
};

use crate::{
    context::SimContext,
    dims::TintDims,
    host::tensor_from_f64,
    options::{GateMode, TintOptions},
};

/// Which of the two gate patterns of §3.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateKind {
    /// Prefix rows keep the input, token rows take the module output.
    ForwardBackward,
    /// Prefix rows get input + module output, token rows take the module output.
    Descent,
}

/// `out = tanh(u_old·pos + c_old) ⊙ e_in + tanh(u_new·pos + c_new) ⊙ e_module`, with the weights of
/// one of the two [`GateKind`] patterns; `2 (Pd + 1)` parameters.
///
/// In [`GateMode::Exact`] the gate is evaluated as the 0/1 selection it represents.
#[derive(Module, Debug)]
pub struct Gates<B: Backend> {
    /// `u_old`, `[Pd, 1]`.
    pub old_weight: Param<Tensor<B, 2>>,
    /// `c_old`, `[1]`.
    pub old_bias: Param<Tensor<B, 1>>,
    /// `u_new`, `[Pd, 1]`.
    pub new_weight: Param<Tensor<B, 2>>,
    /// `c_new`, `[1]`.
    pub new_bias: Param<Tensor<B, 1>>,
    /// Pattern.
    #[module(skip)]
    pub kind: GateKind,
    /// Evaluation mode.
    #[module(skip)]
    pub mode: GateMode,
}

impl<B: Backend> Gates<B> {
    /// Constructs the gate weights of `kind` (`g10 = options.gate_scale` on prefix positions).
    pub fn new(kind: GateKind, dims: &TintDims, options: &TintOptions, device: &B::Device) -> Self {
        let pd = dims.position_dim();
        let tmax = dims.max_seq_length();
        let g = options.gate_scale;
        let on_prefix = |value: f64| -> Vec<f64> {
            (0..pd)
                .map(|i| if i >= tmax { value } else { 0.0 })
                .collect()
        };
        let dtype = options.float_dtype;
        let (new_weight, new_bias) = match kind {
            GateKind::ForwardBackward => (on_prefix(-g), g),
            GateKind::Descent => (vec![0.0; pd], g),
        };
        Self {
            old_weight: Param::from_tensor(tensor_from_f64(on_prefix(g), [pd, 1], dtype, device)),
            old_bias: Param::from_tensor(tensor_from_f64(vec![0.0], [1], dtype, device)),
            new_weight: Param::from_tensor(tensor_from_f64(new_weight, [pd, 1], dtype, device)),
            new_bias: Param::from_tensor(tensor_from_f64(vec![new_bias], [1], dtype, device)),
            kind,
            mode: options.gate_mode,
        }
    }

    /// Gates the module output against the module input.
    ///
    /// # Shapes
    /// * `input`, `module_out`: `[batch_size, P + T, d_sim]` → `[batch_size, P + T, d_sim]`
    pub fn forward(
        &self,
        input: Tensor<B, 3>,
        module_out: Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let p = ctx.n_prefixes;
        match self.mode {
            GateMode::Exact => {
                let [_, n_rows, _] = input.dims();
                let prefix_in = input.narrow(1, 0, p);
                let prefix = match self.kind {
                    GateKind::ForwardBackward => prefix_in,
                    GateKind::Descent => prefix_in + module_out.clone().narrow(1, 0, p),
                };
                Tensor::cat(vec![prefix, module_out.narrow(1, p, n_rows - p)], 1)
            }
            GateMode::Tanh => {
                let gate = |weight: &Param<Tensor<B, 2>>, bias: &Param<Tensor<B, 1>>| {
                    // One-hot position · u = row gather of u.
                    (weight.val().select(0, ctx.position_index.clone()) + bias.val().unsqueeze())
                        .tanh()
                        .unsqueeze::<3>() // [1, N, 1]
                };
                gate(&self.old_weight, &self.old_bias) * input
                    + gate(&self.new_weight, &self.new_bias) * module_out
            }
        }
    }
}
