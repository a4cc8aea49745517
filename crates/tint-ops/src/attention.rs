//! TinT multi-head attention (docs/construction.md §3.1, paper Definition C.1).
//!
//! `nh` heads of size `d = Ds/nh` on `Ds`-wide rows. q/k/v are content projections (a
//! dimension-wise op followed by a split-wise op, either of them the identity) plus one-hot
//! position terms gated per head by `λ_q, λ_k, λ_v`; scores are linear (`q·k`) or softmax
//! (`softmax(scale · q·k)`); causal and custom multiplicative/additive masks; an optional transpose
//! of the score matrix (backward attention); a dimension-wise `c_proj`.
//!
//! Query and key rows are given as row ranges, so the `restrict_prefixes` fast path is
//! "queries = token rows, keys = prefix rows", and softmax modules use "token rows × token rows".

use core::ops::Range;

use burn::{
    module::{Module, Param},
    tensor::{activation::softmax, backend::Backend, DType, Int, Tensor},
};

use crate::{
    host::tensor_from_f64,
    hsplit::{
        apply_segments, restrict_plan, shift_plan, BlockKind, DimStructure, DimWise,
        DimWiseBuilder, SplitWise, SplitWiseBuilder,
    },
    layout::per_entry_copies,
    mask_cache::{CausalMaskCache, MaskValues},
};

/// Additive value used for masked softmax scores. Finite (like `finfo.min` in the official code) so a
/// row with every key masked cannot produce NaN; large enough that `exp` underflows to exactly 0.
pub const MASKED_SCORE: f64 = -1.0e30;

/// How attention scores are turned into weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scoring {
    /// `a = q·k` (masked entries are 0).
    Linear,
    /// `a = softmax_keys(scale · q·k)` (masked entries get [`MASKED_SCORE`]).
    Softmax {
        /// Score scale (`1/sqrt(h_a)` in the self-attention modules).
        scale: f64,
    },
}

/// A content projection: dimension-wise op, then split-wise op (`q = q_attn(q_attn_head(e))`).
#[derive(Module, Debug)]
pub struct ContentProjection<B: Backend> {
    /// Dimension-wise op (`*_attn_head`).
    pub dim_wise: DimWise<B>,
    /// Split-wise op (`*_attn`).
    pub split_wise: SplitWise<B>,
}

impl<B: Backend> ContentProjection<B> {
    /// Builds the projection from host builders.
    pub fn new(
        dim_wise: DimWiseBuilder,
        split_wise: SplitWiseBuilder,
        dtype: DType,
        device: &B::Device,
    ) -> Self {
        Self {
            dim_wise: dim_wise.build(dtype, device),
            split_wise: split_wise.build(dtype, device),
        }
    }

    /// Identity projection with blocks of `block_size` (the official default init).
    pub fn identity(d_sim: usize, block_size: usize, dtype: DType, device: &B::Device) -> Self {
        let nf = d_sim / block_size;
        Self::new(
            DimWiseBuilder::identity(nf, block_size),
            SplitWiseBuilder::identity(nf, block_size),
            dtype,
            device,
        )
    }

    /// Zero projection (content not used).
    pub fn zeros(d_sim: usize, block_size: usize, dtype: DType, device: &B::Device) -> Self {
        let nf = d_sim / block_size;
        Self::new(
            DimWiseBuilder::identity(nf, block_size),
            SplitWiseBuilder::zeros(nf, block_size),
            dtype,
            device,
        )
    }

    /// # Shapes
    /// * `x`: `[batch_size, n_rows, d_sim]` → `[batch_size, n_rows, d_sim]`
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.split_wise.forward(self.dim_wise.forward(x))
    }

    /// Output columns `columns` of [`ContentProjection::forward`], computed alone (the split-wise
    /// op is block-local, so only the dimension-wise output of the blocks under `columns` is
    /// needed).
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, d_sim]` → `[batch_size, n_rows, columns.len()]`
    pub fn forward_columns(&self, x: Tensor<B, 3>, columns: Range<usize>) -> Tensor<B, 3> {
        let split = &self.split_wise;
        let nx = split.block_size;
        let plan = restrict_plan(&split.plan, columns.clone());
        let dense_block = |block: usize, input: Tensor<B, 2>| {
            let weight = split.weight.val().narrow(0, block, 1).reshape([nx, nx]);
            input.matmul(weight.transpose())
        };
        if self.dim_wise.structure == DimStructure::Identity {
            return apply_segments(x, &plan, dense_block);
        }
        let (lo, hi) = (columns.start / nx * nx, columns.end.div_ceil(nx) * nx);
        match (
            self.dim_wise.forward_columns(x.clone(), lo..hi),
            shift_plan(&plan, lo),
        ) {
            (Some(mid), Some(shifted)) => apply_segments(mid, &shifted, dense_block),
            _ => self.forward(x).narrow(2, columns.start, columns.len()),
        }
    }

    /// Same map with dense matmuls (no structure shortcuts).
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, d_sim]` → `[batch_size, n_rows, d_sim]`
    pub fn forward_dense(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.split_wise
            .forward_dense(self.dim_wise.forward_dense(x))
    }
}

/// Host-side builder of [`PositionProjection`].
#[derive(Debug, Clone)]
pub struct PositionProjectionBuilder {
    position_dim: usize,
    head_dim: usize,
    n_heads: usize,
    /// `[Pd, 3d]`: columns `[0,d)` = `Wq^p`, `[d,2d)` = `Wk^p`, `[2d,3d)` = `Wv^p` (row = position).
    weight: Vec<f64>,
    /// `[3, nh]`: `λ_q, λ_k, λ_v`.
    lambda: Vec<f64>,
}

/// Which of q / k / v a position term feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qkv {
    /// Query.
    Query = 0,
    /// Key.
    Key = 1,
    /// Value.
    Value = 2,
}

impl PositionProjectionBuilder {
    /// All-zero position weights and λ.
    pub fn zeros(position_dim: usize, head_dim: usize, n_heads: usize) -> Self {
        Self {
            position_dim,
            head_dim,
            n_heads,
            weight: vec![0.0; position_dim * 3 * head_dim],
            lambda: vec![0.0; 3 * n_heads],
        }
    }

    /// Sets `W^p_{which}[coord, position]` (the term added for one-hot position `position`).
    pub fn set(&mut self, which: Qkv, position: usize, coord: usize, value: f64) {
        let d = self.head_dim;
        self.weight[position * 3 * d + which as usize * d + coord] = value;
    }

    /// Sets `λ_{which}[head]`.
    pub fn set_lambda(&mut self, which: Qkv, head: usize, value: f64) {
        self.lambda[which as usize * self.n_heads + head] = value;
    }

    /// Builds the module.
    pub fn build<B: Backend>(self, dtype: DType, device: &B::Device) -> PositionProjection<B> {
        let (pd, d, nh) = (self.position_dim, self.head_dim, self.n_heads);
        let active_heads = [0, 1, 2].map(|w| {
            self.lambda[w * nh..(w + 1) * nh]
                .iter()
                .map(|&l| l != 0.0)
                .collect()
        });
        PositionProjection {
            weight: Param::from_tensor(tensor_from_f64(self.weight, [pd, 3 * d], dtype, device)),
            bias: Param::from_tensor(Tensor::zeros([3 * d], (device, dtype))),
            lambda: Param::from_tensor(tensor_from_f64(
                self.lambda.clone(),
                [3, nh],
                dtype,
                device,
            )),
            lambda_bias: Param::from_tensor(Tensor::zeros([nh], (device, dtype))),
            active_heads,
            lambda_values: self.lambda,
        }
    }
}

/// One-hot position terms (`p_attn`, `Pd·3d + 3d` parameters) and per-head gates (`p_expand`,
/// `λ_q, λ_k, λ_v` + an unused zero bias, `4 nh` parameters).
#[derive(Module, Debug)]
pub struct PositionProjection<B: Backend> {
    /// `[Pd, 3d]` (row = one-hot position).
    pub weight: Param<Tensor<B, 2>>,
    /// `[3d]`, zero.
    pub bias: Param<Tensor<B, 1>>,
    /// `[3, nh]`: `λ_q, λ_k, λ_v`.
    pub lambda: Param<Tensor<B, 2>>,
    /// `[nh]`, zero (the official `position_conv` bias; zero in the whole construction).
    pub lambda_bias: Param<Tensor<B, 1>>,
    /// Per head: whether `λ_q`, `λ_k`, `λ_v` is non-zero.
    #[module(skip)]
    pub active_heads: [Vec<bool>; 3],
    /// Host copy of `λ` (`[3, nh]` row-major), used to build the position terms without broadcasts.
    #[module(skip)]
    pub lambda_values: Vec<f64>,
}

impl<B: Backend> PositionProjection<B> {
    /// `content + term(which, position_index, heads)` (the term repeated over the batch; `content`
    /// itself when every `λ` is zero): on burn-flex in one pass (module `flex_position`), the
    /// term built and added otherwise.
    ///
    /// # Shapes
    /// * `content`: `[batch_size, n_rows, heads.len() * d]`, `position_index`: `[n_rows]` → as `content`
    pub fn add_term(
        &self,
        content: Tensor<B, 3>,
        which: Qkv,
        position_index: Tensor<B, 1, Int>,
        heads: Range<usize>,
    ) -> Tensor<B, 3> {
        let Some(lambda) = self.live_lambda(which, heads.clone()) else {
            return content;
        };
        if !crate::flex_host::is_flex::<B>() {
            return self.add_term_generic(content, which, position_index, heads);
        }
        // The positions on the host (a few hundred indices) and the term's rows built there: no
        // row gather and bias add as tensors.
        let index: Option<Vec<usize>> = position_index
            .clone()
            .into_data()
            .convert::<i64>()
            .to_vec::<i64>()
            .ok()
            .and_then(|index| index.into_iter().map(|i| usize::try_from(i).ok()).collect());
        let [_, three_d] = self.weight.dims();
        let content = match (
            crate::flex_host::into_flex(content),
            crate::flex_host::into_flex(self.weight.val()),
            crate::flex_host::into_flex(self.bias.val()),
            index,
        ) {
            (Ok(c), Ok(weight), Ok(bias), Some(index)) => {
                let pos = crate::flex_position::PositionRows {
                    weight: &weight,
                    bias: &bias,
                    index: &index,
                    column: which as usize * (three_d / 3),
                };
                match crate::flex_position::add_head_terms(c, pos, lambda) {
                    Ok(sum) => return crate::flex_host::from_flex(sum),
                    Err(c) => crate::flex_host::from_flex(c),
                }
            }
            (Ok(c), ..) => crate::flex_host::from_flex(c),
            (Err(content), ..) => content,
        };
        self.add_term_generic(content, which, position_index, heads)
    }

    /// The generic form of [`PositionProjection::add_term`] (the reference of the host kernel,
    /// module `flex_position`).
    ///
    /// # Shapes
    /// As [`PositionProjection::add_term`].
    pub(crate) fn add_term_generic(
        &self,
        content: Tensor<B, 3>,
        which: Qkv,
        position_index: Tensor<B, 1, Int>,
        heads: Range<usize>,
    ) -> Tensor<B, 3> {
        let batch_size = content.dims()[0];
        match self.term(which, position_index, heads) {
            // Same-shape add: a batch-broadcast operand makes flex walk element by element.
            Some(term) if batch_size > 1 => content + Tensor::cat(vec![term; batch_size], 0),
            Some(term) => content + term,
            None => content,
        }
    }

    /// `λ` of `which` on `heads`, or `None` when all of them are zero.
    fn live_lambda(&self, which: Qkv, heads: Range<usize>) -> Option<&[f64]> {
        let [_, nh] = self.lambda.dims();
        let row = which as usize * nh;
        let lambda = &self.lambda_values[row + heads.start..row + heads.end];
        lambda.iter().any(|&l| l != 0.0).then_some(lambda)
    }

    /// `W^p pos + b` of q, k or v: one-hot position times `W^p` is a row gather.
    ///
    /// # Shapes
    /// * `position_index`: `[n_rows]` → `[n_rows, d]`
    fn position_rows(&self, which: Qkv, position_index: Tensor<B, 1, Int>) -> Tensor<B, 2> {
        let [_, three_d] = self.weight.dims();
        let d = three_d / 3;
        self.weight
            .val()
            .select(0, position_index)
            .narrow(1, which as usize * d, d)
            + self.bias.val().narrow(0, which as usize * d, d).unsqueeze()
    }

    /// The position term `λ[h] · W^p pos` of q, k or v for the given rows and the heads `heads`
    /// (laid out head after head), or `None` if `λ = 0` on all of them. Heads outside `heads` are
    /// never built: the attention reads only its live heads, and the terms of the others were
    /// fresh `[n_rows, d]` buffers (most of them zeros) cut away again after a copy.
    ///
    /// # Shapes
    /// * `position_index`: `[n_rows]` → `[1, n_rows, heads.len() * d]`
    pub fn term(
        &self,
        which: Qkv,
        position_index: Tensor<B, 1, Int>,
        heads: Range<usize>,
    ) -> Option<Tensor<B, 3>> {
        let lambda = self.live_lambda(which, heads)?;
        let [_, three_d] = self.weight.dims();
        let d = three_d / 3;
        let n_rows = position_index.dims()[0];
        // `[n_rows, d]`; λ[h] · pos per head, laid out head after head along the row (no broadcast
        // product); a run of heads with λ = 0 is one zero block.
        let pos = self.position_rows(which, position_index);
        let mut parts: Vec<Tensor<B, 2>> = Vec::with_capacity(lambda.len());
        let mut zero_heads = 0;
        for &l in lambda {
            if l == 0.0 {
                zero_heads += 1;
                continue;
            }
            if zero_heads > 0 {
                parts.push(Tensor::zeros(
                    [n_rows, zero_heads * d],
                    (&pos.device(), pos.dtype()),
                ));
                zero_heads = 0;
            }
            parts.push(if l == 1.0 {
                pos.clone()
            } else {
                pos.clone().mul_scalar(l)
            });
        }
        if zero_heads > 0 {
            parts.push(Tensor::zeros(
                [n_rows, zero_heads * d],
                (&pos.device(), pos.dtype()),
            ));
        }
        Some(Tensor::cat(parts, 1).reshape([1, n_rows, lambda.len() * d]))
    }
}

/// `op(scores_b, mask_b)` for each batch entry, with `scores_b` = the `[nh, a, c]` head matrices and
/// `mask_b` `[1, a', c']` broadcast over them (3-d shared-row broadcasts take flex's fast path, 4-d
/// ones a strided element walk); a mask with batch size 1 is shared by the whole batch. Entry by
/// entry on flex only ([`per_entry_copies`]): elsewhere one broadcast op over the batch.
///
/// # Shapes
/// * `scores`: `[batch_size, nh, a, c]`, `mask`: `[batch_size or 1, a or 1, c]` → `[batch_size, nh, a, c]`
fn per_head_matrix<B: Backend>(
    scores: Tensor<B, 4>,
    mask: Tensor<B, 3>,
    op: impl Fn(Tensor<B, 3>, Tensor<B, 3>) -> Tensor<B, 3>,
) -> Tensor<B, 4> {
    let per_entry = per_entry_copies::<B>(&scores.device());
    per_head_matrix_with(scores, mask, op, per_entry)
}

/// [`per_head_matrix`] with the strategy for a batched mask given: entry by entry (`per_entry`) or
/// one op broadcasting each entry's mask over its heads. Both give the same values.
///
/// # Shapes
/// * `scores`: `[batch_size, nh, a, c]`, `mask`: `[batch_size or 1, a or 1, c]` → `[batch_size, nh, a, c]`
fn per_head_matrix_with<B: Backend>(
    scores: Tensor<B, 4>,
    mask: Tensor<B, 3>,
    op: impl Fn(Tensor<B, 3>, Tensor<B, 3>) -> Tensor<B, 3>,
    per_entry: bool,
) -> Tensor<B, 4> {
    let [batch_size, nh, a, c] = scores.dims();
    let [mask_batch, mask_rows, _] = mask.dims();
    let row = mask_rows * c;
    // Materialise the broadcast mask (a stride-0 view copies as a fast 2-d tile copy) so the op
    // is a same-shape elementwise op: a broadcast operand makes flex (without its `simd`
    // feature) walk both operands element by element.
    let repeated = |mask: Tensor<B, 3>, copies: usize| {
        mask.reshape([1, 1, row])
            .expand([1, copies, row])
            .reshape([1, copies, row])
    };
    if mask_batch == 1 {
        let copies = batch_size * nh * a * c / row;
        let lhs = scores.reshape([1, copies, row]);
        if lhs.dtype() == burn::tensor::DType::F32 {
            // A `[1, 1, row]` row shared by every copy is flex's vectorised shared-row broadcast
            // (f32 with its `simd` feature): the same products / sums without materialising the
            // repeated mask (issue 17).
            return op(lhs, mask.reshape([1, 1, row])).reshape([batch_size, nh, a, c]);
        }
        return op(lhs, repeated(mask, copies)).reshape([batch_size, nh, a, c]);
    }
    let copies = nh * a * c / row;
    if !per_entry {
        return op(
            scores.reshape([batch_size, copies, row]),
            mask.reshape([batch_size, 1, row]),
        )
        .reshape([batch_size, nh, a, c]);
    }
    let parts: Vec<Tensor<B, 3>> = (0..batch_size)
        .map(|b| {
            op(
                scores.clone().narrow(0, b, 1).reshape([1, copies, row]),
                repeated(mask.clone().narrow(0, b, 1), copies),
            )
        })
        .collect();
    Tensor::cat(parts, 0).reshape([batch_size, nh, a, c])
}

/// Masks and score options of one attention call.
#[derive(Debug, Clone)]
pub struct AttentionMasks<B: Backend> {
    /// Causal mask on absolute row indices (key row `<=` query row).
    pub causal: bool,
    /// Transpose the score matrix after the softmax (backward attention; needs equal row ranges).
    pub transpose_scores: bool,
    /// Multiplicative mask applied after softmax / transpose, `[batch_size, n_queries, n_keys]`.
    pub multiplicative: Option<Tensor<B, 3>>,
    /// Additive mask applied to the scores before softmax, `[batch_size, n_queries, n_keys]`.
    pub additive: Option<Tensor<B, 3>>,
    /// Multiplicative mask over the keys, the same for every query, `[batch_size, n_keys]`: the
    /// `multiplicative` mask `m[b, j]` repeated over the queries, without building it.
    pub key_mask: Option<Tensor<B, 2>>,
}

impl<B: Backend> AttentionMasks<B> {
    /// No masks.
    pub fn none() -> Self {
        Self {
            causal: false,
            transpose_scores: false,
            multiplicative: None,
            additive: None,
            key_mask: None,
        }
    }

    /// Causal only.
    pub fn causal() -> Self {
        Self {
            causal: true,
            ..Self::none()
        }
    }
}

/// Which rows act as queries and which as keys/values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionRows {
    /// Query rows (absolute row indices).
    pub queries: Range<usize>,
    /// Key/value rows (absolute row indices).
    pub keys: Range<usize>,
}

/// TinT multi-head attention with constructed weights.
#[derive(Module, Debug)]
pub struct TintAttention<B: Backend> {
    /// Query content projection.
    pub query: ContentProjection<B>,
    /// Key content projection.
    pub key: ContentProjection<B>,
    /// Value content projection.
    pub value: ContentProjection<B>,
    /// Position terms and λ gates.
    pub positions: PositionProjection<B>,
    /// Output projection (dimension-wise over the heads).
    pub c_proj: DimWise<B>,
    /// `nh`.
    pub n_heads: usize,
    /// Scoring.
    #[module(skip)]
    pub scoring: Scoring,
    /// Causal masks built so far, resident on the device (not parameters).
    #[module(skip)]
    pub causal_masks: CausalMaskCache,
}

impl<B: Backend> TintAttention<B> {
    /// Runs the attention for `rows.queries` against `rows.keys`.
    ///
    /// # Shapes
    /// * `hidden`: `[batch_size, n_rows, d_sim]`
    /// * `position_index`: `[n_rows]` (one-hot index of each row)
    /// * masks: `[batch_size, n_queries, n_keys]`
    /// * output: `[batch_size, n_queries, d_sim]` (after `c_proj`)
    pub fn forward(
        &self,
        hidden: Tensor<B, 3>,
        position_index: Tensor<B, 1, Int>,
        rows: AttentionRows,
        masks: AttentionMasks<B>,
    ) -> Tensor<B, 3> {
        self.forward_impl(hidden, position_index, rows, masks, false)
    }

    /// [`TintAttention::forward`] with every H-split op applied as a dense matmul.
    ///
    /// # Shapes
    /// As [`TintAttention::forward`].
    pub fn forward_dense(
        &self,
        hidden: Tensor<B, 3>,
        position_index: Tensor<B, 1, Int>,
        rows: AttentionRows,
        masks: AttentionMasks<B>,
    ) -> Tensor<B, 3> {
        self.forward_impl(hidden, position_index, rows, masks, true)
    }

    fn forward_impl(
        &self,
        hidden: Tensor<B, 3>,
        position_index: Tensor<B, 1, Int>,
        rows: AttentionRows,
        masks: AttentionMasks<B>,
        dense: bool,
    ) -> Tensor<B, 3> {
        let [batch_size, _, d_sim] = hidden.dims();
        let nh = self.n_heads;
        let d = d_sim / nh;
        let (q_start, n_q) = (rows.queries.start, rows.queries.len());
        let (k_start, n_k) = (rows.keys.start, rows.keys.len());
        // Heads whose value is identically zero (zero value block, λ_v = 0) or that `c_proj`
        // ignores contribute nothing: attend over the contiguous range of the others only, and
        // project only their columns.
        let heads = if dense { 0..nh } else { self.live_heads() };
        let n_live = heads.len();
        let cols = heads.start * d..heads.end * d;
        // A row range of a batch-1 state is not "contiguous" for flex (size-1 batch stride): one
        // memcpy per row range keeps every later generic op on the fast path (shared by k and v,
        // and by q when the ranges coincide). On burn-flex the projections' host kernels read
        // the rows in place (crate::flex_segments), and the copy is left out.
        let row_range = |start: usize, len: usize| {
            let rows = hidden.clone().narrow(1, start, len);
            if crate::flex_host::is_flex::<B>() {
                rows
            } else {
                crate::layout::contiguous(rows)
            }
        };
        let key_rows = row_range(k_start, n_k);
        let query_rows = if (q_start, n_q) == (k_start, n_k) {
            key_rows.clone()
        } else {
            row_range(q_start, n_q)
        };
        let project = |proj: &ContentProjection<B>, which: Qkv, x: Tensor<B, 3>, start: usize| {
            let [_, len, _] = x.dims();
            let content = if dense {
                proj.forward_dense(x)
            } else {
                proj.forward_columns(x, cols.clone())
            };
            let index = position_index.clone().narrow(0, start, len);
            let out = self
                .positions
                .add_term(content, which, index, heads.clone());
            out.reshape([batch_size, len, n_live, d]).swap_dims(1, 2) // [batch_size, live, len, d]
        };
        // The three projections are independent: parallel tasks on CPU backends
        // (`crate::branches`; each is mostly single-threaded copies and element-wise ops).
        let device = hidden.device();
        let value_rows = key_rows.clone();
        let ((q, k), v) = crate::branches::join::<B, _, _, _, _>(
            &device,
            || {
                crate::branches::join::<B, _, _, _, _>(
                    &device,
                    || project(&self.query, Qkv::Query, query_rows, q_start),
                    || project(&self.key, Qkv::Key, key_rows, k_start),
                )
            },
            || project(&self.value, Qkv::Value, value_rows, k_start),
        );
        let dtype = q.dtype();
        // Query row `i` sees the keys `j` with `k_start + j <= q_start + i`. `hidden` is the value
        // of the hidden keys: 0 for the multiplicative mask of linear scoring, the additive score
        // of softmax scoring. Built once per row ranges and kept on the device.
        let causal_mask = |visible: f32, hidden: f32| {
            self.causal_masks.get::<B>(
                (q_start, n_q),
                (k_start, n_k),
                MaskValues { visible, hidden },
                dtype,
                &device,
            )
        };
        let causal = masks.causal.then(|| match self.scoring {
            Scoring::Linear => causal_mask(1.0, 0.0),
            // −∞ where every query row sees a key (its first key is at or before it): `expf`
            // takes its fast exit for −∞ but a slow underflow branch for −1e30 (2 % of a tiny
            // structured step); a row with no visible key keeps the finite score, which gives
            // uniform weights instead of NaN.
            Scoring::Softmax { .. } if n_k > 0 && q_start >= k_start => {
                causal_mask(0.0, f32::NEG_INFINITY)
            }
            Scoring::Softmax { .. } => causal_mask(0.0, MASKED_SCORE as f32),
        });
        // Scores, masks and weighted values of a range of heads (`[batch_size, heads, ·, d]`):
        // every head independently, so two halves of the heads can run as parallel tasks on CPU
        // backends (`crate::branches`) and give the same values as all heads at once.
        let attend = |q: Tensor<B, 4>, k: Tensor<B, 4>, v: Tensor<B, 4>| -> Tensor<B, 4> {
            let mut scores = q.matmul(k.swap_dims(2, 3)); // [batch_size, heads, n_q, n_k]
            let add = |s: Tensor<B, 3>, m: Tensor<B, 3>| s + m;
            let mul = |s: Tensor<B, 3>, m: Tensor<B, 3>| s * m;
            match self.scoring {
                Scoring::Linear => {
                    if let Some(allowed) = causal.clone() {
                        scores = per_head_matrix(scores, allowed, mul);
                    }
                    if let Some(additive) = masks.additive.clone() {
                        scores = per_head_matrix(scores, additive, add);
                    }
                }
                Scoring::Softmax { scale } => {
                    scores = scores * scale;
                    if let Some(hidden) = causal.clone() {
                        scores = per_head_matrix(scores, hidden, add);
                    }
                    if let Some(additive) = masks.additive.clone() {
                        scores = per_head_matrix(scores, additive, add);
                    }
                    scores = softmax(scores, 3);
                }
            }
            if let Some(key_mask) = masks.key_mask.clone() {
                scores = per_head_matrix(scores, key_mask.unsqueeze_dim(1), mul);
            }
            match (masks.transpose_scores, masks.multiplicative.clone()) {
                // (Sᵀ ⊙ M) = (S ⊙ Mᵀ)ᵀ: multiply the contiguous scores, then transpose the view.
                (true, Some(multiplicative)) => {
                    let transposed = multiplicative.swap_dims(1, 2);
                    let transposed = transposed.clone().reshape(transposed.dims());
                    scores = per_head_matrix(scores, transposed, mul).swap_dims(2, 3);
                }
                (true, None) => scores = scores.swap_dims(2, 3),
                (false, Some(multiplicative)) => {
                    scores = per_head_matrix(scores, multiplicative, mul);
                }
                (false, None) => {}
            }
            scores.matmul(v) // [batch_size, heads, n_q, d]
        };
        let out = if n_live > 1 && crate::branches::runs_in_parallel::<B>(&device) {
            let half = n_live / 2;
            let (first, second) = rayon::join(
                || {
                    attend(
                        q.clone().narrow(1, 0, half),
                        k.clone().narrow(1, 0, half),
                        v.clone().narrow(1, 0, half),
                    )
                },
                || {
                    let rest = n_live - half;
                    attend(
                        q.clone().narrow(1, half, rest),
                        k.clone().narrow(1, half, rest),
                        v.clone().narrow(1, half, rest),
                    )
                },
            );
            vec![first, second]
        } else {
            vec![attend(q, k, v)]
        };
        if dense {
            let out = Tensor::cat(out, 1);
            self.c_proj
                .forward_dense(out.swap_dims(1, 2).reshape([batch_size, n_q, d_sim]))
        } else {
            // The halves are read where they lie (DimWise::forward_head_parts).
            self.c_proj.forward_head_parts(out, heads)
        }
    }

    /// The smallest contiguous range of heads that can contribute to the output: a head whose
    /// value content block is zero and `λ_v = 0`, or that `c_proj` never reads, outputs nothing.
    pub fn live_heads(&self) -> Range<usize> {
        let used = self.c_proj.used_blocks();
        let kinds = &self.value.split_wise.block_kinds;
        let zero_in = self.value.dim_wise.zero_blocks();
        let live: Vec<usize> = (0..self.n_heads)
            .filter(|&h| {
                let content_zero = match kinds.get(h) {
                    Some(BlockKind::Zero) => true,
                    Some(BlockKind::Identity) => zero_in.get(h) == Some(&true),
                    _ => false,
                };
                let value_zero =
                    content_zero && !self.positions.active_heads[Qkv::Value as usize][h];
                used[h] && !value_zero
            })
            .collect();
        match (live.first(), live.last()) {
            (Some(&first), Some(&last)) => first..last + 1,
            _ => 0..self.n_heads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::tensor::Distribution;

    /// An element-wise op of two score tensors.
    type ScoreOp = fn(Tensor<Flex, 3>, Tensor<Flex, 3>) -> Tensor<Flex, 3>;

    /// The batched masks broadcast over the heads give what the per-entry loop gives, for a mask per
    /// query row and a mask shared by the rows (`a' = 1`), with `mul` and `add`: the same one
    /// float32 operation per element either way (tolerance 0).
    #[test]
    fn per_head_matrix_strategies_agree() {
        let device = Default::default();
        let scores = Tensor::<Flex, 4>::random([3, 2, 5, 7], Distribution::Default, &device);
        for mask_rows in [5, 1] {
            let mask = Tensor::<Flex, 3>::random([3, mask_rows, 7], Distribution::Default, &device);
            let ops: [(&str, ScoreOp); 2] = [("mul", |s, m| s * m), ("add", |s, m| s + m)];
            for (name, op) in ops {
                let looped = per_head_matrix_with(scores.clone(), mask.clone(), op, true);
                let batched = per_head_matrix_with(scores.clone(), mask.clone(), op, false);
                assert_eq!(
                    looped.into_data(),
                    batched.clone().into_data(),
                    "{name}, {mask_rows} rows"
                );
                // Entry 1, head 1 against the plain broadcast of its mask.
                let head = batched.narrow(0, 1, 1).narrow(1, 1, 1).reshape([5, 7]);
                let expected = op(
                    scores
                        .clone()
                        .narrow(0, 1, 1)
                        .narrow(1, 1, 1)
                        .reshape([1, 5, 7]),
                    mask.clone().narrow(0, 1, 1),
                )
                .reshape([5, 7]);
                assert_eq!(
                    head.into_data(),
                    expected.into_data(),
                    "{name}, {mask_rows} rows"
                );
            }
        }
    }
}
