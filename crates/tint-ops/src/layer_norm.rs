//! The LayerNorm descent (docs/construction.md §6.6–6.7): the norm backward of [`NormBackward`] with
//! the bias-only descent of `beta`. The forward and backward themselves are [`crate::norm`]'s, shared
//! with RMSNorm.

use burn::{
    module::Module,
    tensor::{backend::Backend, Tensor},
};

use crate::{
    context::SimContext,
    difference::layer_norm_difference,
    dims::TintDims,
    error::TintOpsError,
    group_norm::NormKind,
    layout,
    linear::{column_view, columns, prefix_weight_and_bias, DescentUpdate, LinearDescent},
    norm::NormBackward,
    options::{Derivative, TintOptions},
};

/// LayerNormDescent_Backward (§6.6 + §6.7): token rows from [`NormBackward`] (LayerNorm, old gamma),
/// prefix rows with `beta ← beta - η Σ_{t train} dy_t` (gamma not updated).
#[derive(Module, Debug)]
pub struct LayerNormBackwardDescent<B: Backend> {
    /// Backward part ([`NormKind::Layer`]).
    pub backward: NormBackward<B>,
    /// Bias-only descent.
    pub descent: LinearDescent<B>,
}

impl<B: Backend> LayerNormBackwardDescent<B> {
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
            backward: NormBackward::new(NormKind::Layer, dims, options, device)?,
            descent: LinearDescent::new(
                dims,
                dims.ln_memory_index(),
                DescentUpdate::BiasOnly,
                options,
                device,
            )?,
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

    /// The prefix rows (updated bias) and token rows of [`LayerNormBackwardDescent::forward`] on the
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
        let out = layout::cat_columns(vec![
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
        group_norm::layer_norm_plain,
        layout,
        norm::NormForward,
        prefix,
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
        // The structured row forms (forward_rows / LayerNormBackwardDescent::forward_rows: one
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
                NormForward::<TestBackend>::new(NormKind::Layer, &dims, &constructed, &device)
                    .unwrap();
            let full = layout::token_rows(forward.forward(state.clone(), &ctx), p);
            let descent =
                LayerNormBackwardDescent::<TestBackend>::new(&dims, &constructed, &device).unwrap();
            let full_descent = descent.forward(state.clone(), &ctx);
            for options in [structured, constructed] {
                let forward =
                    NormForward::<TestBackend>::new(NormKind::Layer, &dims, &options, &device)
                        .unwrap();
                let rows = forward.forward_rows(prefix.clone(), tokens.clone(), &ctx);
                assert!(
                    max_abs_diff(rows, full.clone()) < F64_TOL,
                    "LayerNormForward"
                );
                let descent =
                    LayerNormBackwardDescent::<TestBackend>::new(&dims, &options, &device).unwrap();
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
                NormForward::<TestBackend>::new(NormKind::Layer, &dims, &f64_options(), &device)
                    .unwrap();
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
        let forward =
            NormForward::<TestBackend>::new(NormKind::Layer, dims, options, &device).unwrap();
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
        let module = LayerNormBackwardDescent::<TestBackend>::new(dims, options, &device).unwrap();
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
            let module =
                NormBackward::<TestBackend>::new(NormKind::Layer, &dims, &options, &device)
                    .unwrap();
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
