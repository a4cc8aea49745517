//! Gated linear unit modules for LLaMA-family auxiliary models (paper appendix J.3): the SwiGLU
//! gate `y = silu(g) ⊙ u` on token rows, and its backward (paper Def. J.4 exact, Def. J.5 first
//! order).
//!
//! Layout (token rows; [`TintDims`] guarantees `Ds >= 4D`, so the regions do not overlap):
//! * input of [`GluForward`]: `g = x W_gate` in dims `[0, D)`, `u = x W_up` in `[D, 2D)` (the outputs
//!   of two LinearForward modules combined, Def. J.3 (a)–(b));
//! * memory written by [`GluForward`]: `g` at `[Ds - 2D, Ds - D)`, `u` at `[Ds - D, Ds)`;
//! * input of [`GluBackward`]: `dy` in `[0, D)` and that memory; output `d_g` in `[0, D)`, `d_u` in
//!   `[D, 2D)`.
//!
//! The GLU descent (Def. J.6) is two LinearDescent calls (`W_up` with `d_u`, `W_gate` with `d_g`,
//! both on the GLU input `x`), so it needs no module of its own. A `d_ff`-wide GLU is cut into
//! `d_ff / D` chunks like the MLP (docs/construction.md §1.2), each chunk one call of these modules.

use burn::{
    module::Module,
    tensor::{activation::sigmoid, backend::Backend, Tensor},
};

use crate::{
    context::SimContext,
    difference::silu_difference,
    dims::TintDims,
    error::TintOpsError,
    gates::{GateKind, Gates},
    options::{Derivative, TintOptions},
};

/// `silu(x) = x σ(x)`, element-wise.
///
/// # Shapes
/// * `x`: any `[..]` → same
pub fn silu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    x.clone() * sigmoid(x)
}

/// `silu'(x) = σ(x) (1 + x (1 - σ(x)))`, element-wise.
///
/// # Shapes
/// * `x`: any `[..]` → same
pub fn silu_derivative<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    let sig = sigmoid(x.clone());
    sig.clone() * (x * (sig.neg() + 1.0) + 1.0)
}

/// GluForward: token rows `[0, D) ← silu(g) ⊙ u`, memory `[Ds - 2D, Ds) ← (g, u)`, other dims
/// unchanged; prefix rows unchanged.
#[derive(Module, Debug)]
pub struct GluForward<B: Backend> {
    /// Forward gate.
    pub gates: Gates<B>,
    /// `D`.
    pub d_model: usize,
    /// `Ds - 2D`.
    pub memory_index: usize,
}

impl<B: Backend> GluForward<B> {
    /// Constructs the module.
    ///
    /// # Errors
    /// Invalid options.
    pub fn new(
        dims: &TintDims,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        options.validate()?;
        Ok(Self {
            gates: Gates::new(GateKind::ForwardBackward, dims, options, device),
            d_model: dims.d_model(),
            memory_index: dims.d_sim() - 2 * dims.d_model(),
        })
    }

    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let [batch_size, n_rows, _] = state.dims();
        let d = self.d_model;
        let mem = self.memory_index;
        let g = state.clone().narrow(2, 0, d);
        let u = state.clone().narrow(2, d, d);
        let out = state
            .clone()
            .slice_assign(
                [0..batch_size, 0..n_rows, 0..d],
                silu(g.clone()) * u.clone(),
            )
            .slice_assign([0..batch_size, 0..n_rows, mem..mem + d], g)
            .slice_assign([0..batch_size, 0..n_rows, mem + d..mem + 2 * d], u);
        self.gates.forward(state, out, ctx)
    }
}

/// GluBackward: from `dy` in `[0, D)` and the stored `(g, u)`, token rows `[0, D) ← d_g`,
/// `[D, 2D) ← d_u = dy ⊙ silu(g)`, with `d_g = u ⊙ s (silu(g + dy/s) - silu(g))` (Def. J.5, `ε = 1/s`,
/// evaluated by [`crate::difference::silu_difference`])
/// or the exact `u ⊙ silu'(g) ⊙ dy` (Def. J.4); memory passes through; prefix rows unchanged.
#[derive(Module, Debug)]
pub struct GluBackward<B: Backend> {
    /// Forward/backward gate.
    pub gates: Gates<B>,
    /// Finite differences or exact.
    #[module(skip)]
    pub derivative: Derivative,
    /// `D`.
    pub d_model: usize,
    /// `Ds - 2D`.
    pub memory_index: usize,
}

impl<B: Backend> GluBackward<B> {
    /// Constructs the module.
    ///
    /// # Errors
    /// Invalid options.
    pub fn new(
        dims: &TintDims,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        options.validate()?;
        Ok(Self {
            gates: Gates::new(GateKind::ForwardBackward, dims, options, device),
            derivative: options.derivative,
            d_model: dims.d_model(),
            memory_index: dims.d_sim() - 2 * dims.d_model(),
        })
    }

    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let [batch_size, n_rows, _] = state.dims();
        let d = self.d_model;
        let mem = self.memory_index;
        let dy = state.clone().narrow(2, 0, d);
        let g = state.clone().narrow(2, mem, d);
        let u = state.clone().narrow(2, mem + d, d);
        let act = silu(g.clone());
        let d_u = dy.clone() * act.clone();
        let d_g = match self.derivative {
            // The difference in cancellation-free form (crate::difference, docs/tint-llama.md).
            Derivative::FiniteDifference { scale } => silu_difference(g, dy, scale) * u,
            Derivative::Exact => silu_derivative(g) * dy * u,
        };
        let out = state
            .clone()
            .slice_assign([0..batch_size, 0..n_rows, 0..d], d_g)
            .slice_assign([0..batch_size, 0..n_rows, d..2 * d], d_u);
        self.gates.forward(state, out, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        layout,
        testing::{context, f64_options, max_abs_diff, random, test_dims, TestBackend},
    };

    /// f64 element-wise ops on O(1) values; the finite difference multiplies round-off (1e-16) by
    /// s = 1000.
    const F64_TOL: f64 = 1e-10;
    /// Central differences (step 1e-6) in f64: truncation ~1e-12, round-off ~1e-10.
    const CENTRAL_TOL: f64 = 1e-7;
    const BATCH: usize = 2;

    fn state(dims: &TintDims) -> Tensor<TestBackend, 3> {
        random(
            [BATCH, dims.n_prefixes() + dims.seq_length(), dims.d_sim()],
            1.5,
        )
    }

    /// Plain math: silu written with exp.
    fn plain_silu(x: Tensor<TestBackend, 3>) -> Tensor<TestBackend, 3> {
        x.clone() / (x.neg().exp() + 1.0)
    }

    #[test]
    fn glu_forward_matches_the_math_and_stores_its_inputs() {
        let device = Default::default();
        for dims in test_dims() {
            let (d, p, ds) = (dims.d_model(), dims.n_prefixes(), dims.d_sim());
            let module = GluForward::<TestBackend>::new(&dims, &f64_options(), &device).unwrap();
            let input = state(&dims);
            let out = module.forward(input.clone(), &context(&dims, BATCH));
            let tok_in = layout::token_rows(input.clone(), p);
            let tok = layout::token_rows(out.clone(), p);
            let (g, u) = (
                tok_in.clone().narrow(2, 0, d),
                tok_in.clone().narrow(2, d, d),
            );
            let expected = plain_silu(g.clone()) * u.clone();
            assert!(max_abs_diff(tok.clone().narrow(2, 0, d), expected) < F64_TOL);
            assert_eq!(max_abs_diff(tok.clone().narrow(2, ds - 2 * d, d), g), 0.0);
            assert_eq!(max_abs_diff(tok.clone().narrow(2, ds - d, d), u), 0.0);
            assert_eq!(
                max_abs_diff(
                    tok.narrow(2, d, ds - 3 * d),
                    tok_in.narrow(2, d, ds - 3 * d)
                ),
                0.0
            );
            assert_eq!(
                max_abs_diff(out.narrow(1, 0, p), input.narrow(1, 0, p)),
                0.0
            );
        }
    }

    #[test]
    fn glu_backward_is_the_first_order_formula_and_exact_mode_is_the_derivative() {
        let device = Default::default();
        let scale = 1000.0;
        for dims in test_dims() {
            let (d, p, ds) = (dims.d_model(), dims.n_prefixes(), dims.d_sim());
            let ctx = context(&dims, BATCH);
            let input = state(&dims);
            let tok = layout::token_rows(input.clone(), p);
            let dy = tok.clone().narrow(2, 0, d);
            let g = tok.clone().narrow(2, ds - 2 * d, d);
            let u = tok.clone().narrow(2, ds - d, d);

            let fd_options = f64_options().with_derivative(Derivative::FiniteDifference { scale });
            let fd = GluBackward::<TestBackend>::new(&dims, &fd_options, &device)
                .unwrap()
                .forward(input.clone(), &ctx);
            let fd_tok = layout::token_rows(fd.clone(), p);
            let expected_dg = (plain_silu(g.clone() + dy.clone() / scale) - plain_silu(g.clone()))
                * scale
                * u.clone();
            let expected_du = dy.clone() * plain_silu(g.clone());
            assert!(max_abs_diff(fd_tok.clone().narrow(2, 0, d), expected_dg.clone()) < F64_TOL);
            assert!(max_abs_diff(fd_tok.clone().narrow(2, d, d), expected_du.clone()) < F64_TOL);
            assert_eq!(
                max_abs_diff(
                    fd_tok.narrow(2, 2 * d, ds - 2 * d),
                    tok.narrow(2, 2 * d, ds - 2 * d)
                ),
                0.0
            );
            assert_eq!(
                max_abs_diff(fd.narrow(1, 0, p), input.clone().narrow(1, 0, p)),
                0.0
            );

            let exact = GluBackward::<TestBackend>::new(
                &dims,
                &f64_options().with_derivative(Derivative::Exact),
                &device,
            )
            .unwrap()
            .forward(input, &ctx);
            let exact_tok = layout::token_rows(exact, p);
            let h = 1e-6;
            let central = (plain_silu(g.clone() + h) - plain_silu(g - h)) / (2.0 * h) * dy * u;
            let exact_dg = exact_tok.clone().narrow(2, 0, d);
            assert!(max_abs_diff(exact_dg.clone(), central) < CENTRAL_TOL);
            assert!(max_abs_diff(exact_tok.narrow(2, d, d), expected_du) < F64_TOL);
            // First order: the finite difference differs from the derivative by O(1/s).
            let gap = max_abs_diff(expected_dg, exact_dg);
            assert!(gap > 1e-8 && gap < 1e-1, "fd vs exact gap {gap}");
        }
    }

    #[test]
    fn only_the_gates_carry_parameters() {
        use burn::module::Module;
        let device = Default::default();
        for dims in test_dims() {
            let o = f64_options();
            let g = crate::param_count::gates(&dims);
            assert_eq!(
                GluForward::<TestBackend>::new(&dims, &o, &device)
                    .unwrap()
                    .num_params(),
                g
            );
            assert_eq!(
                GluBackward::<TestBackend>::new(&dims, &o, &device)
                    .unwrap()
                    .num_params(),
                g
            );
        }
    }
}
