//! LayerNorm modules (docs/construction.md §6.5–6.7): forward, first-order backward, bias-only descent.

use burn::{
    module::Module,
    tensor::{backend::Backend, Tensor},
};

use crate::{
    context::SimContext,
    difference::layer_norm_difference,
    dims::TintDims,
    error::TintOpsError,
    gates::{GateKind, Gates},
    group_norm::{constructed_norm_difference, group_norm_first, layer_norm_plain},
    hsplit::{DimWise, DimWiseBuilder},
    layout,
    linear::{cat_columns, column_view, columns, prefix_weight_and_bias},
    linear::{LinearBackward, LinearDescent, LinearForward},
    options::{Derivative, TintOptions},
};

/// `(x - mean)/sqrt(var + eps)` over the last dim, as [`layer_norm_plain`] with weight 1 computes
/// it, with materialised row statistics (flex walks a broadcast operand element by element).
///
/// # Shapes
/// * `x`: `[batch_size, rows, d]` (contiguous) → same
fn normalize_rows<B: Backend>(x: Tensor<B, 3>, eps: f64) -> Tensor<B, 3> {
    let [_, _, d] = x.dims();
    let centered = x.clone() - layout::repeat_columns(x.mean_dim(2), d);
    let var = (centered.clone() * centered.clone()).mean_dim(2);
    centered / layout::repeat_columns((var + eps).sqrt(), d)
}

/// LayerNormForward (§6.5): token rows `gamma ⊙ f(x) + beta` in dims `[0, D)`, memory
/// `[mem, mem + D) = f(x)`, `[mem + D, mem + 2D) = x` (`mem = Ds - 2D`); prefix rows unchanged.
/// The prefix rows hold `(diag(gamma), beta)` ([`crate::prefix::write_layer_norm`]).
#[derive(Module, Debug)]
pub struct LayerNormForward<B: Backend> {
    /// Gate of the group-norm stage (prefix rows bypass the normalisation).
    pub norm_gates: Gates<B>,
    /// `(diag(gamma), beta)` applied to `f(x)`, storing `f(x)` at the memory.
    pub linear: LinearForward<B>,
    /// LN epsilon.
    pub epsilon: f64,
    /// Group-norm weight value (`tanh(g10)`, 1 for exact gates).
    pub gate_value: f64,
    /// `D`.
    pub d_model: usize,
    /// `Ds - 2D`.
    pub memory_index: usize,
}

impl<B: Backend> LayerNormForward<B> {
    /// Constructs the module.
    ///
    /// # Errors
    /// Invalid options.
    pub fn new(
        dims: &TintDims,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        let mem = dims.ln_memory_index();
        Ok(Self {
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
        let normed = group_norm_first(state.clone(), d, self.epsilon, self.gate_value);
        let normed = self.norm_gates.forward(state.clone(), normed, ctx);
        let out = self.linear.forward(normed, ctx);
        let mem = self.memory_index + d;
        out.slice_assign(
            [0..batch_size, p..n_rows, mem..mem + d],
            state.narrow(1, p, n_rows - p).narrow(2, 0, d),
        )
    }

    /// The token rows of [`LayerNormForward::forward`] on the state `[prefix; tokens]`, without
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
            let p = ctx.n_prefixes;
            return layout::token_rows(self.forward(layout::join_rows(prefix, tokens), ctx), p);
        }
        let [_, _, ds] = tokens.dims();
        let (d, mem) = (self.d_model, self.memory_index);
        let x = columns(&tokens, 0, d);
        let normed = normalize_rows(x.clone(), self.epsilon);
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

/// LayerNormBackward (§6.6), first order: `dz = gamma ⊙ dy`, then
/// `dx = s (f(x + dz/s) - zhat)` (or the exact `J_f(x) dz`), `x`, `zhat` read from the memory
/// written by [`LayerNormForward`]; memory passes through; prefix rows unchanged.
#[derive(Module, Debug)]
pub struct LayerNormBackward<B: Backend> {
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
    /// LN epsilon.
    pub epsilon: f64,
    /// Group-norm weight value.
    pub gate_value: f64,
    /// `D`.
    pub d_model: usize,
    /// `Ds - 2D`.
    pub memory_index: usize,
}

impl<B: Backend> LayerNormBackward<B> {
    /// Constructs the module.
    ///
    /// # Errors
    /// Invalid options.
    pub fn new(
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
                let dx = layer_norm_difference(x, grad, self.epsilon, scale);
                dz.slice_assign([0..batch_size, 0..dx.dims()[1], 0..d], dx)
            }
            Derivative::FiniteDifference { .. } => {
                // Constructed execution: shift map, group norm of `dz/s + x` and of `x`, shift
                // map, in float64 arithmetic (docs/construction.md §6.6).
                let (eps, gate) = (self.epsilon, self.gate_value);
                constructed_norm_difference(
                    dz,
                    &self.shift_in,
                    &self.shift_out,
                    d,
                    self.memory_index,
                    |t| group_norm_first(t, d, eps, gate),
                )
            }
            Derivative::Exact => {
                let x = dz.clone().narrow(2, self.memory_index + d, d);
                let grad = dz.clone().narrow(2, 0, d);
                let z = layer_norm_plain(x.clone(), self.epsilon, 1.0);
                let centered = x.clone() - x.mean_dim(2);
                let sigma = (centered.powi_scalar(2).mean_dim(2) + self.epsilon).sqrt();
                let dx =
                    (grad.clone() - grad.clone().mean_dim(2) - z.clone() * (grad * z).mean_dim(2))
                        / sigma;
                dz.slice_assign([0..batch_size, 0..dx.dims()[1], 0..d], dx)
            }
        };
        self.gates.combine(state, None, Some(tokens), ctx)
    }
}

/// LayerNormDescent_Backward (§6.6 + §6.7): token rows from [`LayerNormBackward`] (old gamma),
/// prefix rows with `beta ← beta - η Σ_{t train} dy_t` (gamma not updated).
#[derive(Module, Debug)]
pub struct LayerNormDescentBackward<B: Backend> {
    /// Backward part.
    pub backward: LayerNormBackward<B>,
    /// Bias-only descent.
    pub descent: LinearDescent<B>,
}

impl<B: Backend> LayerNormDescentBackward<B> {
    /// Constructs the pair.
    ///
    /// # Errors
    /// Invalid options.
    pub fn new(
        dims: &TintDims,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        Ok(Self {
            backward: LayerNormBackward::new(dims, options, device)?,
            descent: LinearDescent::new(dims, dims.ln_memory_index(), true, options, device)?,
        })
    }

    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let p = ctx.n_prefixes;
        let [_, n_rows, _] = state.dims();
        let backward = self.backward.forward(state.clone(), ctx);
        let descent = self.descent.forward(state, ctx);
        Tensor::cat(
            vec![descent.narrow(1, 0, p), backward.narrow(1, p, n_rows - p)],
            1,
        )
    }

    /// The prefix rows (updated bias) and token rows of [`LayerNormDescentBackward::forward`] on the
    /// state `[prefix; tokens]`, without building it. With finite differences the token rows are
    /// `[s f(dz/s + x) - s zhat, 0, …, memory]`, `dz = diag(gamma) dy` one matmul.
    ///
    /// # Shapes
    /// * `prefix`: `[batch_size, P, Ds]`, `tokens`: `[batch_size, T, Ds]`
    ///   → (`[batch_size, P, Ds]`, `[batch_size, T, Ds]`)
    pub fn forward_rows(
        &self,
        prefix: Tensor<B, 3>,
        tokens: Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> (Tensor<B, 3>, Tensor<B, 3>) {
        let backward = &self.backward;
        let exact = backward.gates.is_selection()
            && backward.linear.gates.is_selection()
            && self.descent.gates.is_selection()
            && backward.gate_value == 1.0;
        let scale = match backward.derivative {
            Derivative::FiniteDifference { scale } => Some(scale),
            Derivative::Exact => None,
        };
        let (Some(scale), true, true, true) = (
            scale,
            exact,
            backward.linear.is_structured(),
            self.descent.is_structured(),
        ) else {
            let p = ctx.n_prefixes;
            let state = self.forward(layout::join_rows(prefix, tokens), ctx);
            return (
                layout::prefix_rows(state.clone(), p),
                layout::token_rows(state, p),
            );
        };
        let [_, _, ds] = tokens.dims();
        let (d, mem) = (backward.d_model, backward.memory_index);
        let (weight, _) = prefix_weight_and_bias(&prefix, d);
        let dz = column_view(&tokens, 0, d).matmul(weight);
        let x = columns(&tokens, mem + d, d);
        // `s f(dz/s + x) - s zhat` (zhat = f(x) stored by the forward) in the cancellation-free
        // form (crate::difference; docs/tint-llama.md, "Float32 numerics").
        let signal = layer_norm_difference(x, dz, backward.epsilon, scale);
        let out = cat_columns(vec![
            (Some(signal), d),
            (None, mem - d),
            (Some(column_view(&tokens, mem, ds - mem)), ds - mem),
        ]);
        let update = self.descent.structured_update(&tokens, ctx);
        (layout::contiguous(prefix) + update, out)
    }
}

#[cfg(test)]
#[allow(clippy::print_stdout, clippy::print_stderr)] // tests report their measured values
mod tests {
    use super::*;
    use crate::{
        layout, prefix,
        testing::{
            context, context_in, f64_options, max_abs_diff, options_in, random, rounded, test_dims,
            TestBackend,
        },
    };
    use burn::tensor::DType;

    /// f64, O(1) values; the finite difference multiplies round-off (1e-16) by s = 1000.
    const F64_TOL: f64 = 1e-9;

    #[test]
    fn structured_row_forms_equal_the_constructed_execution() {
        // The structured row forms (forward_rows / LayerNormDescentBackward::forward_rows: one
        // matmul by the prefix rows' diag(gamma), the finite difference applied directly) against
        // the rows of the constructed execution's `forward` on the joined state, random everywhere
        // (f64, finite differences with s = 1000); the constructed row forms too.
        let device = Default::default();
        for dims in test_dims() {
            let p = dims.n_prefixes();
            let ctx = context(&dims, BATCH);
            let constructed = f64_options().with_inner_lr(0.2);
            let structured = constructed.with_execution(crate::options::Execution::Structured);
            let state = random([BATCH, dims.n_rows(), dims.d_sim()], 1.0);
            // The stored zhat is f(x) of the stored x, as the forward writes it: the structured
            // backward evaluates s (f(x + dz/s) - f(x)) from x alone (crate::difference).
            let (mem, d, n_rows) = (dims.ln_memory_index(), dims.d_model(), dims.n_rows());
            let x = state
                .clone()
                .slice([0..BATCH, p..n_rows, mem + d..mem + 2 * d]);
            let zhat = layer_norm_plain(x, constructed.ln_epsilon, 1.0);
            let state = state.slice_assign([0..BATCH, p..n_rows, mem..mem + d], zhat);
            let (prefix, tokens) = (
                layout::prefix_rows(state.clone(), p),
                layout::token_rows(state.clone(), p),
            );
            let forward =
                LayerNormForward::<TestBackend>::new(&dims, &constructed, &device).unwrap();
            let full = layout::token_rows(forward.forward(state.clone(), &ctx), p);
            let descent =
                LayerNormDescentBackward::<TestBackend>::new(&dims, &constructed, &device).unwrap();
            let full_descent = descent.forward(state.clone(), &ctx);
            for options in [structured, constructed] {
                let forward =
                    LayerNormForward::<TestBackend>::new(&dims, &options, &device).unwrap();
                let rows = forward.forward_rows(prefix.clone(), tokens.clone(), &ctx);
                assert!(
                    max_abs_diff(rows, full.clone()) < F64_TOL,
                    "LayerNormForward"
                );
                let descent =
                    LayerNormDescentBackward::<TestBackend>::new(&dims, &options, &device).unwrap();
                let (new_prefix, rows) = descent.forward_rows(prefix.clone(), tokens.clone(), &ctx);
                let expected_rows = layout::token_rows(full_descent.clone(), p);
                assert!(max_abs_diff(rows, expected_rows) < F64_TOL);
                let expected_prefix = layout::prefix_rows(full_descent.clone(), p);
                assert!(max_abs_diff(new_prefix, expected_prefix) < F64_TOL);
            }
        }
    }
    /// f32 LayerNorm outputs carry a few ulp (~3e-7 on O(1) values) of round-off; the finite
    /// difference `s (f(x + dz/s) - f(x))` multiplies it by s = 1000 (3 of f32's ~7 digits lost):
    /// the largest error seen over repeated random runs was 5.2e-4, so 5e-3 (~10x margin) still
    /// catches an O(1) construction error.
    const F32_FD_TOL: f64 = 5e-3;
    /// f32 bias descent `b - η Σ_t dy_t` over ≤ 7 tokens of O(1) values: a few ulp (~1e-6).
    const F32_TOL: f64 = 2e-5;
    const BATCH: usize = 2;

    fn ln_state(
        dims: &TintDims,
        gamma: Tensor<TestBackend, 2>,
        beta: Tensor<TestBackend, 2>,
    ) -> Tensor<TestBackend, 3> {
        let prefix = prefix::write_layer_norm(gamma, beta, dims).unwrap();
        let tokens = random([BATCH, dims.seq_length(), dims.d_sim()], 1.0) * 2.0 + 0.5;
        Tensor::cat(vec![prefix, tokens], 1)
    }

    #[test]
    fn layer_norm_forward_matches_the_math() {
        let device = Default::default();
        for dims in test_dims() {
            let (d, p, mem) = (dims.d_model(), dims.n_prefixes(), dims.ln_memory_index());
            let module =
                LayerNormForward::<TestBackend>::new(&dims, &f64_options(), &device).unwrap();
            let ctx = context(&dims, BATCH);
            let gamma = random([BATCH, d], 1.0);
            let beta = random([BATCH, d], 1.0);
            let state = ln_state(&dims, gamma.clone(), beta.clone());
            let out = module.forward(state.clone(), &ctx);
            let x = layout::token_rows(state.clone(), p).narrow(2, 0, d);
            let z = layer_norm_plain(x.clone(), 1e-5, 1.0);
            let expected = z.clone() * gamma.unsqueeze_dim(1) + beta.unsqueeze_dim(1);
            let out_tok = layout::token_rows(out.clone(), p);
            assert!(max_abs_diff(out_tok.clone().narrow(2, 0, d), expected) < F64_TOL);
            assert!(max_abs_diff(out_tok.clone().narrow(2, mem, d), z) < F64_TOL);
            assert_eq!(max_abs_diff(out_tok.narrow(2, mem + d, d), x), 0.0);
            assert_eq!(
                max_abs_diff(out.narrow(1, 0, p), state.narrow(1, 0, p)),
                0.0
            );
        }
    }

    /// Runs LayerNormForward then LayerNormDescent_Backward on the stored memory, in
    /// `options.float_dtype` on inputs rounded to it; returns f64 tensors.
    fn backward_case(
        dims: &TintDims,
        options: &TintOptions,
    ) -> (
        Tensor<TestBackend, 3>,
        Tensor<TestBackend, 3>,
        Tensor<TestBackend, 2>,
        Tensor<TestBackend, 3>,
    ) {
        let device = Default::default();
        let dtype = options.float_dtype;
        let (d, p, mem) = (dims.d_model(), dims.n_prefixes(), dims.ln_memory_index());
        let ctx = context_in(dims, BATCH, dtype);
        let gamma = rounded(random([BATCH, d], 1.0), dtype);
        let beta = rounded(random([BATCH, d], 1.0), dtype);
        let state = rounded(ln_state(dims, gamma.clone(), beta), dtype);
        let forward = LayerNormForward::<TestBackend>::new(dims, options, &device).unwrap();
        let stored = layout::token_memory(
            forward
                .forward(state.clone().cast(dtype), &ctx)
                .cast(DType::F64),
            p,
            mem,
        );
        let dy = rounded(random([BATCH, dims.seq_length(), d], 1.0), dtype);
        let tokens = layout::token_rows(state.clone(), p)
            .slice_assign([0..BATCH, 0..dims.seq_length(), 0..d], dy.clone());
        let bwd_state = layout::with_token_memory(
            layout::join_rows(state.narrow(1, 0, p), tokens),
            p,
            mem,
            stored,
        );
        let module = LayerNormDescentBackward::<TestBackend>::new(dims, options, &device).unwrap();
        let out = module
            .forward(bwd_state.clone().cast(dtype), &ctx)
            .cast(DType::F64);
        (bwd_state, out, gamma, dy)
    }

    /// LayerNormDescent_Backward with `s = 1000` in `dtype` against the f64 first-order formula.
    fn layer_norm_backward_case(dtype: DType, fd_tol: f64, tol: f64) {
        let eta = 0.05;
        for dims in test_dims() {
            let (d, p, mem) = (dims.d_model(), dims.n_prefixes(), dims.ln_memory_index());
            let scale = 1000.0;
            let options = options_in(dtype).with_inner_lr(eta);
            let (state, out, gamma, dy) = backward_case(&dims, &options);
            let x = layout::token_rows(state.clone(), p).narrow(2, mem + d, d);
            let dz = dy.clone() * gamma.clone().unsqueeze_dim(1);
            let f = |v: Tensor<TestBackend, 3>| layer_norm_plain(v, 1e-5, 1.0);
            let expected = (f(x.clone() + dz / scale) - f(x)) * scale;
            let out_tok = layout::token_rows(out.clone(), p);
            let err = max_abs_diff(out_tok.clone().narrow(2, 0, d), expected);
            assert!(err < fd_tol, "{dtype:?}, S = {}: {err}", dims.stack());
            let ds = dims.d_sim();
            assert_eq!(
                max_abs_diff(
                    out_tok.narrow(2, mem, ds - mem),
                    layout::token_memory(state.clone(), p, mem)
                ),
                0.0
            );
            let ctx = context(&dims, BATCH);
            let (w_old, b_old) = prefix::read_linear(state.narrow(1, 0, p), &dims).unwrap();
            let (w_new, b_new) = prefix::read_linear(out.narrow(1, 0, p), &dims).unwrap();
            assert_eq!(max_abs_diff(w_new, w_old), 0.0, "gamma is not updated");
            let grad_b = (dy * ctx.train_mask.unsqueeze_dim(2))
                .sum_dim(1)
                .squeeze_dim(1);
            let err_b = max_abs_diff(b_new, b_old - grad_b * eta);
            assert!(
                err_b < tol,
                "{dtype:?}, S = {}: beta err {err_b}",
                dims.stack()
            );
        }
    }

    #[test]
    fn layer_norm_backward_is_the_first_order_formula_and_descent_updates_beta_only() {
        layer_norm_backward_case(DType::F64, F64_TOL, F64_TOL);
    }

    #[test]
    fn layer_norm_backward_in_f32_is_the_first_order_formula_within_fd_round_off() {
        layer_norm_backward_case(DType::F32, F32_FD_TOL, F32_TOL);
    }

    #[test]
    fn theorem_f1_first_order_error_shrinks_linearly_in_epsilon() {
        let dims = test_dims()[2];
        let d = dims.d_model();
        let p = dims.n_prefixes();
        let device = Default::default();
        let exact = f64_options().with_derivative(Derivative::Exact);
        let (state, out_exact, _, _) = backward_case(&dims, &exact);
        let ctx = context(&dims, BATCH);
        let mut errors = Vec::new();
        for scale in [10.0, 100.0, 1000.0] {
            let options = f64_options().with_derivative(Derivative::FiniteDifference { scale });
            let module = LayerNormBackward::<TestBackend>::new(&dims, &options, &device).unwrap();
            let out = module.forward(state.clone(), &ctx);
            let err = max_abs_diff(
                layout::token_rows(out, p).narrow(2, 0, d),
                layout::token_rows(out_exact.clone(), p).narrow(2, 0, d),
            );
            println!(
                "Theorem F.1: epsilon = 1/s = {:.0e}: max |dx_fd - dx| = {err:.3e}",
                1.0 / scale
            );
            errors.push(err);
        }
        for pair in errors.windows(2) {
            let ratio = pair[0] / pair[1];
            // O(ε): a 10x smaller step gives ~10x smaller error (second-order terms shift it a bit).
            assert!(
                (6.0..16.0).contains(&ratio),
                "error ratio {ratio} not ~10: {errors:?}"
            );
        }
    }
}
