//! Activation modules (docs/construction.md §6.8–6.9) and the activation functions themselves.

use burn::{
    module::Module,
    tensor::{activation::sigmoid, backend::Backend, Tensor},
};

use crate::{
    context::SimContext,
    difference::activation_difference,
    dims::TintDims,
    error::TintOpsError,
    gates::{GateKind, Gates},
    hsplit::{BlockKind, DimStructure, DimWise, DimWiseBuilder, SplitWise, SplitWiseBuilder},
    layout::cat_columns,
    linear::{column_view, columns},
    options::{ActivationKind, Derivative, Execution, TintOptions},
    precision::in_float64,
};

/// `sqrt(2/π)`, the constant of `gelu_new`.
const GELU_SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of `gelu_new`.
const GELU_CUBIC: f64 = 0.044715;

/// Applies the activation elementwise.
///
/// # Shapes
/// * `x`: any `[..]` → same
pub fn activate<B: Backend, const D: usize>(kind: ActivationKind, x: Tensor<B, D>) -> Tensor<B, D> {
    match kind {
        ActivationKind::GeluNew => {
            // `0.5 (1 + tanh z) = sigmoid(2 z)`: one sigmoid pass instead of tanh, an add and a
            // multiply (flex's scalar `tanhf` costs several of its sigmoids; issue 17). x³ as two
            // products: flex evaluates `powi_scalar` with `powf`, several times slower.
            let cube = x.clone() * x.clone() * x.clone();
            let inner = (x.clone() + cube * GELU_CUBIC) * (2.0 * GELU_SQRT_2_OVER_PI);
            x * sigmoid(inner)
        }
        ActivationKind::Relu => x.clamp_min(0.0),
    }
}

/// [`activate`] on the column blocks marked in `used` (blocks of `width / used.len()` columns);
/// the other blocks are set to 0. For a consumer that ignores those blocks the result is the same
/// as activating everything.
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, width]` → `[batch_size, n_rows, width]`
pub fn activate_blocks<B: Backend>(
    kind: ActivationKind,
    x: Tensor<B, 3>,
    used: &[bool],
) -> Tensor<B, 3> {
    if kind == ActivationKind::GeluNew && crate::flex_host::is_flex::<B>() {
        if let Ok(flex) = crate::flex_host::into_flex(x.clone()) {
            let scale = 2.0 * GELU_SQRT_2_OVER_PI;
            if let Some(out) =
                crate::flex_activation::gelu_new_blocks(&flex, used, GELU_CUBIC, scale)
            {
                return crate::flex_host::from_flex(out);
            }
        }
    }
    activate_blocks_generic(kind, x, used)
}

/// The generic form of [`activate_blocks`] (the reference of the host kernel, module
/// `flex_activation`).
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, width]` → `[batch_size, n_rows, width]`
pub(crate) fn activate_blocks_generic<B: Backend>(
    kind: ActivationKind,
    x: Tensor<B, 3>,
    used: &[bool],
) -> Tensor<B, 3> {
    let [batch_size, n_rows, width] = x.dims();
    if used.iter().all(|&u| u) {
        return activate(kind, x);
    }
    let block = width / used.len();
    let rows = batch_size * n_rows;
    let x2 = x.reshape([rows, width]);
    let (device, dtype) = (x2.device(), x2.dtype());
    let mut parts = Vec::new();
    let mut start = 0;
    while start < used.len() {
        let mut end = start;
        while end < used.len() && used[end] == used[start] {
            end += 1;
        }
        let (from, len) = (start * block, (end - start) * block);
        parts.push(if used[start] {
            let cols = x2.clone().narrow(1, from, len);
            activate(kind, cols.clone().reshape(cols.dims()))
        } else {
            Tensor::zeros([rows, len], (&device, dtype))
        });
        start = end;
    }
    Tensor::cat(parts, 1).reshape([batch_size, n_rows, width])
}

/// The exact derivative of the activation, elementwise.
///
/// # Shapes
/// * `x`: any `[..]` → same
pub fn activate_derivative<B: Backend, const D: usize>(
    kind: ActivationKind,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    match kind {
        ActivationKind::GeluNew => {
            let inner = (x.clone() + x.clone().powi_scalar(3) * GELU_CUBIC) * GELU_SQRT_2_OVER_PI;
            let th = inner.tanh();
            let d_inner =
                (x.clone().powi_scalar(2) * (3.0 * GELU_CUBIC) + 1.0) * GELU_SQRT_2_OVER_PI;
            (th.clone() + 1.0) * 0.5 + x * 0.5 * (th.powi_scalar(2).neg() + 1.0) * d_inner
        }
        ActivationKind::Relu => {
            let dtype = x.dtype();
            x.greater_elem(0.0).float().cast(dtype)
        }
    }
}

/// ActivationForward (§6.8): token rows `act(e)` on dims below the memory, the input `x` (dims
/// `[0, D)`) stored at `[Ds - D, Ds)`; prefix rows unchanged.
#[derive(Module, Debug)]
pub struct ActivationForward<B: Backend> {
    /// `c_fc`: identity dimension-wise op over `Hs` heads.
    pub c_fc: DimWise<B>,
    /// `c_proj`: split-wise identity on heads below the memory, 0 above.
    pub c_proj: SplitWise<B>,
    /// Forward gate.
    pub gates: Gates<B>,
    /// Activation.
    #[module(skip)]
    pub activation: ActivationKind,
    /// `D`.
    pub d_model: usize,
    /// `Ds - D`.
    pub memory_index: usize,
    /// [`Execution::Structured`]: the row forms activate the signal directly (proven equal to the
    /// stored `c_fc`, `c_proj` and gate).
    #[module(skip)]
    pub execution: Execution,
}

impl<B: Backend> ActivationForward<B> {
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
        let (hs, hd) = (dims.n_heads_sim(), dims.head_dim_sim());
        let mem = dims.linear_memory_index();
        let mut c_proj = SplitWiseBuilder::identity(hs, hd);
        for head in mem / hd..hs {
            c_proj.zero_block(head);
        }
        Ok(Self {
            c_fc: DimWiseBuilder::identity(hs, hd).build(options.float_dtype, device),
            c_proj: c_proj.build(options.float_dtype, device),
            gates: Gates::new(GateKind::ForwardBackward, dims, options, device),
            activation: options.activation,
            d_model: dims.d_model(),
            memory_index: mem,
            execution: options.execution,
        })
    }

    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let [_, n_rows, _] = state.dims();
        let p = ctx.n_prefixes;
        let out = self.token_output(state.clone().narrow(1, p, n_rows - p));
        self.gates.combine(state, None, Some(out), ctx)
    }

    /// The module output on the token rows `tokens`, before the gate: `c_proj(act(c_fc(x)))` with
    /// `x` kept at the memory index.
    ///
    /// # Shapes
    /// * `tokens`: `[batch_size, T, Ds]` → `[batch_size, T, Ds]`
    fn token_output(&self, tokens: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch_size, n_tokens, _] = tokens.dims();
        // Fresh contiguous rows: elementwise ops on a row-range view walk element by element.
        let tokens = tokens.clone().reshape(tokens.dims());
        // c_proj reads only its non-zero blocks: the activation of the others is never used.
        let used: Vec<bool> = self
            .c_proj
            .block_kinds
            .iter()
            .map(|&k| k != BlockKind::Zero)
            .collect();
        let out = self.c_proj.forward(activate_blocks(
            self.activation,
            self.c_fc.forward(tokens.clone()),
            &used,
        ));
        let mem = self.memory_index;
        out.slice_assign(
            [0..batch_size, 0..n_tokens, mem..mem + self.d_model],
            tokens.narrow(2, 0, self.d_model),
        )
    }

    /// [`ActivationForward::forward_rows`] for token rows whose dims `[D, memory)` are zero, as a
    /// [`crate::LinearForward`] output leaves them: both activations map 0 to 0, so only the signal
    /// dims `[0, D)` are activated (a quarter of the work for GPT-2's `Ds = 5D`).
    ///
    /// # Shapes
    /// * `prefix`: `[batch_size, P, Ds]`, `tokens`: `[batch_size, T, Ds]` → `[batch_size, T, Ds]`
    pub fn forward_rows_zero_padded(
        &self,
        prefix: Tensor<B, 3>,
        tokens: Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let (d, mem) = (self.d_model, self.memory_index);
        if !self.is_structured() || mem < d {
            return self.forward_rows(prefix, tokens, ctx);
        }
        let x = columns(&tokens, 0, d);
        let [_, _, ds] = tokens.dims();
        cat_columns(vec![
            (Some(activate(self.activation, x.clone())), d),
            (None, mem - d),
            (Some(x), d),
            (None, ds - mem - d),
        ])
    }

    /// Whether the structured execution is selected and the module has the constructed structure
    /// (exact gate, identity `c_fc`, `c_proj` keeping exactly the heads below the memory).
    pub(crate) fn is_structured(&self) -> bool {
        let mem = self.memory_index;
        let hd = self.c_proj.block_size;
        let kept = |i: usize, k: &BlockKind| (*k == BlockKind::Identity) == (i * hd < mem);
        self.execution == Execution::Structured
            && self.gates.is_selection()
            && self.c_fc.structure == DimStructure::Identity
            && self
                .c_proj
                .block_kinds
                .iter()
                .enumerate()
                .all(|(i, k)| kept(i, k) && (*k == BlockKind::Identity || *k == BlockKind::Zero))
    }

    /// The token rows of [`ActivationForward::forward`] on the state `[prefix; tokens]`, without
    /// building it: `[act(e) on dims below the memory, x]` (the constructed `c_fc` is the identity
    /// and `c_proj` keeps exactly the heads below the memory).
    ///
    /// # Shapes
    /// * `prefix`: `[batch_size, P, Ds]`, `tokens`: `[batch_size, T, Ds]` → `[batch_size, T, Ds]`
    pub fn forward_rows(
        &self,
        prefix: Tensor<B, 3>,
        tokens: Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let mem = self.memory_index;
        if !self.is_structured() {
            // The gate's token rows alone (Gates::combine_tokens): the token rows of `forward`
            // without joining the prefix rows, which the module does not read.
            let _ = prefix;
            let out = self.token_output(tokens.clone());
            return self.gates.combine_tokens(tokens, out, ctx);
        }
        let activated = activate(self.activation, columns(&tokens, 0, mem));
        let [_, _, ds] = tokens.dims();
        cat_columns(vec![
            (Some(activated), mem),
            (Some(column_view(&tokens, 0, self.d_model)), self.d_model),
            (None, ds - mem - self.d_model),
        ])
    }
}

/// ActivationBackward (§6.9): dims `[0, D)` = `s (act(u + dy/s) - act(u))` (or `act'(u) dy` with
/// [`Derivative::Exact`]), `u` = stored pre-activation at `[Ds - D, Ds)`, all other dims 0. No gate:
/// prefix rows are transformed too (junk, as in the official code).
#[derive(Module, Debug)]
pub struct ActivationBackward<B: Backend> {
    /// Heads `< D/hd` ← `signal/s + memory` (memory heads kept).
    pub shift_in: DimWise<B>,
    /// Heads `< D/hd` ← `s·h - s·h_memory`, others 0.
    pub shift_out: DimWise<B>,
    /// Activation.
    #[module(skip)]
    pub activation: ActivationKind,
    /// Finite differences or exact.
    #[module(skip)]
    pub derivative: Derivative,
    /// `D`.
    pub d_model: usize,
    /// `Ds - D`.
    pub memory_index: usize,
    /// [`Execution::Structured`]: the row form applies the finite difference directly (proven
    /// equal to the stored shift maps).
    #[module(skip)]
    pub execution: Execution,
}

impl<B: Backend> ActivationBackward<B> {
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
        let (hs, hd, d) = (dims.n_heads_sim(), dims.head_dim_sim(), dims.d_model());
        let mem = dims.linear_memory_index();
        let scale = match options.derivative {
            Derivative::FiniteDifference { scale } => scale,
            Derivative::Exact => 1.0,
        };
        let (mem_head, signal_heads) = (mem / hd, d / hd);
        let mut shift_in = DimWiseBuilder::zeros(hs, hd);
        let mut shift_out = DimWiseBuilder::zeros(hs, hd);
        for i in 0..signal_heads {
            shift_in.set_all_coords(i, i, 1.0 / scale);
            shift_in.set_all_coords(i, mem_head + i, 1.0);
            shift_in.set_all_coords(mem_head + i, mem_head + i, 1.0);
            shift_out.set_all_coords(i, i, scale);
            shift_out.set_all_coords(i, mem_head + i, -scale);
        }
        Ok(Self {
            shift_in: shift_in.build(options.float_dtype, device),
            shift_out: shift_out.build(options.float_dtype, device),
            activation: options.activation,
            derivative: options.derivative,
            d_model: d,
            memory_index: mem,
            execution: options.execution,
        })
    }

    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, _ctx: &SimContext<B>) -> Tensor<B, 3> {
        match self.derivative {
            Derivative::FiniteDifference { .. } => {
                // shift_out reads only the signal and memory heads: activate just those.
                // Float64 arithmetic on float32 states (crate::precision).
                let used = self.shift_out.used_blocks();
                in_float64(state, |state| {
                    self.shift_out.forward(activate_blocks(
                        self.activation,
                        self.shift_in.forward(state),
                        &used,
                    ))
                })
            }
            Derivative::Exact => {
                let [_, _, ds] = state.dims();
                let d = self.d_model;
                let dy = state.clone().narrow(2, 0, d);
                let u = state.clone().narrow(2, self.memory_index, d);
                let dx = activate_derivative(self.activation, u) * dy;
                let zeros = state.zeros_like().narrow(2, d, ds - d);
                Tensor::cat(vec![dx, zeros], 2)
            }
        }
    }

    /// The token rows of [`ActivationBackward::forward`] (which transforms every row alike).
    /// With finite differences: `[s act(dy/s + u) - s act(u), 0, …]` on dims `[0, D)`, `u` the
    /// stored pre-activation, computed on those `D` dims only.
    ///
    /// # Shapes
    /// * `tokens`: `[batch_size, T, Ds]` → `[batch_size, T, Ds]`
    pub fn forward_rows(&self, tokens: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let Derivative::FiniteDifference { scale } = self.derivative else {
            return self.forward(tokens, ctx);
        };
        if self.execution == Execution::Constructed {
            return self.forward(tokens, ctx);
        }
        let [_, _, ds] = tokens.dims();
        let d = self.d_model;
        let dy = columns(&tokens, 0, d);
        let u = columns(&tokens, self.memory_index, d);
        // `s act(dy/s + u) - s act(u)` in the cancellation-free form (crate::difference).
        let signal = activation_difference(self.activation, u, dy, scale);
        cat_columns(vec![(Some(signal), d), (None, ds - d)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{context, f64_options, max_abs_diff, random, test_dims, TestBackend};

    /// f64, values O(1): the finite difference `s (act(u + dy/s) - act(u))` loses ~log10(s) digits
    /// of the 1e-16 round-off, so 1e-10 is loose for s = 1000 and tight against construction errors.
    const F64_TOL: f64 = 1e-10;

    #[test]
    fn row_forms_equal_the_full_state_forms() {
        let device = Default::default();
        for kind in [ActivationKind::GeluNew, ActivationKind::Relu] {
            for dims in test_dims() {
                let p = dims.n_prefixes();
                let ctx = context(&dims, 2);
                // Row forms of the structured execution against the constructed execution's
                // full-state forward.
                let options = f64_options().with_activation(kind);
                let structured = options.with_execution(Execution::Structured);
                let state = random([2, dims.n_rows(), dims.d_sim()], 1.0);
                let (prefix, tokens) = (
                    crate::layout::prefix_rows(state.clone(), p),
                    crate::layout::token_rows(state.clone(), p),
                );
                let fwd = ActivationForward::<TestBackend>::new(&dims, &options, &device).unwrap();
                let fast =
                    ActivationForward::<TestBackend>::new(&dims, &structured, &device).unwrap();
                assert!(fast.is_structured() && !fwd.is_structured());
                let rows = fast.forward_rows(prefix.clone(), tokens.clone(), &ctx);
                let full = crate::layout::token_rows(fwd.forward(state.clone(), &ctx), p);
                assert!(max_abs_diff(rows, full) < F64_TOL, "{kind:?} forward");
                // Zero dims [D, memory), as a LinearForward output has them.
                let (d, mem) = (dims.d_model(), dims.linear_memory_index());
                let padded = tokens.clone().slice_assign(
                    [0..2, 0..dims.seq_length(), d..mem],
                    Tensor::zeros([2, dims.seq_length(), mem - d], (&device, tokens.dtype())),
                );
                let rows = fast.forward_rows_zero_padded(prefix.clone(), padded.clone(), &ctx);
                let joined = crate::layout::join_rows(prefix, padded);
                let full = crate::layout::token_rows(fwd.forward(joined, &ctx), p);
                assert!(
                    max_abs_diff(rows, full) < F64_TOL,
                    "{kind:?} zero-padded forward"
                );
                let bwd = ActivationBackward::<TestBackend>::new(&dims, &options, &device).unwrap();
                let fast =
                    ActivationBackward::<TestBackend>::new(&dims, &structured, &device).unwrap();
                let rows = fast.forward_rows(tokens, &ctx);
                let full = crate::layout::token_rows(bwd.forward(state, &ctx), p);
                assert!(max_abs_diff(rows, full) < F64_TOL, "{kind:?} backward");
            }
        }
    }

    #[test]
    fn activation_forward_and_backward_match_the_math() {
        let device = Default::default();
        for kind in [ActivationKind::GeluNew, ActivationKind::Relu] {
            for dims in test_dims() {
                let (d, p, mem, ds) = (
                    dims.d_model(),
                    dims.n_prefixes(),
                    dims.linear_memory_index(),
                    dims.d_sim(),
                );
                let ctx = context(&dims, 2);
                let options = f64_options().with_activation(kind);
                // Forward: token dims [D, mem) are 0 in a LinearForward output; emulate that.
                let state = random([2, dims.n_rows(), ds], 1.0);
                let state = state.clone().slice_assign(
                    [0..2, p..dims.n_rows(), d..ds],
                    Tensor::zeros([2, dims.seq_length(), ds - d], (&device, state.dtype())),
                );
                let fwd = ActivationForward::<TestBackend>::new(&dims, &options, &device).unwrap();
                let out = fwd.forward(state.clone(), &ctx);
                let x = state
                    .clone()
                    .narrow(1, p, dims.seq_length())
                    .narrow(2, 0, d);
                let out_tok = out.clone().narrow(1, p, dims.seq_length());
                assert!(
                    max_abs_diff(out_tok.clone().narrow(2, 0, d), activate(kind, x.clone()))
                        < F64_TOL
                );
                assert_eq!(max_abs_diff(out_tok.clone().narrow(2, mem, d), x), 0.0);
                assert_eq!(out_tok.narrow(2, d, mem - d).abs().max().into_scalar(), 0.0);
                assert_eq!(
                    max_abs_diff(out.narrow(1, 0, p), state.narrow(1, 0, p)),
                    0.0
                );

                // Backward, finite differences and exact.
                let scale = 1000.0;
                let state = random([2, dims.n_rows(), ds], 1.0);
                let dy = state.clone().narrow(2, 0, d);
                let u = state.clone().narrow(2, mem, d);
                for (derivative, expected) in [
                    (
                        Derivative::FiniteDifference { scale },
                        (activate(kind, u.clone() + dy.clone() / scale)
                            - activate(kind, u.clone()))
                            * scale,
                    ),
                    (
                        Derivative::Exact,
                        activate_derivative(kind, u.clone()) * dy.clone(),
                    ),
                ] {
                    let bwd = ActivationBackward::<TestBackend>::new(
                        &dims,
                        &options.with_derivative(derivative),
                        &device,
                    )
                    .unwrap();
                    let out = bwd.forward(state.clone(), &ctx);
                    let err = max_abs_diff(out.clone().narrow(2, 0, d), expected);
                    assert!(err < F64_TOL, "{kind:?} {derivative:?}: {err}");
                    assert_eq!(out.narrow(2, d, ds - d).abs().max().into_scalar(), 0.0);
                }
            }
        }
    }

    #[test]
    fn gelu_derivative_matches_central_difference() {
        let x: Tensor<TestBackend, 1> = random([50], 2.0);
        let h = 1e-5;
        let numeric = (activate(ActivationKind::GeluNew, x.clone() + h)
            - activate(ActivationKind::GeluNew, x.clone() - h))
            / (2.0 * h);
        // Central difference error O(h²) ≈ 1e-10 plus round-off 1e-16/h ≈ 1e-11.
        assert!(max_abs_diff(numeric, activate_derivative(ActivationKind::GeluNew, x)) < 1e-8);
    }
}
