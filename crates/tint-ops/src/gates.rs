//! Gates (docs/construction.md §3.3): mix a module's input and output row by row, by position class.

use burn::{
    module::{Module, Param},
    tensor::{backend::Backend, Tensor},
};

use crate::{
    context::SimContext,
    dims::TintDims,
    host::tensor_from_f64,
    options::{Execution, GateMode, TintOptions},
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
/// [`Execution::Constructed`] evaluates the stored gate weights: `tanh(logit)` in
/// [`GateMode::Tanh`], its hard limit `[logit > 0]` in [`GateMode::Exact`]. [`Execution::Structured`]
/// with [`GateMode::Exact`] applies the 0/1 selection the stored weights represent (prefix rows /
/// token rows, `tests::exact_gate_forms_agree`).
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
    /// Constructed (stored weights) or structured (row selection, exact mode only).
    #[module(skip)]
    pub execution: Execution,
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
            execution: options.execution,
        }
    }

    /// Whether the gate is applied as a 0/1 row selection (exact gates, structured execution).
    pub fn is_selection(&self) -> bool {
        self.mode == GateMode::Exact && self.execution == Execution::Structured
    }

    /// The gate values of every row from the stored weights: `tanh(u · pos + c)` or, for exact
    /// gates, `[u · pos + c > 0]`, read back as one value per row (`P + T` values).
    fn gate_values(
        &self,
        weight: &Param<Tensor<B, 2>>,
        bias: &Param<Tensor<B, 1>>,
        ctx: &SimContext<B>,
    ) -> Vec<f64> {
        // One-hot position · u = row gather of u.
        let logit = weight.val().select(0, ctx.position_index.clone()) + bias.val().unsqueeze();
        let gate = match self.mode {
            GateMode::Tanh => logit.tanh(),
            GateMode::Exact => {
                let dtype = logit.dtype();
                logit.greater_elem(0.0).float().cast(dtype)
            }
        };
        gate.into_data()
            .convert::<f64>()
            .to_vec::<f64>()
            .expect("gate values convert to f64")
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
        if self.is_selection() {
            let [_, n_rows, _] = input.dims();
            let prefix_in = input.narrow(1, 0, p);
            let prefix = match self.kind {
                GateKind::ForwardBackward => prefix_in,
                GateKind::Descent => prefix_in + module_out.clone().narrow(1, 0, p),
            };
            return Tensor::cat(vec![prefix, module_out.narrow(1, p, n_rows - p)], 1);
        }
        let old = self.gate_values(&self.old_weight, &self.old_bias, ctx);
        let new = self.gate_values(&self.new_weight, &self.new_bias, ctx);
        let [_, n_rows, _] = input.dims();
        mix_rows(
            input,
            |start, len| Some(module_out.clone().narrow(1, start, len)),
            n_rows,
            &old,
            &new,
        )
    }

    /// [`Gates::forward`] with the module output given as prefix rows and token rows (`None`: zero
    /// rows); as a row selection the zero rows are never built and the state is copied once.
    ///
    /// # Shapes
    /// * `input`: `[batch_size, P + T, d_sim]`, `prefix_out`: `[batch_size, P, d_sim]`,
    ///   `tokens_out`: `[batch_size, T, d_sim]` → `[batch_size, P + T, d_sim]`
    pub fn combine(
        &self,
        input: Tensor<B, 3>,
        prefix_out: Option<Tensor<B, 3>>,
        tokens_out: Option<Tensor<B, 3>>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let p = ctx.n_prefixes;
        let [batch_size, n_rows, d_sim] = input.dims();
        let (device, dtype) = (input.device(), input.dtype());
        let zeros = |rows: usize| Tensor::zeros([batch_size, rows, d_sim], (&device, dtype));
        if self.is_selection() {
            let prefix_in = input.narrow(1, 0, p);
            let prefix = match (self.kind, prefix_out) {
                // Contiguous operands: a row range of the state is a strided view that flex would
                // add element by element (14 % of a structured LLaMA step before).
                (GateKind::Descent, Some(update)) => {
                    crate::layout::contiguous(prefix_in) + crate::layout::contiguous(update)
                }
                _ => prefix_in,
            };
            let tokens = tokens_out.unwrap_or_else(|| zeros(n_rows - p));
            return Tensor::cat(vec![prefix, tokens], 1);
        }
        // The gated mix reads the module output per run of rows: the prefix and token parts are
        // used as they are (`None`: zero rows, dropped from the sum) instead of being joined into
        // one `[P + T]` tensor first.
        let old = self.gate_values(&self.old_weight, &self.old_bias, ctx);
        let new = self.gate_values(&self.new_weight, &self.new_bias, ctx);
        mix_rows(
            input,
            |start, len| {
                if start >= p {
                    tokens_out
                        .as_ref()
                        .map(|t| t.clone().narrow(1, start - p, len))
                } else {
                    prefix_out.as_ref().map(|t| t.clone().narrow(1, start, len))
                }
            },
            p,
            &old,
            &new,
        )
    }
}

impl<B: Backend> Gates<B> {
    /// The token rows of [`Gates::combine`]`(state, None, Some(tokens_out))` for a state whose
    /// token rows are `input_tokens`, without building the state: the gate is row-local, so its
    /// token rows are computed alone, by the same operations (where every token row keeps the
    /// module output, `tokens_out` itself). A forward-type module that returns only token rows
    /// (`forward_rows`) so skips the copy of the whole state that joins its prefix and token rows.
    ///
    /// # Shapes
    /// * `input_tokens`, `tokens_out`: `[batch_size, T, d_sim]` → `[batch_size, T, d_sim]`
    pub fn combine_tokens(
        &self,
        input_tokens: Tensor<B, 3>,
        tokens_out: Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let p = ctx.n_prefixes;
        let [_, n_tokens, _] = input_tokens.dims();
        if self.is_selection() {
            return tokens_out;
        }
        let old = self.gate_values(&self.old_weight, &self.old_bias, ctx);
        let new = self.gate_values(&self.new_weight, &self.new_bias, ctx);
        mix_rows(
            input_tokens,
            |start, len| Some(tokens_out.clone().narrow(1, start, len)),
            n_tokens,
            &old[p..],
            &new[p..],
        )
    }
}

/// `old[r] · input[r] + new[r] · module_out[r]` for every row `r`, applied per run of rows with the
/// same pair of gate values (one run per position class for the constructed gates): a value of 1
/// is a copy, 0 drops the operand, any other value a scalar multiply. The result is the same as the
/// elementwise product with the per-row gates; flex walks a broadcast `[B, N, 1]` operand element by
/// element, which this avoids. `module_rows(start, len)` gives rows `start..start + len` of the
/// module output (`None`: zero rows); runs are also cut at row `split` (where the module output
/// changes from one tensor to another, [`Gates::combine`]).
///
/// # Shapes
/// * `input`: `[batch_size, N, d_sim]`, `module_rows(start, len)`: `[batch_size, len, d_sim]`,
///   `old`, `new`: `N` values → `[batch_size, N, d_sim]`
fn mix_rows<B: Backend>(
    input: Tensor<B, 3>,
    module_rows: impl Fn(usize, usize) -> Option<Tensor<B, 3>>,
    split: usize,
    old: &[f64],
    new: &[f64],
) -> Tensor<B, 3> {
    let [batch_size, n_rows, d_sim] = input.dims();
    let mut parts = Vec::new();
    let mut start = 0;
    while start < n_rows {
        let key = (old[start], new[start]);
        let mut end = start + 1;
        while end < n_rows && end != split && (old[end], new[end]) == key {
            end += 1;
        }
        let len = end - start;
        // A row range of a batched state is a strided view for flex (even at batch size 1: the
        // batch stride spans all `N` rows), on which `+` and `mul_scalar` walk element by element:
        // operands of arithmetic are copied to contiguous rows first (one memcpy per batch entry).
        let input_term = (key.0 != 0.0).then(|| (input.clone().narrow(1, start, len), key.0));
        let module_term = if key.1 != 0.0 {
            module_rows(start, len).map(|rows| (rows, key.1))
        } else {
            None
        };
        let scaled = |rows: Tensor<B, 3>, g: f64| {
            if g == 1.0 {
                rows
            } else {
                crate::layout::contiguous(rows).mul_scalar(g)
            }
        };
        parts.push(match (input_term, module_term) {
            (Some((a, ga)), Some((b, gb))) => {
                scaled(crate::layout::contiguous(a), ga) + scaled(crate::layout::contiguous(b), gb)
            }
            (Some((a, g)), None) | (None, Some((a, g))) => scaled(a, g),
            (None, None) => {
                Tensor::zeros([batch_size, len, d_sim], (&input.device(), input.dtype()))
            }
        });
        start = end;
    }
    if parts.len() == 1 {
        return parts.pop().expect("one part");
    }
    Tensor::cat(parts, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        linear::LinearForward,
        testing::{context_in, options_in, random, rounded, test_dims, TestBackend},
    };
    use burn::tensor::DType;

    const BATCH: usize = 2;
    /// The default gate logit scale `g10`.
    const GATE_SCALE: f64 = 10.0;
    /// Round-off of `exact - tanh_form` against its prediction `(1 - tanh(10)) · exact`, relative to
    /// the largest `|exact|`: both sides are one or two f64 products/sums (a few ulp, ~1e-16); 1e-14
    /// is far below the effect being measured (`1 - tanh(10) ≈ 4.1e-9`).
    const F64_ROUND_OFF: f64 = 1e-14;

    fn all_bits(x: Tensor<TestBackend, 3>) -> Vec<u32> {
        x.into_data()
            .to_vec::<f32>()
            .expect("f32 tensor")
            .into_iter()
            .map(f32::to_bits)
            .collect()
    }

    fn max_abs(x: Tensor<TestBackend, 3>) -> f64 {
        x.abs().max().into_scalar().elem()
    }

    use burn::tensor::ElementConversion;

    /// `(input, module_out)` rounded to `dtype`, random everywhere (prefix and token rows).
    fn gate_inputs(
        dims: &TintDims,
        dtype: DType,
    ) -> (Tensor<TestBackend, 3>, Tensor<TestBackend, 3>) {
        let shape = [BATCH, dims.n_rows(), dims.d_sim()];
        (
            rounded(random(shape, 1.0), dtype),
            rounded(random(shape, 1.0), dtype),
        )
    }

    /// `combine_tokens` gives the token rows of `combine` bit for bit: exact gates in both
    /// executions and tanh gates (values `1 - 4.1e-9`, `4.1e-9`: products and sums) in f64 and
    /// f32, for every test shape.
    #[test]
    fn combine_tokens_equals_the_token_rows_of_combine() {
        let device = Default::default();
        for dims in test_dims() {
            for dtype in [DType::F32, DType::F64] {
                let ctx = context_in(&dims, BATCH, dtype);
                let exact = options_in(dtype).with_gate_scale(GATE_SCALE);
                for options in [
                    exact,
                    exact.with_gate_mode(GateMode::Tanh),
                    exact.with_execution(crate::Execution::Structured),
                ] {
                    let gates = Gates::<TestBackend>::new(
                        GateKind::ForwardBackward,
                        &dims,
                        &options,
                        &device,
                    );
                    let (state, out) = gate_inputs(&dims, dtype);
                    let (state, out) = (state.cast(dtype), out.cast(dtype));
                    let p = ctx.n_prefixes;
                    let tokens_out = crate::layout::token_rows(out, p);
                    let whole = gates.combine(state.clone(), None, Some(tokens_out.clone()), &ctx);
                    let tokens = crate::layout::token_rows(state, p);
                    let alone = gates.combine_tokens(tokens, tokens_out, &ctx);
                    assert_eq!(
                        crate::testing::element_bits(crate::layout::token_rows(whole, p)),
                        crate::testing::element_bits(alone),
                        "{dtype:?} {options:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn tanh_gates_equal_exact_gates_bit_for_bit_in_f32() {
        // The premise: tanh(10) rounds to exactly 1 in f32 (1 - tanh(10) ≈ 4.1e-9 < half an ulp
        // below 1, 3e-8), both on the host and in the backend's tensor tanh.
        assert_eq!((GATE_SCALE as f32).tanh(), 1.0);
        let device = Default::default();
        let ten =
            Tensor::<TestBackend, 1>::from_floats([GATE_SCALE as f32, -GATE_SCALE as f32], &device);
        assert_eq!(
            ten.tanh().into_data().to_vec::<f32>().unwrap(),
            vec![1.0, -1.0]
        );
        for dims in test_dims() {
            let ctx = context_in(&dims, BATCH, DType::F32);
            let exact = options_in(DType::F32).with_gate_scale(GATE_SCALE);
            let tanh = exact.with_gate_mode(GateMode::Tanh);
            for kind in [GateKind::ForwardBackward, GateKind::Descent] {
                let (input, module_out) = gate_inputs(&dims, DType::F32);
                let (input, module_out) = (input.cast(DType::F32), module_out.cast(DType::F32));
                let run = |options: &TintOptions| {
                    Gates::<TestBackend>::new(kind, &dims, options, &device).forward(
                        input.clone(),
                        module_out.clone(),
                        &ctx,
                    )
                };
                assert_eq!(all_bits(run(&tanh)), all_bits(run(&exact)), "{kind:?}");
            }
            // A whole module whose only tanh use is the Gates: LinearForward. (The LayerNorm
            // modules also use `TintOptions::gate_on_value`, computed in f64 as 1 - 4.1e-9, in their
            // group-norm; in f32 that moves a few elements by 1 ulp, so they are not bit-exact.)
            let state = gate_inputs(&dims, DType::F32).0.cast(DType::F32);
            let mem = Some(dims.linear_memory_index());
            let run = |options: &TintOptions| {
                LinearForward::<TestBackend>::new(&dims, mem, options, &device)
                    .unwrap()
                    .forward(state.clone(), &ctx)
            };
            assert_eq!(all_bits(run(&tanh)), all_bits(run(&exact)), "LinearForward");
        }
    }

    #[test]
    fn tanh_gates_in_f64_differ_from_exact_gates_by_one_minus_tanh_10() {
        // In f64, tanh(10) = 1 - 4.12e-9: every "on" gate scales its operand by tanh(10) and every
        // "off" gate is tanh(0) = 0 exactly, so exact - tanh_form = (1 - tanh(10)) · exact.
        let deficit = 1.0 - GATE_SCALE.tanh();
        assert!(
            (4.0e-9..4.3e-9).contains(&deficit),
            "1 - tanh(10) = {deficit}"
        );
        let device = Default::default();
        for dims in test_dims() {
            let ctx = context_in(&dims, BATCH, DType::F64);
            let exact = options_in(DType::F64).with_gate_scale(GATE_SCALE);
            let tanh = exact.with_gate_mode(GateMode::Tanh);
            for kind in [GateKind::ForwardBackward, GateKind::Descent] {
                let (input, module_out) = gate_inputs(&dims, DType::F64);
                let run = |options: &TintOptions| {
                    Gates::<TestBackend>::new(kind, &dims, options, &device).forward(
                        input.clone(),
                        module_out.clone(),
                        &ctx,
                    )
                };
                let (exact_out, tanh_out) = (run(&exact), run(&tanh));
                let magnitude = max_abs(exact_out.clone());
                let difference = exact_out.clone() - tanh_out;
                let largest = max_abs(difference.clone());
                // The gap is there (the tanh form is really evaluated) and has the predicted size.
                assert!(
                    largest > 0.5 * deficit * magnitude && largest <= deficit * magnitude * 1.01,
                    "{kind:?}: max |exact - tanh| = {largest:e}, (1 - tanh 10) max |exact| = {:e}",
                    deficit * magnitude
                );
                let residual = max_abs(difference - exact_out * deficit);
                assert!(
                    residual < F64_ROUND_OFF * magnitude,
                    "{kind:?}: |(exact - tanh) - (1 - tanh 10) exact| = {residual:e}"
                );
            }
        }
    }
}
