//! The linear modules of docs/construction.md §6.1–6.4: a `D x D` map `y = W x + b` whose `W, b` live in the
//! prefix rows (§2.5), simulated with linear attention over heads of size `P`
//! (`nl = Ds/P` heads: `U = S·S` weight heads, `E = S` bias heads).
//!
//! All four modules compute token queries × prefix keys (or prefix queries × token keys) only; the
//! official `restrict_prefixes=False` path gives the same result (the extra score terms multiply
//! all-zero values, §5.3), so it is not implemented separately.

use burn::{
    module::Module,
    tensor::{backend::Backend, Tensor},
};

use crate::{
    attention::{
        AttentionMasks, AttentionRows, ContentProjection, PositionProjectionBuilder, Qkv, Scoring,
        TintAttention,
    },
    context::SimContext,
    dims::TintDims,
    error::TintOpsError,
    gates::{GateKind, Gates},
    hsplit::{DimWise, DimWiseBuilder, SplitWise, SplitWiseBuilder},
    layout::cat_columns,
    options::{Execution, TintOptions},
};

/// Checks that `[memory_index, memory_index + width)` fits in `Ds` and is aligned to `head_size`.
pub(crate) fn check_memory_index(
    memory_index: usize,
    width: usize,
    head_size: usize,
    dims: &TintDims,
) -> Result<(), TintOpsError> {
    if memory_index + width > dims.d_sim() || !memory_index.is_multiple_of(head_size) {
        return Err(TintOpsError::BadMemoryIndex {
            memory_index,
            width,
            d_sim: dims.d_sim(),
            head_size,
        });
    }
    Ok(())
}

/// `W` (out x in, `[batch_size, D, D]`) and prefix 0's bias (`[batch_size, 1, D]`) as prefix rows
/// hold them (§2.5: prefix `p`, slot `k` = row `p S + k` of `W`; bias in slot `S`). This is what
/// the linear modules' prefix keys / values read: their structured evaluation
/// ([`LinearForward::execution`]) multiplies by it directly.
///
/// # Shapes
/// * `prefix`: `[batch_size, P, Ds]` → (`[batch_size, D, D]`, `[batch_size, 1, D]`)
pub(crate) fn prefix_weight_and_bias<B: Backend>(
    prefix: &Tensor<B, 3>,
    d_model: usize,
) -> (Tensor<B, 3>, Tensor<B, 3>) {
    let [batch_size, n_prefixes, _] = prefix.dims();
    let stack = d_model / n_prefixes;
    let weight = crate::layout::contiguous(prefix.clone().narrow(2, 0, stack * d_model))
        .reshape([batch_size, d_model, d_model]);
    let bias = prefix
        .clone()
        .narrow(1, 0, 1)
        .narrow(2, stack * d_model, d_model);
    (weight, bias)
}

/// A contiguous copy of dims `[from, from + width)` of token rows (for elementwise ops: flex walks
/// a strided operand element by element). Copied as one 2-d `[batch_size T, width]` block.
///
/// # Shapes
/// * `tokens`: `[batch_size, T, Ds]` → `[batch_size, T, width]`
pub(crate) fn columns<B: Backend>(
    tokens: &Tensor<B, 3>,
    from: usize,
    width: usize,
) -> Tensor<B, 3> {
    let [batch_size, t, ds] = tokens.dims();
    let flat = tokens
        .clone()
        .reshape([batch_size * t, ds])
        .narrow(1, from, width);
    flat.clone()
        .reshape(flat.dims())
        .reshape([batch_size, t, width])
}

/// Dims `[from, from + width)` of token rows as a view (matmul and cat read strided operands
/// directly).
///
/// # Shapes
/// * `tokens`: `[batch_size, T, Ds]` → `[batch_size, T, width]`
pub(crate) fn column_view<B: Backend>(
    tokens: &Tensor<B, 3>,
    from: usize,
    width: usize,
) -> Tensor<B, 3> {
    tokens.clone().narrow(2, from, width)
}

/// The prefix rows and token rows of a state (views).
fn split_rows<B: Backend>(state: &Tensor<B, 3>, n_prefixes: usize) -> (Tensor<B, 3>, Tensor<B, 3>) {
    (
        crate::layout::prefix_rows(state.clone(), n_prefixes),
        crate::layout::token_rows(state.clone(), n_prefixes),
    )
}

/// Query scatter used by LinearBackward (query) and LinearDescent (key): a dimension-wise op over
/// blocks of `D` replicating `dy = [0, D)` into every block, then a split-wise op so that head
/// `s*S + j`, coordinate `p` holds `dy[p*S + s]` (blocks `>= S` zero).
fn gradient_scatter<B: Backend>(
    dims: &TintDims,
    options: &TintOptions,
    device: &B::Device,
) -> ContentProjection<B> {
    let (d, p, s, ds) = (
        dims.d_model(),
        dims.n_prefixes(),
        dims.stack(),
        dims.d_sim(),
    );
    let n_blocks = ds / d;
    let mut replicate = DimWiseBuilder::zeros(n_blocks, d);
    for block in 0..n_blocks {
        replicate.set_all_coords(block, 0, 1.0);
    }
    let mut scatter = SplitWiseBuilder::zeros(n_blocks, d);
    for slot in 0..s {
        for j in 0..s {
            for prefix in 0..p {
                scatter.set(slot, j * p + prefix, prefix * s + slot, 1.0);
            }
        }
    }
    ContentProjection::new(replicate, scatter, options.float_dtype, device)
}

/// Position projection of the linear modules (`Pd x 3P`, `λ` over `nl` heads).
fn linear_positions(dims: &TintDims) -> PositionProjectionBuilder {
    PositionProjectionBuilder::zeros(
        dims.position_dim(),
        dims.n_prefixes(),
        dims.n_linear_heads(),
    )
}

/// LinearForward (§6.1): token rows `y = W x + b` in dims `[0, D)`, the input `x` copied to
/// `[mem, mem + D)`, prefix rows unchanged.
#[derive(Module, Debug)]
pub struct LinearForward<B: Backend> {
    /// Linear attention over `nl` heads of size `P` (weight heads + bias heads).
    pub attention: TintAttention<B>,
    /// `permutation_conv`: split-wise over blocks of `D`, un-interleaves `W x`, keeps the bias block.
    pub permutation: SplitWise<B>,
    /// `bias_add_conv`: dimension-wise over blocks of `D`, block 0 ← block 0 + block 1.
    pub bias_add: DimWise<B>,
    /// Forward gate.
    pub gates: Gates<B>,
    /// `D`.
    pub d_model: usize,
    /// Where the input is stored (`None` = not stored).
    pub memory_index: Option<usize>,
    /// [`Execution::Structured`]: evaluate with the structure of the constructed weights: the
    /// weight heads' keys are the prefix rows' weight rows and their values one-hot prefix
    /// positions, `c_proj` sums the `S` partial products of each output row, the bias heads select
    /// prefix 0's bias chunk, so the token rows are `W x + b` with `(W, b)` read from the prefix
    /// rows: one `[T, D] x [D, D]` matmul. [`Execution::Constructed`]: run the attention as stored.
    #[module(skip)]
    pub execution: Execution,
}

impl<B: Backend> LinearForward<B> {
    /// Whether [`Execution::Structured`] is selected.
    pub fn is_structured(&self) -> bool {
        self.execution == Execution::Structured
    }

    /// Constructs the module.
    ///
    /// # Errors
    /// [`TintOpsError::BadMemoryIndex`] if the memory does not fit or is not a multiple of `P`;
    /// invalid options.
    pub fn new(
        dims: &TintDims,
        memory_index: Option<usize>,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        options.validate()?;
        let (d, p, s, ds) = (
            dims.d_model(),
            dims.n_prefixes(),
            dims.stack(),
            dims.d_sim(),
        );
        if let Some(mem) = memory_index {
            check_memory_index(mem, d, p, dims)?;
        }
        let nl = dims.n_linear_heads();
        let weight_heads = s * s;
        let dtype = options.float_dtype;
        // Query: input block j copied into heads s*S + j.
        let mut query_heads = DimWiseBuilder::zeros(nl, p);
        for slot in 0..s {
            for j in 0..s {
                query_heads.set_all_coords(slot * s + j, j, 1.0);
            }
        }
        let query = ContentProjection::new(
            query_heads,
            SplitWiseBuilder::identity(nl, p),
            dtype,
            device,
        );
        // Key: the stacked weight rows (heads < U) of the prefix rows.
        let mut key_split = SplitWiseBuilder::identity(nl, p);
        // Value: the bias chunks (heads U..U+S) of the prefix rows.
        let mut value_split = SplitWiseBuilder::identity(nl, p);
        for head in 0..nl {
            if head >= weight_heads {
                key_split.zero_block(head);
            }
            if !(weight_heads..weight_heads + s).contains(&head) {
                value_split.zero_block(head);
            }
        }
        let key = ContentProjection::new(DimWiseBuilder::identity(nl, p), key_split, dtype, device);
        let value =
            ContentProjection::new(DimWiseBuilder::identity(nl, p), value_split, dtype, device);
        let mut positions = linear_positions(dims);
        let tmax = dims.max_seq_length();
        for t in 0..tmax {
            positions.set(Qkv::Query, t, 0, 1.0);
        }
        for prefix in 0..p {
            positions.set(Qkv::Key, tmax + prefix, prefix, 1.0);
            positions.set(Qkv::Value, tmax + prefix, prefix, 1.0);
        }
        for head in 0..nl {
            if head < weight_heads {
                positions.set_lambda(Qkv::Value, head, 1.0);
            } else if head < weight_heads + s {
                positions.set_lambda(Qkv::Query, head, 1.0);
                positions.set_lambda(Qkv::Key, head, 1.0);
            }
        }
        // c_proj: out head s = Σ_j head (s*S + j); out head S + e = bias head U + e.
        let mut c_proj = DimWiseBuilder::zeros(nl, p);
        for slot in 0..s {
            for j in 0..s {
                c_proj.set_all_coords(slot, slot * s + j, 1.0);
            }
            c_proj.set_all_coords(s + slot, weight_heads + slot, 1.0);
        }
        let attention = TintAttention {
            query,
            key,
            value,
            positions: positions.build(dtype, device),
            c_proj: c_proj.build(dtype, device),
            n_heads: nl,
            scoring: Scoring::Linear,
            causal_masks: Default::default(),
        };
        let n_blocks = ds / d;
        let mut permutation = SplitWiseBuilder::identity(n_blocks, d);
        permutation.zero_block(0);
        for i in 0..d {
            permutation.set(0, i, (i % s) * p + i / s, 1.0);
        }
        for block in 2..n_blocks {
            permutation.zero_block(block);
        }
        let mut bias_add = DimWiseBuilder::zeros(n_blocks, d);
        bias_add.set_all_coords(0, 0, 1.0);
        bias_add.set_all_coords(0, 1, 1.0);
        Ok(Self {
            attention,
            permutation: permutation.build(dtype, device),
            bias_add: bias_add.build(dtype, device),
            gates: Gates::new(GateKind::ForwardBackward, dims, options, device),
            d_model: d,
            memory_index,
            execution: options.execution,
        })
    }

    /// Token rows: `[W x + b, 0, …, x at memory]` with `(W, b)` read from the prefix rows.
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let tokens = self.forward_tokens(state.clone(), ctx, false);
        self.gate(state, tokens, ctx)
    }

    /// [`LinearForward::forward`] with every H-split op run as a dense matmul (no structure shortcuts).
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward_dense(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let tokens = self.forward_tokens(state.clone(), ctx, true);
        self.gate(state, tokens, ctx)
    }

    fn gate(&self, state: Tensor<B, 3>, tokens: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        self.gates.combine(state, None, Some(tokens), ctx)
    }

    /// The token-row output before the gate.
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, T, Ds]`
    pub fn forward_tokens(
        &self,
        state: Tensor<B, 3>,
        ctx: &SimContext<B>,
        dense: bool,
    ) -> Tensor<B, 3> {
        if self.is_structured() && !dense {
            let (prefix, tokens) = split_rows(&state, ctx.n_prefixes);
            return self.structured_rows(&prefix, &tokens);
        }
        let [_, n_rows, _] = state.dims();
        let p = ctx.n_prefixes;
        let rows = AttentionRows {
            queries: p..n_rows,
            keys: 0..p,
        };
        let heads = if dense {
            self.attention.forward_dense(
                state.clone(),
                ctx.position_index.clone(),
                rows,
                AttentionMasks::none(),
            )
        } else {
            self.attention.forward(
                state.clone(),
                ctx.position_index.clone(),
                rows,
                AttentionMasks::none(),
            )
        }; // [batch_size, T, Ds]
        let y = if dense {
            self.bias_add
                .forward_dense(self.permutation.forward_dense(heads))
        } else {
            self.bias_add.forward(self.permutation.forward(heads))
        };
        match self.memory_index {
            Some(mem) => {
                let [batch_size, t, _] = y.dims();
                let x = state.narrow(1, p, t).narrow(2, 0, self.d_model);
                y.slice_assign([0..batch_size, 0..t, mem..mem + self.d_model], x)
            }
            None => y,
        }
    }

    /// The token rows of [`LinearForward::forward`] on the state `[prefix; tokens]`, without
    /// building it (the simulator keeps token rows and prefix blocks apart).
    ///
    /// # Shapes
    /// * `prefix`: `[batch_size, P, Ds]`, `tokens`: `[batch_size, T, Ds]` → `[batch_size, T, Ds]`
    pub fn forward_rows(
        &self,
        prefix: Tensor<B, 3>,
        tokens: Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        if self.is_structured() && self.gates.is_selection() {
            return self.structured_rows(&prefix, &tokens);
        }
        // The gate's token rows alone (Gates::combine_tokens): the same values as the token rows
        // of `forward`, without joining the gated prefix and token rows.
        let state = crate::layout::join_rows(prefix, tokens.clone());
        let out = self.forward_tokens(state, ctx, false);
        self.gates.combine_tokens(tokens, out, ctx)
    }

    /// [`LinearForward::forward_tokens`] through the structure of the constructed weights (see
    /// [`LinearForward::execution`]).
    pub(crate) fn structured_rows(
        &self,
        prefix: &Tensor<B, 3>,
        tokens: &Tensor<B, 3>,
    ) -> Tensor<B, 3> {
        let x = column_view(tokens, 0, self.d_model);
        self.structured_rows_of(prefix, x, tokens.dims()[2])
    }

    /// `W x + b` for token inputs `x` (`[batch_size, T, D]`) with `(W, b)` read from `prefix`.
    pub(crate) fn structured_product(
        &self,
        prefix: &Tensor<B, 3>,
        x: Tensor<B, 3>,
    ) -> Tensor<B, 3> {
        let (weight, bias) = prefix_weight_and_bias(prefix, self.d_model);
        let [batch_size, t, _] = x.dims();
        let product = x.matmul(weight.swap_dims(1, 2));
        if batch_size == 1 && product.dtype() == burn::tensor::DType::F32 {
            // A `[1, 1, D]` row broadcast over `T` rows is flex's vectorised shared-row add (f32,
            // batch size 1): the same sums without materialising the repeated bias (issue 17).
            return product + bias;
        }
        product + crate::layout::repeat_rows(bias, t)
    }

    /// The structured token rows for the input `x` (token dims `[0, D)`, contiguous) and width `Ds`.
    pub(crate) fn structured_rows_of(
        &self,
        prefix: &Tensor<B, 3>,
        x: Tensor<B, 3>,
        ds: usize,
    ) -> Tensor<B, 3> {
        let d = self.d_model;
        let y = self.structured_product(prefix, x.clone());
        match self.memory_index {
            Some(mem) if mem >= d => cat_columns(vec![
                (Some(y), d),
                (None, mem - d),
                (Some(x), d),
                (None, ds - mem - d),
            ]),
            Some(mem) => {
                let [batch_size, t, _] = y.dims();
                cat_columns(vec![(Some(y), d), (None, ds - d)])
                    .slice_assign([0..batch_size, 0..t, mem..mem + d], x)
            }
            None => cat_columns(vec![(Some(y), d), (None, ds - d)]),
        }
    }
}

/// LinearBackward (§6.2): token rows `Wᵀ dy` in dims `[0, D)` (`dy` = dims `[0, D)` of the input),
/// dims `[mem, Ds)` passed through, rest 0; prefix rows unchanged.
#[derive(Module, Debug)]
pub struct LinearBackward<B: Backend> {
    /// Linear attention: query = scattered `dy`, key = prefix position, value = prefix rows.
    pub attention: TintAttention<B>,
    /// Forward/backward gate.
    pub gates: Gates<B>,
    /// Token dims from here on are passed through (`None`: nothing passes).
    pub memory_index: Option<usize>,
    /// `D`.
    pub d_model: usize,
    /// [`Execution::Structured`]: evaluate with the structure of the constructed weights:
    /// head `(s, j)` scores prefix `p` with `dy[p S + s]` and reads slot `s`, chunk `j` of its row,
    /// `c_proj` sums over `s`: the token rows are `Wᵀ dy`, one `[T, D] x [D, D]` matmul with `W`
    /// read from the prefix rows. [`Execution::Constructed`]: run the attention as stored.
    #[module(skip)]
    pub execution: Execution,
}

impl<B: Backend> LinearBackward<B> {
    /// Whether [`Execution::Structured`] is selected.
    pub fn is_structured(&self) -> bool {
        self.execution == Execution::Structured
    }

    /// Constructs the module.
    ///
    /// # Errors
    /// [`TintOpsError::BadMemoryIndex`]; invalid options.
    pub fn new(
        dims: &TintDims,
        memory_index: Option<usize>,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        options.validate()?;
        let (d, p, s) = (dims.d_model(), dims.n_prefixes(), dims.stack());
        if let Some(mem) = memory_index {
            check_memory_index(mem, 0, p, dims)?;
            if mem < d {
                return Err(TintOpsError::BadMemoryIndex {
                    memory_index: mem,
                    width: 0,
                    d_sim: dims.d_sim(),
                    head_size: p,
                });
            }
        }
        let nl = dims.n_linear_heads();
        let dtype = options.float_dtype;
        let mut positions = linear_positions(dims);
        for prefix in 0..p {
            positions.set(Qkv::Key, dims.max_seq_length() + prefix, prefix, 1.0);
        }
        for head in 0..nl {
            positions.set_lambda(Qkv::Key, head, 1.0);
        }
        // c_proj: out head j = Σ_s head (s*S + j).
        let mut c_proj = DimWiseBuilder::zeros(nl, p);
        for slot in 0..s {
            for j in 0..s {
                c_proj.set_all_coords(j, slot * s + j, 1.0);
            }
        }
        let attention = TintAttention {
            query: gradient_scatter(dims, options, device),
            key: ContentProjection::zeros(dims.d_sim(), p, dtype, device),
            value: ContentProjection::identity(dims.d_sim(), p, dtype, device),
            positions: positions.build(dtype, device),
            c_proj: c_proj.build(dtype, device),
            n_heads: nl,
            scoring: Scoring::Linear,
            causal_masks: Default::default(),
        };
        Ok(Self {
            attention,
            gates: Gates::new(GateKind::ForwardBackward, dims, options, device),
            memory_index,
            d_model: d,
            execution: options.execution,
        })
    }

    /// Token rows `[Wᵀ dy, 0, …, input memory]`.
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let tokens = self.forward_tokens(state.clone(), ctx);
        self.gates.combine(state, None, Some(tokens), ctx)
    }

    /// The token-row output before the gate.
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, T, Ds]`
    pub fn forward_tokens(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let [batch_size, n_rows, ds] = state.dims();
        let p = ctx.n_prefixes;
        if self.is_structured() {
            let (prefix, tokens) = split_rows(&state, p);
            return self.structured_rows(&prefix, &tokens);
        }
        let rows = AttentionRows {
            queries: p..n_rows,
            keys: 0..p,
        };
        let out = self.attention.forward(
            state.clone(),
            ctx.position_index.clone(),
            rows,
            AttentionMasks::none(),
        );
        match self.memory_index {
            Some(mem) => out.slice_assign(
                [0..batch_size, 0..n_rows - p, mem..ds],
                state.narrow(1, p, n_rows - p).narrow(2, mem, ds - mem),
            ),
            None => out,
        }
    }

    /// [`LinearBackward::forward_tokens`] through the structure of the constructed weights (see
    /// [`LinearBackward::execution`]).
    pub(crate) fn structured_rows(
        &self,
        prefix: &Tensor<B, 3>,
        tokens: &Tensor<B, 3>,
    ) -> Tensor<B, 3> {
        let d = self.d_model;
        let [_, _, ds] = tokens.dims();
        let (weight, _) = prefix_weight_and_bias(prefix, d);
        let dx = column_view(tokens, 0, d).matmul(weight);
        match self.memory_index {
            Some(mem) => cat_columns(vec![
                (Some(dx), d),
                (None, mem - d),
                (Some(column_view(tokens, mem, ds - mem)), ds - mem),
            ]),
            None => cat_columns(vec![(Some(dx), d), (None, ds - d)]),
        }
    }
}

/// Which parameters a descent step moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescentUpdate {
    /// `W ← W - η Σ dy xᵀ` and `b ← b - η Σ dy` (§6.3).
    WeightAndBias,
    /// Only `b ← b - η Σ dy`: the weight update is zero (the LayerNorm descent, §6.7, which
    /// freezes `gamma`).
    BiasOnly,
}

/// LinearDescent (§6.3): prefix rows `W ← W - η Σ_{t train} dy_t x_tᵀ`, `b ← b - η Σ_{t train} dy_t`
/// (prefix 0's bias copy), with `dy_t` = token dims `[0, D)` and `x_t` = token dims `[mem, mem + D)`.
/// Token rows are 0 (the official module leaves garbage there, discarded by §6.4).
#[derive(Module, Debug)]
pub struct LinearDescent<B: Backend> {
    /// Linear attention: prefix queries (position), token keys (scattered `dy`), values `-η x`, `-η dy`.
    pub attention: TintAttention<B>,
    /// Descent gate.
    pub gates: Gates<B>,
    /// `D`.
    pub d_model: usize,
    /// Where `x` is read (token dims `[memory_index, memory_index + D)`).
    pub memory_index: usize,
    /// `η`.
    pub inner_lr: f64,
    /// Which parameters move ([`DescentUpdate::BiasOnly`] for the LayerNorm descent).
    #[module(skip)]
    pub update: DescentUpdate,
    /// The bias takes the step `-η · bias_step_scale · Σ dy` (1: the paper's descent; `1/n` for
    /// each of `n` chunks that share one bias; 0 for a bias-free layer). Stored in the bias heads'
    /// value weights.
    pub bias_step_scale: f64,
    /// [`Execution::Structured`]: evaluate with the structure of the constructed weights:
    /// prefix `p` queries token keys with one-hot `p`, so weight head `(s, j)` scores token `t` with
    /// `dy_t[p S + s]` and sums the values `-η x_t` (chunk `j`), bias head `e` scores with `[p = 0]`
    /// and sums `-η dy_t` (chunk `e`), over training tokens: the update is `-η Σ_t m_t dy_t x_tᵀ`
    /// in the prefix layout plus `-η Σ_t m_t dy_t` in prefix 0's bias slot, one `[D, T] x [T, D]`
    /// matmul. [`Execution::Constructed`]: run the attention as stored.
    #[module(skip)]
    pub execution: Execution,
}

impl<B: Backend> LinearDescent<B> {
    /// Whether [`Execution::Structured`] is selected.
    pub fn is_structured(&self) -> bool {
        self.execution == Execution::Structured
    }

    /// Constructs the module; [`DescentUpdate::BiasOnly`] (LayerNorm descent) zeroes the weight update.
    ///
    /// # Errors
    /// [`TintOpsError::BadMemoryIndex`]; invalid options.
    pub fn new(
        dims: &TintDims,
        memory_index: usize,
        update: DescentUpdate,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        Self::with_bias_step_scale(dims, memory_index, update, 1.0, options, device)
    }

    /// [`LinearDescent::new`] whose bias step is scaled by `bias_step_scale` (the bias heads'
    /// value weights are `-η · bias_step_scale`): `1/n` for each of `n` MLP chunks sharing one
    /// bias (the paper's step on the summed bias), 0 for a bias-free layer.
    ///
    /// # Errors
    /// [`TintOpsError::BadMemoryIndex`]; invalid options; [`TintOpsError::BadOption`] for a
    /// non-finite scale.
    pub fn with_bias_step_scale(
        dims: &TintDims,
        memory_index: usize,
        update: DescentUpdate,
        bias_step_scale: f64,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        options.validate()?;
        if !bias_step_scale.is_finite() {
            return Err(TintOpsError::BadOption {
                name: "bias_step_scale",
                value: bias_step_scale,
                reason: "must be finite",
            });
        }
        let (d, p, s) = (dims.d_model(), dims.n_prefixes(), dims.stack());
        check_memory_index(memory_index, d, p, dims)?;
        let nl = dims.n_linear_heads();
        let weight_heads = s * s;
        let dtype = options.float_dtype;
        let eta = options.inner_lr;
        let tmax = dims.max_seq_length();
        let mut positions = linear_positions(dims);
        for prefix in 0..p {
            positions.set(Qkv::Query, tmax + prefix, prefix, 1.0);
        }
        for t in 0..tmax {
            positions.set(Qkv::Key, t, 0, 1.0);
        }
        for head in 0..weight_heads + s {
            positions.set_lambda(Qkv::Query, head, 1.0);
        }
        for head in weight_heads..weight_heads + s {
            positions.set_lambda(Qkv::Key, head, 1.0);
        }
        // Value: heads s*S + j ← -η memory block j; bias head U + e ← -η dy block e.
        let mut value_heads = DimWiseBuilder::zeros(nl, p);
        if update == DescentUpdate::WeightAndBias {
            for slot in 0..s {
                for j in 0..s {
                    value_heads.set_all_coords(slot * s + j, memory_index / p + j, -eta);
                }
            }
        }
        for e in 0..s {
            value_heads.set_all_coords(weight_heads + e, e, -eta * bias_step_scale);
        }
        let mut c_proj = DimWiseBuilder::zeros(nl, p);
        for head in 0..weight_heads + s {
            c_proj.set_all_coords(head, head, 1.0);
        }
        let attention = TintAttention {
            query: ContentProjection::zeros(dims.d_sim(), p, dtype, device),
            key: gradient_scatter(dims, options, device),
            value: ContentProjection::new(
                value_heads,
                SplitWiseBuilder::identity(nl, p),
                dtype,
                device,
            ),
            positions: positions.build(dtype, device),
            c_proj: c_proj.build(dtype, device),
            n_heads: nl,
            scoring: Scoring::Linear,
            causal_masks: Default::default(),
        };
        Ok(Self {
            attention,
            gates: Gates::new(GateKind::Descent, dims, options, device),
            d_model: d,
            memory_index,
            inner_lr: eta,
            update,
            bias_step_scale,
            execution: options.execution,
        })
    }

    /// Prefix rows updated by one descent step; token rows 0.
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let update = self.prefix_update(state.clone(), ctx);
        self.gates.combine(state, Some(update), None, ctx)
    }

    /// The additive prefix-row update (module output on the prefix rows, before the gate).
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P, Ds]`
    pub fn prefix_update(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let [_, n_rows, _] = state.dims();
        let p = ctx.n_prefixes;
        if self.is_structured() {
            let (_, tokens) = split_rows(&state, p);
            return self.structured_update(&tokens, ctx);
        }
        let rows = AttentionRows {
            queries: 0..p,
            keys: p..n_rows,
        };
        // Prefix rows read the training tokens only (attention_mask, prefix x prefix block zeroed).
        // The mask is the same for every prefix query: mask the value (token) rows instead.
        let masks = AttentionMasks {
            key_mask: Some(ctx.train_mask.clone()),
            ..AttentionMasks::none()
        };
        self.attention
            .forward(state, ctx.position_index.clone(), rows, masks)
    }

    /// [`LinearDescent::prefix_update`] through the structure of the constructed weights (see
    /// [`LinearDescent::execution`]).
    pub(crate) fn structured_update(
        &self,
        tokens: &Tensor<B, 3>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let [batch_size, _, ds] = tokens.dims();
        let (p, d) = (ctx.n_prefixes, self.d_model);
        let stack = d / p;
        let lr = -self.inner_lr;
        let train = crate::layout::repeat_columns(ctx.train_mask.clone().unsqueeze_dim::<3>(2), d);
        let dy = columns(tokens, 0, d) * train; // [B, T, D], training tokens only
        let bias_step = dy.clone().sum_dim(1).mul_scalar(lr * self.bias_step_scale); // [B, 1, D]
        let bias_rows = if p > 1 {
            Tensor::cat(
                vec![
                    bias_step,
                    Tensor::zeros([batch_size, p - 1, d], (&tokens.device(), tokens.dtype())),
                ],
                1,
            )
        } else {
            bias_step
        };
        let weight_rows = (self.update == DescentUpdate::WeightAndBias).then(|| {
            let x = column_view(tokens, self.memory_index, d);
            dy.swap_dims(1, 2)
                .matmul(x)
                .mul_scalar(lr)
                .reshape([batch_size, p, stack * d])
        });
        cat_columns(vec![
            (weight_rows, stack * d),
            (Some(bias_rows), d),
            (None, ds - (stack + 1) * d),
        ])
    }
}

/// Linear_Descent_Backward (§6.4): [`LinearBackward`] and [`LinearDescent`] on the same input; prefix
/// rows from the descent (updated `W, b`), token rows from the backward (`Wᵀ dy` with the old `W`).
#[derive(Module, Debug)]
pub struct LinearBackwardDescent<B: Backend> {
    /// Backward part.
    pub backward: LinearBackward<B>,
    /// Descent part.
    pub descent: LinearDescent<B>,
}

impl<B: Backend> LinearBackwardDescent<B> {
    /// Constructs the pair: the backward passes `[memory_index, Ds)` through, the descent reads `x`
    /// from `[memory_index, memory_index + D)`.
    ///
    /// # Errors
    /// [`TintOpsError::BadMemoryIndex`]; invalid options.
    pub fn new(
        dims: &TintDims,
        memory_index: usize,
        update: DescentUpdate,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        Self::with_bias_step_scale(dims, memory_index, update, 1.0, options, device)
    }

    /// [`LinearBackwardDescent::new`] with the descent's bias step scaled by `bias_step_scale`
    /// ([`LinearDescent::with_bias_step_scale`]).
    ///
    /// # Errors
    /// As [`LinearDescent::with_bias_step_scale`].
    pub fn with_bias_step_scale(
        dims: &TintDims,
        memory_index: usize,
        update: DescentUpdate,
        bias_step_scale: f64,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        Ok(Self {
            backward: LinearBackward::new(dims, Some(memory_index), options, device)?,
            descent: LinearDescent::with_bias_step_scale(
                dims,
                memory_index,
                update,
                bias_step_scale,
                options,
                device,
            )?,
        })
    }

    /// Prefix rows: updated block; token rows: `[Wᵀ dy, 0, …, memory]`.
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let exact = |gates: &Gates<B>| gates.is_selection();
        if exact(&self.backward.gates) && exact(&self.descent.gates) {
            // Exact gates: token rows = the backward tokens, prefix rows = old + update.
            // Two independent halves on one input (parallel tasks on CPU backends).
            let (tokens, update) = crate::branches::join::<B, _, _, _, _>(
                &state.device(),
                || self.backward.forward_tokens(state.clone(), ctx),
                || self.descent.prefix_update(state.clone(), ctx),
            );
            return self
                .descent
                .gates
                .combine(state, Some(update), Some(tokens), ctx);
        }
        let p = ctx.n_prefixes;
        let [_, n_rows, _] = state.dims();
        let backward = self.backward.forward(state.clone(), ctx);
        let descent = self.descent.forward(state, ctx);
        Tensor::cat(
            vec![descent.narrow(1, 0, p), backward.narrow(1, p, n_rows - p)],
            1,
        )
    }

    /// The prefix rows (updated block) and token rows of [`LinearBackwardDescent::forward`] on the
    /// state `[prefix; tokens]`, without building it.
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
        let exact = |gates: &Gates<B>| gates.is_selection();
        if exact(&self.backward.gates)
            && exact(&self.descent.gates)
            && self.backward.is_structured()
            && self.descent.is_structured()
        {
            let (out, update) = crate::branches::join::<B, _, _, _, _>(
                &tokens.device(),
                || self.backward.structured_rows(&prefix, &tokens),
                || self.descent.structured_update(&tokens, ctx),
            );
            return (crate::layout::contiguous(prefix) + update, out);
        }
        let p = ctx.n_prefixes;
        let state = self.forward(crate::layout::join_rows(prefix, tokens), ctx);
        split_rows(&state, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        prefix,
        testing::{
            context, context_in, f64_options, max_abs_diff, options_in, random, rounded,
            state_with_linear, test_dims, TestBackend,
        },
    };
    use burn::tensor::DType;

    /// f64 with O(1) random values and sums of at most `D` products: round-off ~1e-14;
    /// 1e-10 leaves room while still catching any construction error (which is O(1)).
    const F64_TOL: f64 = 1e-10;
    /// f32 (eps 1.2e-7) with the same O(1) inputs: sums of at most `D` = 16 products of O(1) values
    /// (outputs up to ~10) accumulate a few ulp; the largest error seen over repeated random runs
    /// was 1.5e-6 (forward) and 1.6e-7 (descent), so 2e-5 keeps a >10x margin while any
    /// construction error (O(1)) is caught.
    const F32_TOL: f64 = 2e-5;
    const BATCH: usize = 2;

    fn tokens(state: Tensor<TestBackend, 3>, p: usize) -> Tensor<TestBackend, 3> {
        crate::layout::token_rows(state, p)
    }

    /// Runs LinearForward in `dtype` on inputs rounded to `dtype`; the reference is f64 math.
    fn linear_forward_case(dtype: DType, tol: f64) {
        let device = Default::default();
        for dims in test_dims() {
            let (d, p) = (dims.d_model(), dims.n_prefixes());
            let mem = dims.linear_memory_index();
            let module =
                LinearForward::<TestBackend>::new(&dims, Some(mem), &options_in(dtype), &device)
                    .unwrap();
            let ctx = context_in(&dims, BATCH, dtype);
            let weight = rounded(random([BATCH, d, d], 1.0), dtype);
            let bias = rounded(random([BATCH, d], 1.0), dtype);
            let state = rounded(
                state_with_linear(&dims, weight.clone(), bias.clone()),
                dtype,
            );
            let out = module
                .forward(state.clone().cast(dtype), &ctx)
                .cast(DType::F64);
            let x = tokens(state.clone(), p).narrow(2, 0, d); // [B, T, D]
            let expected = x.clone().matmul(weight.swap_dims(1, 2)) + bias.unsqueeze_dim(1);
            let out_tokens = tokens(out.clone(), p);
            let err = max_abs_diff(out_tokens.clone().narrow(2, 0, d), expected);
            assert!(
                err < tol,
                "{dtype:?}, S = {}: |y - (W x + b)| = {err}",
                dims.stack()
            );
            assert_eq!(
                max_abs_diff(out_tokens.clone().narrow(2, mem, d), x),
                0.0,
                "memory = x"
            );
            let zeros = out_tokens
                .clone()
                .narrow(2, d, mem - d)
                .abs()
                .max()
                .into_scalar();
            assert_eq!(zeros, 0.0, "dims between signal and memory are 0");
            assert_eq!(
                max_abs_diff(out.clone().narrow(1, 0, p), state.clone().narrow(1, 0, p)),
                0.0
            );
            let dense = module
                .forward_dense(state.cast(dtype), &ctx)
                .cast(DType::F64);
            assert!(max_abs_diff(dense, out) < tol);
        }
    }

    #[test]
    fn linear_forward_computes_w_x_plus_b_and_stores_x() {
        linear_forward_case(DType::F64, F64_TOL);
    }

    #[test]
    fn linear_forward_in_f32_computes_w_x_plus_b_and_stores_x() {
        linear_forward_case(DType::F32, F32_TOL);
    }

    #[test]
    fn linear_backward_computes_w_transpose_dy() {
        let device = Default::default();
        for dims in test_dims() {
            let (d, p, ds) = (dims.d_model(), dims.n_prefixes(), dims.d_sim());
            let mem = dims.linear_memory_index();
            let module =
                LinearBackward::<TestBackend>::new(&dims, Some(mem), &f64_options(), &device)
                    .unwrap();
            let ctx = context(&dims, BATCH);
            let weight = random([BATCH, d, d], 1.0);
            let state = state_with_linear(&dims, weight.clone(), random([BATCH, d], 1.0));
            let out = module.forward(state.clone(), &ctx);
            let dy = tokens(state.clone(), p).narrow(2, 0, d);
            let expected = dy.matmul(weight); // (Wᵀ dy)ᵀ = dyᵀ W
            let out_tokens = tokens(out.clone(), p);
            let err = max_abs_diff(out_tokens.clone().narrow(2, 0, d), expected);
            assert!(err < F64_TOL, "S = {}: |dx - Wᵀ dy| = {err}", dims.stack());
            assert_eq!(
                out_tokens
                    .clone()
                    .narrow(2, d, mem - d)
                    .abs()
                    .max()
                    .into_scalar(),
                0.0
            );
            assert_eq!(
                max_abs_diff(
                    out_tokens.narrow(2, mem, ds - mem),
                    tokens(state.clone(), p).narrow(2, mem, ds - mem)
                ),
                0.0,
                "memory passes through"
            );
            assert_eq!(
                max_abs_diff(out.narrow(1, 0, p), state.narrow(1, 0, p)),
                0.0
            );
        }
    }

    /// `W - η Σ_t m_t dy_t x_tᵀ`, `b - η Σ_t m_t dy_t` with the plain math.
    fn descent_reference(
        weight: Tensor<TestBackend, 3>,
        bias: Tensor<TestBackend, 2>,
        dy: Tensor<TestBackend, 3>,
        x: Tensor<TestBackend, 3>,
        mask: Tensor<TestBackend, 2>,
        eta: f64,
        update: DescentUpdate,
    ) -> (Tensor<TestBackend, 3>, Tensor<TestBackend, 2>) {
        let masked_dy = dy * mask.unsqueeze_dim(2); // [B, T, D]
        let grad_w = masked_dy.clone().swap_dims(1, 2).matmul(x); // [B, D, D] = Σ dy xᵀ
        let grad_b = masked_dy.sum_dim(1).squeeze_dim(1);
        let new_weight = if update == DescentUpdate::BiasOnly {
            weight
        } else {
            weight - grad_w * eta
        };
        (new_weight, bias - grad_b * eta)
    }

    /// Runs LinearBackwardDescent in `dtype` on inputs rounded to `dtype`; the reference is f64 math.
    fn linear_descent_backward_case(dtype: DType, tol: f64) {
        let device = Default::default();
        let eta = 0.1;
        for update in [DescentUpdate::WeightAndBias, DescentUpdate::BiasOnly] {
            for dims in test_dims() {
                let (d, p) = (dims.d_model(), dims.n_prefixes());
                let mem = dims.linear_memory_index();
                let options = options_in(dtype).with_inner_lr(eta);
                let module = LinearBackwardDescent::<TestBackend>::new(
                    &dims, mem, update, &options, &device,
                )
                .unwrap();
                let ctx = context_in(&dims, BATCH, dtype);
                let weight = rounded(random([BATCH, d, d], 1.0), dtype);
                let bias = rounded(random([BATCH, d], 1.0), dtype);
                let state = rounded(
                    state_with_linear(&dims, weight.clone(), bias.clone()),
                    dtype,
                );
                let out = module
                    .forward(state.clone().cast(dtype), &ctx)
                    .cast(DType::F64);
                let token_in = tokens(state.clone(), p);
                let dy = token_in.clone().narrow(2, 0, d);
                let x = token_in.narrow(2, mem, d);
                let (new_weight, new_bias) = descent_reference(
                    weight.clone(),
                    bias.clone(),
                    dy.clone(),
                    x,
                    ctx.train_mask.clone().cast(DType::F64),
                    eta,
                    update,
                );
                let (got_weight, got_bias) =
                    prefix::read_linear(out.clone().narrow(1, 0, p), &dims).unwrap();
                let err_w = max_abs_diff(got_weight, new_weight.clone());
                let err_b = max_abs_diff(got_bias, new_bias);
                assert!(
                    err_w < tol && err_b < tol,
                    "{dtype:?}, S = {}: W err {err_w}, b err {err_b}",
                    dims.stack()
                );
                // The rest of the prefix rows: bias copies of prefixes >= 1 unchanged, other dims 0.
                let expected_prefix = prefix::write_linear(new_weight, bias, &dims).unwrap();
                let got_prefix = out.clone().narrow(1, 0, p);
                let rest_err = max_abs_diff(
                    got_prefix.narrow(1, 1, p - 1),
                    expected_prefix.narrow(1, 1, p - 1),
                );
                assert!(rest_err < tol, "{dtype:?}, prefixes >= 1: {rest_err}");
                // Token rows: Wᵀ dy with the old weights.
                let err = max_abs_diff(tokens(out, p).narrow(2, 0, d), dy.matmul(weight));
                assert!(
                    err < tol,
                    "{dtype:?}, S = {}: |dx - Wᵀ dy| = {err}",
                    dims.stack()
                );
            }
        }
    }

    #[test]
    fn linear_descent_backward_updates_prefix_and_backpropagates_with_old_weights() {
        linear_descent_backward_case(DType::F64, F64_TOL);
    }

    #[test]
    fn linear_descent_backward_in_f32_updates_prefix_and_backpropagates() {
        linear_descent_backward_case(DType::F32, F32_TOL);
    }

    #[test]
    fn structured_execution_equals_the_constructed_execution() {
        // The structured evaluation (W, b read from the prefix rows, one matmul, 0/1 gate
        // selections) against the constructed execution (the stored attention and gates), on fully
        // random states (junk in every unused dim and prefix slot), f64, both memory settings,
        // bias-only descent, and the row forms the simulators call.
        let device = Default::default();
        let eta = 0.3;
        for dims in test_dims() {
            let p = dims.n_prefixes();
            let ctx = context(&dims, BATCH);
            let constructed = f64_options().with_inner_lr(eta);
            assert_eq!(constructed.execution, Execution::Constructed, "the default");
            let structured = constructed.with_execution(Execution::Structured);
            let mem = dims.linear_memory_index();
            let state = random([BATCH, dims.n_rows(), dims.d_sim()], 1.0);
            let (prefix, token_in) = split_rows(&state, p);
            for memory in [Some(mem), None] {
                let [fast, stored] = [structured, constructed].map(|options| {
                    LinearForward::<TestBackend>::new(&dims, memory, &options, &device).unwrap()
                });
                assert!(fast.is_structured() && !stored.is_structured());
                let (a, b) = (
                    fast.forward(state.clone(), &ctx),
                    stored.forward(state.clone(), &ctx),
                );
                assert!(max_abs_diff(a.clone(), b) < F64_TOL, "forward {memory:?}");
                for module in [&fast, &stored] {
                    let rows = module.forward_rows(prefix.clone(), token_in.clone(), &ctx);
                    assert!(max_abs_diff(rows, tokens(a.clone(), p)) < F64_TOL);
                }
                let [fast, stored] = [structured, constructed].map(|options| {
                    LinearBackward::<TestBackend>::new(&dims, memory, &options, &device).unwrap()
                });
                let (a, b) = (
                    fast.forward(state.clone(), &ctx),
                    stored.forward(state.clone(), &ctx),
                );
                assert!(max_abs_diff(a, b) < F64_TOL, "backward {memory:?}");
            }
            let [fast, stored] = [structured, constructed].map(|options| {
                LinearBackwardDescent::<TestBackend>::new(
                    &dims,
                    mem,
                    DescentUpdate::WeightAndBias,
                    &options,
                    &device,
                )
                .unwrap()
            });
            let full = stored.forward(state.clone(), &ctx);
            assert!(max_abs_diff(fast.forward(state.clone(), &ctx), full.clone()) < F64_TOL);
            let (full_prefix, full_tokens) = split_rows(&full, p);
            for pair in [&fast, &stored] {
                let (new_prefix, rows) = pair.forward_rows(prefix.clone(), token_in.clone(), &ctx);
                assert!(max_abs_diff(new_prefix, full_prefix.clone()) < F64_TOL);
                assert!(max_abs_diff(rows, full_tokens.clone()) < F64_TOL);
            }
            for update in [DescentUpdate::WeightAndBias, DescentUpdate::BiasOnly] {
                let [fast, stored] = [structured, constructed].map(|options| {
                    LinearDescent::<TestBackend>::new(&dims, mem, update, &options, &device)
                        .unwrap()
                });
                let (a, b) = (
                    fast.forward(state.clone(), &ctx),
                    stored.forward(state.clone(), &ctx),
                );
                assert!(max_abs_diff(a, b) < F64_TOL, "descent, {update:?}");
            }
        }
    }

    #[test]
    fn scaled_bias_step_moves_the_bias_by_that_fraction_in_both_executions() {
        // `with_bias_step_scale(c)`: W ← W - η Σ dy xᵀ, b ← b - c η Σ dy (c = 1/4: one of four
        // MLP chunks sharing a bias; c = 0: a bias-free layer keeps its bias slot exactly).
        let device = Default::default();
        let eta = 0.3;
        for dims in test_dims() {
            let (d, p) = (dims.d_model(), dims.n_prefixes());
            let mem = dims.linear_memory_index();
            let ctx = context(&dims, BATCH);
            let weight = random([BATCH, d, d], 1.0);
            let bias = random([BATCH, d], 1.0);
            let state = state_with_linear(&dims, weight.clone(), bias.clone());
            let token_in = tokens(state.clone(), p);
            let (dy, x) = (token_in.clone().narrow(2, 0, d), token_in.narrow(2, mem, d));
            let mask = ctx.train_mask.clone();
            let (new_weight, full_step_bias) = descent_reference(
                weight,
                bias.clone(),
                dy,
                x,
                mask,
                eta,
                DescentUpdate::WeightAndBias,
            );
            for scale in [0.25, 0.0] {
                let expected_bias = bias.clone() + (full_step_bias.clone() - bias.clone()) * scale;
                for execution in [Execution::Constructed, Execution::Structured] {
                    let options = f64_options().with_inner_lr(eta).with_execution(execution);
                    let module = LinearBackwardDescent::<TestBackend>::with_bias_step_scale(
                        &dims,
                        mem,
                        DescentUpdate::WeightAndBias,
                        scale,
                        &options,
                        &device,
                    )
                    .unwrap();
                    let out = module.forward(state.clone(), &ctx);
                    let (got_weight, got_bias) =
                        prefix::read_linear(out.narrow(1, 0, p), &dims).unwrap();
                    let err_w = max_abs_diff(got_weight, new_weight.clone());
                    let err_b = max_abs_diff(got_bias, expected_bias.clone());
                    assert!(
                        err_w < F64_TOL && err_b < F64_TOL,
                        "{execution:?}, scale {scale}: W err {err_w}, b err {err_b}"
                    );
                }
            }
        }
    }

    #[test]
    fn bad_memory_index_is_an_error() {
        let dims = test_dims()[1];
        let device = Default::default();
        let err = LinearForward::<TestBackend>::new(
            &dims,
            Some(dims.d_sim() - 2),
            &f64_options(),
            &device,
        );
        assert!(matches!(err, Err(TintOpsError::BadMemoryIndex { .. })));
        let err = LinearDescent::<TestBackend>::new(
            &dims,
            3,
            DescentUpdate::WeightAndBias,
            &f64_options(),
            &device,
        );
        assert!(matches!(
            err,
            Err(TintOpsError::BadMemoryIndex {
                memory_index: 3,
                ..
            })
        ));
    }
}
