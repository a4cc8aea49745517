//! The norm modules (docs/construction.md §6.5–6.6 for LayerNorm; paper appendix J.1, Def. J.2 for
//! RMSNorm): forward and first-order (or exact) backward of the group norm over the first `D` dims,
//! one pair of modules for both normalisations ([`NormKind`]).
//!
//! The prefix rows hold `(diag(gamma), beta)` ([`crate::prefix::write_layer_norm`]; RMSNorm with a
//! zero bias). Only LayerNorm has a descent ([`crate::layer_norm::LayerNormBackwardDescent`], bias
//! only): the descent of a gain needs `Σ_t z_t ⊙ dy_t`, an element-wise product the linear descent
//! module does not compute (paper Def. F.2), so RMSNorm's gain is not updated.

use burn::{
    module::Module,
    tensor::{backend::Backend, Tensor},
};

use crate::{
    context::SimContext,
    dims::TintDims,
    error::TintOpsError,
    gates::{GateKind, Gates},
    group_norm::{constructed_norm_difference, NormKind},
    hsplit::{DimWise, DimWiseBuilder},
    layout,
    layout::cat_columns,
    linear::{columns, LinearBackward, LinearForward},
    options::{Derivative, TintOptions},
};

/// NormForward (§6.5): token rows `gamma ⊙ f(x) + beta` in dims `[0, D)`, memory
/// `[mem, mem + D) = f(x)`, `[mem + D, mem + 2D) = x` (`mem = Ds - 2D`); prefix rows unchanged.
/// The prefix rows hold `(diag(gamma), beta)` ([`crate::prefix::write_layer_norm`]).
#[derive(Module, Debug)]
pub struct NormForward<B: Backend> {
    /// Which normalisation `f` is.
    #[module(skip)]
    pub kind: NormKind,
    /// Gate of the group-norm stage (prefix rows bypass the normalisation).
    pub norm_gates: Gates<B>,
    /// `(diag(gamma), beta)` applied to `f(x)`, storing `f(x)` at the memory.
    pub linear: LinearForward<B>,
    /// Norm epsilon.
    pub epsilon: f64,
    /// Group-norm weight value (`tanh(g10)`, 1 for exact gates).
    pub gate_value: f64,
    /// `D`.
    pub d_model: usize,
    /// `Ds - 2D`.
    pub memory_index: usize,
}

impl<B: Backend> NormForward<B> {
    /// Constructs the module (`options.ln_epsilon` is the norm's epsilon).
    ///
    /// # Errors
    /// Invalid options.
    pub fn new(
        kind: NormKind,
        dims: &TintDims,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        let mem = dims.ln_memory_index();
        Ok(Self {
            kind,
            norm_gates: Gates::new(GateKind::ForwardBackward, dims, options, device),
            linear: LinearForward::new(dims, Some(mem), options, device)?,
            epsilon: options.ln_epsilon,
            gate_value: options.gate_on_value(),
            d_model: dims.d_model(),
            memory_index: mem,
        })
    }

    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let [batch_size, n_rows, _] = state.dims();
        let p = ctx.n_prefixes;
        let d = self.d_model;
        let out = self
            .linear
            .forward(self.gated_norm(state.clone(), ctx), ctx);
        let mem = self.memory_index + d;
        out.slice_assign(
            [0..batch_size, p..n_rows, mem..mem + d],
            state.narrow(1, p, n_rows - p).narrow(2, 0, d),
        )
    }

    /// The group norm of the first `D` dims of every row, through the norm's gates: the linear
    /// module's input in [`NormForward::forward`].
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    fn gated_norm(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let normed =
            self.kind
                .group_first(state.clone(), self.d_model, self.epsilon, self.gate_value);
        self.norm_gates.forward(state, normed, ctx)
    }

    /// The token rows of [`NormForward::forward`] on `[prefix; tokens]`, as `forward` computes
    /// them but with the linear module's gate applied to the token rows alone
    /// ([`crate::Gates::combine_tokens`]): the gated state is never joined.
    ///
    /// # Shapes
    /// * `prefix`: `[batch_size, P, Ds]`, `tokens`: `[batch_size, T, Ds]` → `[batch_size, T, Ds]`
    fn token_rows_of_forward(
        &self,
        prefix: Tensor<B, 3>,
        tokens: Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let [batch_size, n_tokens, _] = tokens.dims();
        let p = ctx.n_prefixes;
        let d = self.d_model;
        let normed = self.gated_norm(layout::join_rows(prefix, tokens.clone()), ctx);
        let out = self.linear.forward_tokens(normed.clone(), ctx, false);
        let out = self
            .linear
            .gates
            .combine_tokens(layout::token_rows(normed, p), out, ctx);
        let mem = self.memory_index + d;
        out.slice_assign(
            [0..batch_size, 0..n_tokens, mem..mem + d],
            tokens.narrow(2, 0, d),
        )
    }

    /// The token rows of [`NormForward::forward`] on the state `[prefix; tokens]`, without
    /// building it: `[gamma ⊙ f(x) + beta, 0, …, f(x), x]` with one matmul by `diag(gamma)`.
    ///
    /// # Shapes
    /// * `prefix`: `[batch_size, P, Ds]`, `tokens`: `[batch_size, T, Ds]` → `[batch_size, T, Ds]`
    pub fn forward_rows(
        &self,
        prefix: Tensor<B, 3>,
        tokens: Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let exact = self.norm_gates.is_selection()
            && self.linear.gates.is_selection()
            && self.gate_value == 1.0;
        if !(exact && self.linear.is_structured()) {
            return self.token_rows_of_forward(prefix, tokens, ctx);
        }
        let [_, _, ds] = tokens.dims();
        let (d, mem) = (self.d_model, self.memory_index);
        let x = columns(&tokens, 0, d);
        let normed = self.kind.normalize_rows(x.clone(), self.epsilon);
        let y = self.linear.structured_product(&prefix, normed.clone());
        cat_columns(vec![
            (Some(y), d),
            (None, mem - d),
            (Some(normed), d),
            (Some(x), d),
            (None, ds - mem - 2 * d),
        ])
    }
}

/// NormBackward (§6.6), first order: `dz = gamma ⊙ dy`, then
/// `dx = s (f(x + dz/s) - zhat)` (or the exact `J_f(x) dz`), `x`, `zhat` read from the memory
/// written by [`NormForward`]; memory passes through; prefix rows unchanged.
#[derive(Module, Debug)]
pub struct NormBackward<B: Backend> {
    /// Which normalisation `f` is.
    #[module(skip)]
    pub kind: NormKind,
    /// `dz = gamma ⊙ dy` (LinearBackward with `diag(gamma)`).
    pub linear: LinearBackward<B>,
    /// Heads `< D/hd` ← `signal/s + x` (dimension-wise over `Hs` heads).
    pub shift_in: DimWise<B>,
    /// Heads `< D/hd` ← `s·signal - s·zhat`.
    pub shift_out: DimWise<B>,
    /// Forward/backward gate.
    pub gates: Gates<B>,
    /// Finite differences or exact.
    #[module(skip)]
    pub derivative: Derivative,
    /// Norm epsilon.
    pub epsilon: f64,
    /// Group-norm weight value.
    pub gate_value: f64,
    /// `D`.
    pub d_model: usize,
    /// `Ds - 2D`.
    pub memory_index: usize,
}

impl<B: Backend> NormBackward<B> {
    /// Constructs the module.
    ///
    /// # Errors
    /// Invalid options.
    pub fn new(
        kind: NormKind,
        dims: &TintDims,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        let (hs, hd, d) = (dims.n_heads_sim(), dims.head_dim_sim(), dims.d_model());
        let mem = dims.ln_memory_index();
        let scale = match options.derivative {
            Derivative::FiniteDifference { scale } => scale,
            Derivative::Exact => 1.0,
        };
        let (zhat_head, x_head, signal_heads) = (mem / hd, (mem + d) / hd, d / hd);
        let mut shift_in = DimWiseBuilder::identity(hs, hd);
        let mut shift_out = DimWiseBuilder::identity(hs, hd);
        for i in 0..signal_heads {
            shift_in.set_all_coords(i, i, 1.0 / scale);
            shift_in.set_all_coords(i, x_head + i, 1.0);
            shift_out.set_all_coords(i, i, scale);
            shift_out.set_all_coords(i, zhat_head + i, -scale);
        }
        Ok(Self {
            kind,
            linear: LinearBackward::new(dims, Some(mem), options, device)?,
            shift_in: shift_in.build(options.float_dtype, device),
            shift_out: shift_out.build(options.float_dtype, device),
            gates: Gates::new(GateKind::ForwardBackward, dims, options, device),
            derivative: options.derivative,
            epsilon: options.ln_epsilon,
            gate_value: options.gate_on_value(),
            d_model: d,
            memory_index: mem,
        })
    }

    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let [batch_size, _, _] = state.dims();
        let d = self.d_model;
        let dz = self.linear.forward_tokens(state.clone(), ctx); // [B, T, Ds]
        let tokens = match self.derivative {
            Derivative::FiniteDifference { scale }
                if self.linear.is_structured() && self.gate_value == 1.0 =>
            {
                // Structured execution: the shift maps' `s f(dz/s + x) - s zhat` in the
                // cancellation-free form (crate::difference; docs/tint-llama.md).
                let x = dz.clone().narrow(2, self.memory_index + d, d);
                let grad = dz.clone().narrow(2, 0, d);
                let dx = self.kind.difference(x, grad, self.epsilon, scale);
                dz.slice_assign([0..batch_size, 0..dx.dims()[1], 0..d], dx)
            }
            Derivative::FiniteDifference { .. } => {
                // Constructed execution: shift map, group norm of `dz/s + x` and of `x`, shift
                // map, in float64 arithmetic (docs/construction.md §6.6).
                let (kind, eps, gate) = (self.kind, self.epsilon, self.gate_value);
                constructed_norm_difference(
                    dz,
                    &self.shift_in,
                    &self.shift_out,
                    d,
                    self.memory_index,
                    |t| kind.group_first(t, d, eps, gate),
                )
            }
            Derivative::Exact => {
                let x = dz.clone().narrow(2, self.memory_index + d, d);
                let grad = dz.clone().narrow(2, 0, d);
                let dx = self.kind.jacobian_product(x, grad, self.epsilon);
                dz.slice_assign([0..batch_size, 0..dx.dims()[1], 0..d], dx)
            }
        };
        self.gates.combine(state, None, Some(tokens), ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        layout, prefix,
        testing::{context, f64_options, max_abs_diff, random, test_dims, TestBackend},
    };

    /// f64, O(1) values; the finite difference multiplies round-off (1e-16) by s = 1000.
    const F64_TOL: f64 = 1e-9;
    const BATCH: usize = 2;
    const EPS: f64 = 1e-5;

    fn rms_state(dims: &TintDims, gamma: Tensor<TestBackend, 2>) -> Tensor<TestBackend, 3> {
        let zero_bias = gamma.zeros_like();
        let prefix = prefix::write_layer_norm(gamma, zero_bias, dims).unwrap();
        let tokens = random([BATCH, dims.seq_length(), dims.d_sim()], 1.0) * 2.0 + 0.5;
        Tensor::cat(vec![prefix, tokens], 1)
    }

    #[test]
    fn row_forms_equal_the_forward_token_rows_for_both_norms() {
        // forward_rows (structured: one matmul by diag(gamma), constructed: the forward on the
        // joined state) against the token rows of the constructed forward, f64, random gamma and
        // beta, LayerNorm and RMSNorm.
        let device = Default::default();
        let constructed = f64_options();
        let structured = constructed.with_execution(crate::options::Execution::Structured);
        for kind in [NormKind::Layer, NormKind::Rms] {
            for dims in test_dims() {
                let p = dims.n_prefixes();
                let ctx = context(&dims, BATCH);
                let gamma = random([BATCH, dims.d_model()], 1.0);
                let beta = random([BATCH, dims.d_model()], 1.0);
                let prefix = prefix::write_layer_norm(gamma, beta, &dims).unwrap();
                let tokens = random([BATCH, dims.seq_length(), dims.d_sim()], 1.0) * 2.0 + 0.5;
                let state = Tensor::cat(vec![prefix, tokens], 1);
                let expected = layout::token_rows(
                    NormForward::<TestBackend>::new(kind, &dims, &constructed, &device)
                        .unwrap()
                        .forward(state.clone(), &ctx),
                    p,
                );
                for options in [structured, constructed] {
                    let module = NormForward::new(kind, &dims, &options, &device).unwrap();
                    let rows = module.forward_rows(
                        layout::prefix_rows(state.clone(), p),
                        layout::token_rows(state.clone(), p),
                        &ctx,
                    );
                    let err = max_abs_diff(rows, expected.clone());
                    assert!(err < F64_TOL, "{kind:?}, S = {}: {err}", dims.stack());
                }
            }
        }
    }

    /// Plain RMSNorm without gain, written out per row.
    fn plain_rms(x: Tensor<TestBackend, 3>) -> Tensor<TestBackend, 3> {
        let [b, t, d] = x.dims();
        let xs: Vec<f64> = x.to_data().to_vec().unwrap();
        let mut out = vec![0.0; xs.len()];
        for row in 0..b * t {
            let r = &xs[row * d..(row + 1) * d];
            let inv = 1.0 / (r.iter().map(|v| v * v).sum::<f64>() / d as f64 + EPS).sqrt();
            for j in 0..d {
                out[row * d + j] = r[j] * inv;
            }
        }
        crate::host::tensor_from_f64(out, [b, t, d], burn::tensor::DType::F64, &x.device())
    }

    /// One test shape: the state, the forward output and gamma.
    type ForwardCase = (
        TintDims,
        Tensor<TestBackend, 3>,
        Tensor<TestBackend, 3>,
        Tensor<TestBackend, 2>,
    );

    /// Forward on every test shape.
    fn forward_cases() -> Vec<ForwardCase> {
        let device = Default::default();
        test_dims()
            .into_iter()
            .map(|dims| {
                let module =
                    NormForward::<TestBackend>::new(NormKind::Rms, &dims, &f64_options(), &device)
                        .unwrap();
                let gamma = random([BATCH, dims.d_model()], 1.0);
                let state = rms_state(&dims, gamma.clone());
                let out = module.forward(state.clone(), &context(&dims, BATCH));
                (dims, state, out, gamma)
            })
            .collect()
    }

    #[test]
    fn rms_norm_forward_matches_the_math() {
        for (dims, state, out, gamma) in forward_cases() {
            let (d, p, mem) = (dims.d_model(), dims.n_prefixes(), dims.ln_memory_index());
            let x = layout::token_rows(state.clone(), p).narrow(2, 0, d);
            let z = plain_rms(x.clone());
            let out_tok = layout::token_rows(out.clone(), p);
            let expected = z.clone() * gamma.unsqueeze_dim(1);
            assert!(max_abs_diff(out_tok.clone().narrow(2, 0, d), expected) < F64_TOL);
            assert!(max_abs_diff(out_tok.clone().narrow(2, mem, d), z) < F64_TOL);
            assert_eq!(max_abs_diff(out_tok.narrow(2, mem + d, d), x), 0.0);
            assert_eq!(
                max_abs_diff(out.narrow(1, 0, p), state.narrow(1, 0, p)),
                0.0
            );
        }
    }

    /// The backward state: forward memory, `dy` in the signal dims, the same prefix rows.
    fn backward_state(
        dims: &TintDims,
        state: Tensor<TestBackend, 3>,
        out: Tensor<TestBackend, 3>,
        dy: Tensor<TestBackend, 3>,
    ) -> Tensor<TestBackend, 3> {
        let (d, p, mem) = (dims.d_model(), dims.n_prefixes(), dims.ln_memory_index());
        let stored = layout::token_memory(out, p, mem);
        let tokens = layout::token_rows(state.clone(), p)
            .slice_assign([0..BATCH, 0..dims.seq_length(), 0..d], dy);
        layout::with_token_memory(
            layout::join_rows(state.narrow(1, 0, p), tokens),
            p,
            mem,
            stored,
        )
    }

    #[test]
    fn rms_norm_backward_is_the_first_order_formula_and_exact_mode_is_the_jacobian() {
        let device = Default::default();
        let scale = 1000.0;
        for (dims, state, out, gamma) in forward_cases() {
            let (d, p, mem) = (dims.d_model(), dims.n_prefixes(), dims.ln_memory_index());
            let ctx = context(&dims, BATCH);
            let dy = random([BATCH, dims.seq_length(), d], 1.0);
            let bwd_state = backward_state(&dims, state, out, dy.clone());
            let x = layout::token_rows(bwd_state.clone(), p).narrow(2, mem + d, d);
            let dz = dy * gamma.unsqueeze_dim(1);

            let options = f64_options().with_derivative(Derivative::FiniteDifference { scale });
            let module =
                NormBackward::<TestBackend>::new(NormKind::Rms, &dims, &options, &device).unwrap();
            let got = layout::token_rows(module.forward(bwd_state.clone(), &ctx), p);
            let expected =
                (plain_rms(x.clone() + dz.clone() / scale) - plain_rms(x.clone())) * scale;
            let err = max_abs_diff(got.clone().narrow(2, 0, d), expected.clone());
            assert!(err < F64_TOL, "S = {}: {err}", dims.stack());
            let ds = dims.d_sim();
            assert_eq!(
                max_abs_diff(
                    got.narrow(2, mem, ds - mem),
                    layout::token_memory(bwd_state.clone(), p, mem)
                ),
                0.0
            );

            // Exact: central differences of the plain math in f64 (step 1e-6: error ~1e-10).
            let options = f64_options().with_derivative(Derivative::Exact);
            let module =
                NormBackward::<TestBackend>::new(NormKind::Rms, &dims, &options, &device).unwrap();
            let exact = layout::token_rows(module.forward(bwd_state, &ctx), p).narrow(2, 0, d);
            let h = 1e-6;
            let central =
                (plain_rms(x.clone() + dz.clone() * h) - plain_rms(x - dz * h)) / (2.0 * h);
            let err = max_abs_diff(exact.clone(), central);
            assert!(err < 1e-7, "exact S = {}: {err}", dims.stack());
            // First order: |fd - exact| is O(1/s) = O(1e-3), far above the 1e-9 agreement above.
            let gap = max_abs_diff(expected, exact);
            assert!(gap > 1e-8 && gap < 1e-1, "fd vs exact gap {gap}");
        }
    }

    #[test]
    fn rms_norm_parameter_counts_equal_the_layer_norm_closed_forms() {
        use burn::module::Module;
        let device = Default::default();
        for dims in test_dims() {
            let o = f64_options();
            assert_eq!(
                NormForward::<TestBackend>::new(NormKind::Rms, &dims, &o, &device)
                    .unwrap()
                    .num_params(),
                crate::param_count::layer_norm_forward(&dims)
            );
            // LayerNormDescent_Backward = backward + LinearDescent (LB); the backward alone is LNB - LB.
            assert_eq!(
                NormBackward::<TestBackend>::new(NormKind::Rms, &dims, &o, &device)
                    .unwrap()
                    .num_params(),
                crate::param_count::layer_norm_descent_backward(&dims)
                    - crate::param_count::linear_backward(&dims)
            );
        }
    }
}
