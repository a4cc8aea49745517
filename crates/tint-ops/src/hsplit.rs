//! The two H_sim-split linear operations of docs/construction.md §3.2 (paper D.1).
//!
//! * [`SplitWise`] (`Conv2D(nf, nx)`): split a row into `nf` blocks of `nx`; block `i ↦ M_i · block_i + b_i`
//!   with `M_i` an `nx x nx` matrix; `nf·nx² + nf·nx` parameters.
//! * [`DimWise`] (`Conv2D(nf, nx, transpose=True)`): split a row into `nf` blocks of `nx`; for each
//!   coordinate `c < nx` the vector `(block_0[c], …, block_{nf-1}[c]) ↦ M_c · (…) + b_c` with `M_c` an
//!   `nf x nf` matrix; `nx·nf² + nx·nf` parameters.
//!
//! Matrices are stored out x in (`M · v`). The weights are constructed on the host ([`SplitWiseBuilder`],
//! [`DimWiseBuilder`]); at construction the builder records the structure of the weights (identity,
//! all-zero, block selection, coordinate-independent mixing) and `forward` uses it to skip work:
//! identity and zero blocks become copies, coordinate-independent dimension-wise ops one `[nf, nf]`
//! matmul. [`SplitWise::forward_dense`] / [`DimWise::forward_dense`] always run the batched matmul.

use core::ops::Range;

use burn::{
    module::{Module, Param},
    tensor::{backend::Backend, DType, Int, Tensor, TensorData},
};

use crate::host::tensor_from_f64;
pub use crate::segment::Segment;

/// Appends `next` to a plan, merging it with the last segment where both are contiguous copies,
/// zeros or gathers.
fn push_segment(plan: &mut Vec<Segment>, next: Segment) {
    match (plan.last_mut(), next) {
        (Some(Segment::Zero { len }), Segment::Zero { len: more }) => *len += more,
        (
            Some(Segment::Copy { source, len }),
            Segment::Copy {
                source: s2,
                len: more,
            },
        ) if *source + *len == s2 => *len += more,
        (Some(Segment::Gather { index }), Segment::Gather { index: more }) => index.extend(more),
        (_, next) => plan.push(next),
    }
}

/// Evaluates a segment plan on the rows of `x`; `dense_block(i, block_input)` applies split-wise
/// block `i` for [`Segment::Dense`].
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, width]` → `[batch_size, n_rows, Σ segment lengths]`
pub fn apply_segments<B: Backend>(
    x: Tensor<B, 3>,
    plan: &[Segment],
    dense_block: impl Fn(usize, Tensor<B, 2>) -> Tensor<B, 2>,
) -> Tensor<B, 3> {
    if let [Segment::Copy { source: 0, len }] = plan {
        if *len == x.dims()[2] {
            return x;
        }
    }
    if crate::flex_host::is_flex::<B>() {
        return apply_segments_flex(x, plan, dense_block);
    }
    apply_segments_generic(x, plan, dense_block)
}

/// [`apply_segments`] on burn-flex: the dense blocks' matmuls as in the generic form, every output
/// row written once by [`crate::flex_segments`]; the generic form where that kernel does not apply.
fn apply_segments_flex<B: Backend>(
    x: Tensor<B, 3>,
    plan: &[Segment],
    dense_block: impl Fn(usize, Tensor<B, 2>) -> Tensor<B, 2>,
) -> Tensor<B, 3> {
    let [batch_size, n_rows, width] = x.dims();
    let rows = batch_size * n_rows;
    let dense: Vec<Option<Tensor<B, 2>>> = plan
        .iter()
        .map(|segment| match segment {
            Segment::Dense { block, len } | Segment::PartialDense { block, len, .. } => {
                Some(dense_block(
                    *block,
                    x.clone()
                        .reshape([rows, width])
                        .narrow(1, block * len, *len),
                ))
            }
            _ => None,
        })
        .collect();
    let x_flex = crate::flex_host::into_flex(x.clone()).ok();
    let dense_flex: Option<Vec<Option<burn_flex::FlexTensor>>> = dense
        .iter()
        .map(|block| match block {
            Some(block) => crate::flex_host::into_flex(block.clone()).ok().map(Some),
            None => Some(None),
        })
        .collect();
    if let (Some(x_flex), Some(dense_flex)) = (x_flex, dense_flex) {
        if let Some(out) = crate::flex_segments::apply(&x_flex, plan, &dense_flex) {
            return crate::flex_host::from_flex(out);
        }
    }
    apply_segments_generic(x, plan, dense_block)
}

/// The generic form of [`apply_segments`]: one tensor per segment, joined by `cat` (the reference
/// of [`crate::flex_segments`]).
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, width]` → `[batch_size, n_rows, Σ segment lengths]`
pub(crate) fn apply_segments_generic<B: Backend>(
    x: Tensor<B, 3>,
    plan: &[Segment],
    dense_block: impl Fn(usize, Tensor<B, 2>) -> Tensor<B, 2>,
) -> Tensor<B, 3> {
    let [batch_size, n_rows, width] = x.dims();
    let rows = batch_size * n_rows;
    let (device, dtype) = (x.device(), x.dtype());
    let x2 = x.reshape([rows, width]);
    let out_width: usize = plan.iter().map(Segment::len).sum();
    let evaluate = |segment: &Segment| match segment {
        Segment::Copy { source, len } => x2.clone().narrow(1, *source, *len),
        Segment::Zero { len } => Tensor::zeros([rows, *len], (&device, dtype)),
        Segment::Sum { terms, len } => {
            let term = |&(source, coef): &(usize, f64)| {
                let block = x2.clone().narrow(1, source, *len);
                if coef == 1.0 {
                    block
                } else {
                    // Scalar ops on a strided view walk element by element: copy first.
                    block.clone().reshape(block.dims()).mul_scalar(coef)
                }
            };
            terms
                .iter()
                .skip(1)
                .fold(term(&terms[0]), |acc, t| acc + term(t))
        }
        Segment::Gather { index } => {
            let index: Vec<i64> = index.iter().map(|&i| i as i64).collect();
            let n = index.len();
            x2.clone()
                .select(1, Tensor::from_data(TensorData::new(index, [n]), &device))
        }
        Segment::Dense { block, len } => {
            dense_block(*block, x2.clone().narrow(1, block * len, *len))
        }
        Segment::PartialDense {
            block,
            len,
            offset,
            width,
        } => {
            dense_block(*block, x2.clone().narrow(1, block * len, *len)).narrow(1, *offset, *width)
        }
    };
    // A segment that occurs more than once (the shared dimension-wise ops tile the same columns,
    // or the same scaled columns, over every head block) is evaluated once, as a contiguous
    // tensor: `cat` copies a strided view with flex's tiled strided copy, a contiguous one row by
    // row with memcpy (issue 17).
    let mut evaluated: Vec<(&Segment, Tensor<B, 2>)> = Vec::new();
    let parts: Vec<Tensor<B, 2>> = plan
        .iter()
        .enumerate()
        .map(|(i, segment)| {
            if let Some((_, part)) = evaluated.iter().find(|(seen, _)| *seen == segment) {
                return part.clone();
            }
            let part = evaluate(segment);
            if plan[i + 1..].contains(segment) {
                let part = part.clone().reshape(part.dims());
                evaluated.push((segment, part.clone()));
                return part;
            }
            part
        })
        .collect();
    let out = if parts.len() == 1 {
        parts.into_iter().next().expect("one part")
    } else {
        Tensor::cat(parts, 1)
    };
    out.reshape([batch_size, n_rows, out_width])
}

/// The part of a plan that produces output columns `columns` (a plan over the same input).
///
/// Every output column of a segment depends only on its own input columns, so the restricted plan
/// is the overlapping segments, cut to the range.
pub fn restrict_plan(plan: &[Segment], columns: Range<usize>) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut start = 0;
    for segment in plan {
        let len = segment.len();
        let (from, to) = (columns.start.max(start), columns.end.min(start + len));
        if from < to {
            let (offset, width) = (from - start, to - from);
            let cut = match segment {
                Segment::Copy { source, .. } => Segment::Copy {
                    source: source + offset,
                    len: width,
                },
                Segment::Zero { .. } => Segment::Zero { len: width },
                Segment::Sum { terms, .. } => Segment::Sum {
                    terms: terms
                        .iter()
                        .map(|&(source, coef)| (source + offset, coef))
                        .collect(),
                    len: width,
                },
                Segment::Gather { index } => Segment::Gather {
                    index: index[offset..offset + width].to_vec(),
                },
                Segment::Dense { block, len } if offset == 0 && width == *len => Segment::Dense {
                    block: *block,
                    len: *len,
                },
                // A partial dense block: evaluate it whole, keep the columns (never in the
                // constructed modules, whose restricted ranges are whole blocks).
                Segment::Dense { block, len } => Segment::PartialDense {
                    block: *block,
                    len: *len,
                    offset,
                    width,
                },
                Segment::PartialDense { .. } => {
                    unreachable!("plans are built without partial blocks")
                }
            };
            push_segment(&mut out, cut);
        }
        start += len;
    }
    out
}

/// A plan reading input columns `shift..` re-expressed for an input that starts at column `shift`;
/// `None` if it holds matmul blocks (their input is addressed by block index).
pub fn shift_plan(plan: &[Segment], shift: usize) -> Option<Vec<Segment>> {
    plan.iter()
        .map(|segment| match segment {
            Segment::Copy { source, len } => Some(Segment::Copy {
                source: source.checked_sub(shift)?,
                len: *len,
            }),
            Segment::Zero { len } => Some(Segment::Zero { len: *len }),
            Segment::Sum { terms, len } => Some(Segment::Sum {
                terms: terms
                    .iter()
                    .map(|&(source, coef)| Some((source.checked_sub(shift)?, coef)))
                    .collect::<Option<_>>()?,
                len: *len,
            }),
            Segment::Gather { index } => Some(Segment::Gather {
                index: index
                    .iter()
                    .map(|&i| i.checked_sub(shift))
                    .collect::<Option<_>>()?,
            }),
            Segment::Dense { .. } | Segment::PartialDense { .. } => None,
        })
        .collect()
}

/// What one split-wise block does, detected from the constructed weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// `M_i = 0`.
    Zero,
    /// `M_i = I`.
    Identity,
    /// Anything else.
    Dense,
}

/// Host-side builder of a [`SplitWise`] op (identity blocks by default, like the official init).
#[derive(Debug, Clone)]
pub struct SplitWiseBuilder {
    n_blocks: usize,
    block_size: usize,
    weight: Vec<f64>,
}

impl SplitWiseBuilder {
    /// `nf` identity blocks of size `nx`.
    pub fn identity(n_blocks: usize, block_size: usize) -> Self {
        let mut builder = Self::zeros(n_blocks, block_size);
        for block in 0..n_blocks {
            for i in 0..block_size {
                builder.set(block, i, i, 1.0);
            }
        }
        builder
    }

    /// `nf` zero blocks of size `nx`.
    pub fn zeros(n_blocks: usize, block_size: usize) -> Self {
        Self {
            n_blocks,
            block_size,
            weight: vec![0.0; n_blocks * block_size * block_size],
        }
    }

    /// Sets `M_block[out, in]`.
    pub fn set(&mut self, block: usize, out: usize, input: usize, value: f64) {
        let nx = self.block_size;
        self.weight[(block * nx + out) * nx + input] = value;
    }

    /// Sets block `block` to zero.
    pub fn zero_block(&mut self, block: usize) {
        let nx2 = self.block_size * self.block_size;
        self.weight[block * nx2..(block + 1) * nx2].fill(0.0);
    }

    /// Structure of each block.
    fn block_kinds(&self) -> Vec<BlockKind> {
        let nx = self.block_size;
        (0..self.n_blocks)
            .map(|block| {
                let m = &self.weight[block * nx * nx..(block + 1) * nx * nx];
                if m.iter().all(|&v| v == 0.0) {
                    BlockKind::Zero
                } else if (0..nx * nx).all(|k| m[k] == if k / nx == k % nx { 1.0 } else { 0.0 }) {
                    BlockKind::Identity
                } else {
                    BlockKind::Dense
                }
            })
            .collect()
    }

    /// Builds the module (zero biases, as in the whole construction).
    pub fn build<B: Backend>(self, dtype: DType, device: &B::Device) -> SplitWise<B> {
        let kinds = self.block_kinds();
        let (nf, nx) = (self.n_blocks, self.block_size);
        let dense: Vec<i64> = (0..nf)
            .filter(|&i| kinds[i] == BlockKind::Dense)
            .map(|i| i as i64)
            .collect();
        let n_dense = dense.len();
        let plan = self.segments(&kinds);
        SplitWise {
            weight: Param::from_tensor(tensor_from_f64(self.weight, [nf, nx, nx], dtype, device)),
            bias: Param::from_tensor(Tensor::zeros([nf, nx], (device, dtype))),
            n_blocks: nf,
            block_size: nx,
            block_kinds: kinds,
            dense_blocks: Tensor::from_data(TensorData::new(dense, [n_dense]), device),
            plan,
        }
    }

    /// The segment plan: identity blocks are copies, zero blocks zeros, 0/1 selection blocks
    /// gathers, other blocks matmuls.
    fn segments(&self, kinds: &[BlockKind]) -> Vec<Segment> {
        let nx = self.block_size;
        let mut plan = Vec::new();
        for (block, kind) in kinds.iter().enumerate() {
            let segment = match kind {
                BlockKind::Identity => Segment::Copy {
                    source: block * nx,
                    len: nx,
                },
                BlockKind::Zero => Segment::Zero { len: nx },
                BlockKind::Dense => {
                    let m = &self.weight[block * nx * nx..(block + 1) * nx * nx];
                    let selection: Option<Vec<usize>> = (0..nx)
                        .map(|out| {
                            let row = &m[out * nx..(out + 1) * nx];
                            let ones: Vec<usize> = (0..nx).filter(|&i| row[i] != 0.0).collect();
                            match ones.as_slice() {
                                [i] if row[*i] == 1.0 => Some(block * nx + i),
                                _ => None,
                            }
                        })
                        .collect();
                    match selection {
                        Some(index) => Segment::Gather { index },
                        None => Segment::Dense { block, len: nx },
                    }
                }
            };
            push_segment(&mut plan, segment);
        }
        plan
    }
}

/// Split-wise op (`Conv2D(nf, nx)`): `nf` independent `nx x nx` maps.
#[derive(Module, Debug)]
pub struct SplitWise<B: Backend> {
    /// `[nf, nx, nx]`, `weight[i]` = `M_i` (out x in).
    pub weight: Param<Tensor<B, 3>>,
    /// `[nf, nx]` (zero in the construction; not applied by `forward`).
    pub bias: Param<Tensor<B, 2>>,
    /// `nf`.
    pub n_blocks: usize,
    /// `nx`.
    pub block_size: usize,
    /// Structure of each block (detected at construction).
    #[module(skip)]
    pub block_kinds: Vec<BlockKind>,
    /// Indices of the dense blocks.
    pub dense_blocks: Tensor<B, 1, Int>,
    /// Evaluation plan (detected at construction).
    #[module(skip)]
    pub plan: Vec<Segment>,
}

impl<B: Backend> SplitWise<B> {
    /// Applies the op using the recorded block structure (biases are zero by construction).
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, nf * nx]` → `[batch_size, n_rows, nf * nx]`
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        if self.block_kinds.iter().all(|&k| k == BlockKind::Zero) {
            return x.zeros_like();
        }
        let nx = self.block_size;
        apply_segments(x, &self.plan, |block, input| {
            let weight = self.weight.val().narrow(0, block, 1).reshape([nx, nx]);
            input.matmul(weight.transpose())
        })
    }

    /// Output columns `columns` of [`SplitWise::forward`], computed alone.
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, nf * nx]` → `[batch_size, n_rows, columns.len()]`
    pub fn forward_columns(&self, x: Tensor<B, 3>, columns: Range<usize>) -> Tensor<B, 3> {
        let nx = self.block_size;
        apply_segments(x, &restrict_plan(&self.plan, columns), |block, input| {
            let weight = self.weight.val().narrow(0, block, 1).reshape([nx, nx]);
            input.matmul(weight.transpose())
        })
    }

    /// Applies the op as one dense batched matmul `[nf, rows, nx] x [nf, nx, nx]` plus bias.
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, nf * nx]` → `[batch_size, n_rows, nf * nx]`
    pub fn forward_dense(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch_size, n_rows, width] = x.dims();
        let (nf, nx) = (self.n_blocks, self.block_size);
        let dtype = x.dtype();
        let out = x
            .reshape([batch_size * n_rows, nf, nx])
            .swap_dims(0, 1) // [nf, rows, nx]
            .matmul(cast_to(self.weight.val(), dtype).swap_dims(1, 2))
            .swap_dims(0, 1); // [rows, nf, nx]
        (out + cast_to(self.bias.val(), dtype).unsqueeze::<3>())
            .reshape([batch_size, n_rows, width])
    }
}

/// `t` in `dtype` (a no-op when it already is): stored weights applied to a widened state
/// ([`crate::precision`]).
fn cast_to<B: Backend, const D: usize>(
    t: Tensor<B, D>,
    dtype: burn::tensor::DType,
) -> Tensor<B, D> {
    if t.dtype() == dtype {
        t
    } else {
        t.cast(dtype)
    }
}

/// Host-side builder of a [`DimWise`] op (identity per coordinate by default).
#[derive(Debug, Clone)]
pub struct DimWiseBuilder {
    n_blocks: usize,
    block_size: usize,
    weight: Vec<f64>,
}

impl DimWiseBuilder {
    /// Identity `nf x nf` map for each of the `nx` coordinates.
    pub fn identity(n_blocks: usize, block_size: usize) -> Self {
        let mut builder = Self::zeros(n_blocks, block_size);
        for i in 0..n_blocks {
            builder.set_all_coords(i, i, 1.0);
        }
        builder
    }

    /// All-zero maps.
    pub fn zeros(n_blocks: usize, block_size: usize) -> Self {
        Self {
            n_blocks,
            block_size,
            weight: vec![0.0; block_size * n_blocks * n_blocks],
        }
    }

    /// Sets `M_coord[out_block, in_block]`.
    pub fn set(&mut self, coord: usize, out_block: usize, in_block: usize, value: f64) {
        let nf = self.n_blocks;
        self.weight[(coord * nf + out_block) * nf + in_block] = value;
    }

    /// Sets `M_c[out_block, in_block]` for every coordinate `c`.
    pub fn set_all_coords(&mut self, out_block: usize, in_block: usize, value: f64) {
        for coord in 0..self.block_size {
            self.set(coord, out_block, in_block, value);
        }
    }

    /// Builds the module (zero biases).
    pub fn build<B: Backend>(self, dtype: DType, device: &B::Device) -> DimWise<B> {
        let (nf, nx) = (self.n_blocks, self.block_size);
        let first = &self.weight[..nf * nf];
        let shared = (1..nx).all(|c| &self.weight[c * nf * nf..(c + 1) * nf * nf] == first);
        let is_identity =
            shared && (0..nf * nf).all(|k| first[k] == if k / nf == k % nf { 1.0 } else { 0.0 });
        let structure = if is_identity {
            DimStructure::Identity
        } else if shared {
            DimStructure::Shared
        } else {
            DimStructure::PerCoordinate
        };
        let plan = if shared {
            let mut plan = Vec::new();
            for out in 0..nf {
                let terms: Vec<(usize, f64)> = (0..nf)
                    .filter(|&i| first[out * nf + i] != 0.0)
                    .map(|i| (i * nx, first[out * nf + i]))
                    .collect();
                let segment = match terms.as_slice() {
                    [] => Segment::Zero { len: nx },
                    [(source, coef)] if *coef == 1.0 => Segment::Copy {
                        source: *source,
                        len: nx,
                    },
                    _ => Segment::Sum { terms, len: nx },
                };
                push_segment(&mut plan, segment);
            }
            plan
        } else {
            Vec::new()
        };
        DimWise {
            plan,
            weight: Param::from_tensor(tensor_from_f64(self.weight, [nx, nf, nf], dtype, device)),
            bias: Param::from_tensor(Tensor::zeros([nx, nf], (device, dtype))),
            n_blocks: nf,
            block_size: nx,
            structure,
        }
    }
}

/// Structure of a dimension-wise op, detected at construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DimStructure {
    /// `M_c = I` for all `c`.
    Identity,
    /// `M_c` the same for all `c`: one `[nf, nf]` matmul over the block axis.
    Shared,
    /// General: a batched `[nx, nf, nf]` matmul.
    PerCoordinate,
}

/// Dimension-wise op (`Conv2D(nf, nx, transpose=True)`): per coordinate, an `nf x nf` map across blocks.
#[derive(Module, Debug)]
pub struct DimWise<B: Backend> {
    /// `[nx, nf, nf]`, `weight[c]` = `M_c` (out x in).
    pub weight: Param<Tensor<B, 3>>,
    /// `[nx, nf]` (zero in the construction; not applied by `forward`).
    pub bias: Param<Tensor<B, 2>>,
    /// `nf`.
    pub n_blocks: usize,
    /// `nx`.
    pub block_size: usize,
    /// Structure (detected at construction).
    #[module(skip)]
    pub structure: DimStructure,
    /// Evaluation plan of a shared op (empty otherwise).
    #[module(skip)]
    pub plan: Vec<Segment>,
}

impl<B: Backend> DimWise<B> {
    /// Applies the op using the recorded structure (biases are zero by construction).
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, nf * nx]` → `[batch_size, n_rows, nf * nx]`
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        match self.structure {
            DimStructure::Identity => x,
            DimStructure::PerCoordinate => self.forward_dense(x),
            DimStructure::Shared => apply_segments(x, &self.plan, |_, input| input),
        }
    }

    /// Output columns `columns` of [`DimWise::forward`], computed alone; `None` for a
    /// per-coordinate op (no column plan).
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, nf * nx]` → `[batch_size, n_rows, columns.len()]`
    pub fn forward_columns(&self, x: Tensor<B, 3>, columns: Range<usize>) -> Option<Tensor<B, 3>> {
        match self.structure {
            DimStructure::Identity => Some(x.narrow(2, columns.start, columns.len())),
            DimStructure::PerCoordinate => None,
            DimStructure::Shared => Some(apply_segments(
                x,
                &restrict_plan(&self.plan, columns),
                |_, input| input,
            )),
        }
    }

    /// Which input blocks the op reads (a block no output depends on can be skipped upstream).
    pub fn used_blocks(&self) -> Vec<bool> {
        let (nf, nx) = (self.n_blocks, self.block_size);
        if self.structure != DimStructure::Shared {
            return vec![true; nf];
        }
        let mut used = vec![false; nf];
        for segment in &self.plan {
            match segment {
                Segment::Copy { source, len } => {
                    used[source / nx..(source + len) / nx].fill(true);
                }
                Segment::Sum { terms, .. } => {
                    for (source, _) in terms {
                        used[source / nx] = true;
                    }
                }
                _ => {}
            }
        }
        used
    }

    /// Which output blocks are identically zero (whatever the input).
    pub fn zero_blocks(&self) -> Vec<bool> {
        let (nf, nx) = (self.n_blocks, self.block_size);
        let mut zero = vec![false; nf];
        if self.structure == DimStructure::Shared {
            let mut start = 0;
            for segment in &self.plan {
                let len = segment.len();
                if let Segment::Zero { .. } = segment {
                    zero[start / nx..(start + len) / nx].fill(true);
                }
                start += len;
            }
        }
        zero
    }

    /// Applies the op to head-major input where only blocks `blocks` are present (the others are
    /// zero): the merge of attention heads and `c_proj` in one pass.
    ///
    /// # Shapes
    /// * `heads`: `[batch_size, blocks.len(), n_rows, nx]` → `[batch_size, n_rows, nf * nx]`
    pub fn forward_heads(&self, heads: Tensor<B, 4>, blocks: Range<usize>) -> Tensor<B, 3> {
        self.forward_head_parts(vec![heads], blocks)
    }

    /// [`DimWise::forward_heads`] with the present blocks given in consecutive parts (the halves
    /// of the heads that the attention computes as parallel tasks): on burn-flex read where they
    /// lie (the host kernel of module `flex_segments`), joined by `cat` first otherwise.
    ///
    /// # Shapes
    /// * `parts`: `[batch_size, n_i, n_rows, nx]` with `Σ n_i = blocks.len()` → `[batch_size, n_rows, nf * nx]`
    pub fn forward_head_parts(
        &self,
        parts: Vec<Tensor<B, 4>>,
        blocks: Range<usize>,
    ) -> Tensor<B, 3> {
        if self.structure == DimStructure::Shared && crate::flex_host::is_flex::<B>() {
            let flex: Option<Vec<_>> = parts
                .iter()
                .map(|part| crate::flex_host::into_flex(part.clone()).ok())
                .collect();
            if let Some(out) = flex.and_then(|flex| {
                crate::flex_segments::apply_heads(&flex, &self.plan, blocks.clone())
            }) {
                return crate::flex_host::from_flex(out);
            }
        }
        let heads = if parts.len() == 1 {
            parts.into_iter().next().expect("one part")
        } else {
            Tensor::cat(parts, 1)
        };
        self.forward_heads_joined(heads, blocks)
    }

    /// [`DimWise::forward_heads`] by the generic ops: all blocks joined and the op applied, or,
    /// for a shared structure, one tensor per block joined by `cat`.
    ///
    /// # Shapes
    /// * `heads`: `[batch_size, blocks.len(), n_rows, nx]` → `[batch_size, n_rows, nf * nx]`
    fn forward_heads_joined(&self, heads: Tensor<B, 4>, blocks: Range<usize>) -> Tensor<B, 3> {
        let [batch_size, n_present, n_rows, nx] = heads.dims();
        let nf = self.n_blocks;
        if self.structure != DimStructure::Shared || n_present != blocks.len() {
            let full = if blocks.len() == nf {
                heads
            } else {
                let (device, dtype) = (heads.device(), heads.dtype());
                // No empty zero blocks: a tensor with no elements is a launch error on cuda
                // (a grid of zero blocks), although flex accepts it.
                let zeros = |n: usize| {
                    (n > 0).then(|| Tensor::zeros([batch_size, n, n_rows, nx], (&device, dtype)))
                };
                let parts = [zeros(blocks.start), Some(heads), zeros(nf - blocks.end)];
                Tensor::cat(parts.into_iter().flatten().collect(), 1)
            };
            let merged = full.swap_dims(1, 2).reshape([batch_size, n_rows, nf * nx]);
            return self.forward(merged);
        }
        self.forward_heads_generic(heads, blocks)
    }

    /// The generic form of [`DimWise::forward_heads`]' shared-structure case: one tensor per
    /// block, joined by `cat` (the reference of [`crate::flex_segments::apply_heads`]).
    ///
    /// # Shapes
    /// * `heads`: `[batch_size, blocks.len(), n_rows, nx]` → `[batch_size, n_rows, nf * nx]`
    pub(crate) fn forward_heads_generic(
        &self,
        heads: Tensor<B, 4>,
        blocks: Range<usize>,
    ) -> Tensor<B, 3> {
        let [batch_size, _, n_rows, nx] = heads.dims();
        let (device, dtype) = (heads.device(), heads.dtype());
        let head = |block: usize| -> Option<Tensor<B, 3>> {
            blocks.contains(&block).then(|| {
                heads
                    .clone()
                    .narrow(1, block - blocks.start, 1)
                    .reshape([batch_size, n_rows, nx])
            })
        };
        let zeros = |n: usize| Tensor::zeros([batch_size, n_rows, n], (&device, dtype));
        let mut parts = Vec::new();
        for segment in &self.plan {
            match segment {
                Segment::Zero { len } => parts.push(zeros(*len)),
                Segment::Copy { source, len } => {
                    for block in source / nx..(source + len) / nx {
                        parts.push(head(block).unwrap_or_else(|| zeros(nx)));
                    }
                }
                Segment::Sum { terms, .. } => {
                    let mut acc: Option<Tensor<B, 3>> = None;
                    for &(source, coef) in terms {
                        if let Some(h) = head(source / nx) {
                            let h = if coef == 1.0 { h } else { h.mul_scalar(coef) };
                            acc = Some(match acc {
                                Some(a) => a + h,
                                None => h,
                            });
                        }
                    }
                    parts.push(acc.unwrap_or_else(|| zeros(nx)));
                }
                Segment::Gather { .. } | Segment::Dense { .. } | Segment::PartialDense { .. } => {
                    unreachable!("dimension-wise plans hold copies, zeros and sums")
                }
            }
        }
        Tensor::cat(parts, 2)
    }

    /// Applies the op as one batched matmul `[nx, rows, nf] x [nx, nf, nf]` plus bias.
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, nf * nx]` → `[batch_size, n_rows, nf * nx]`
    pub fn forward_dense(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch_size, n_rows, width] = x.dims();
        let (nf, nx) = (self.n_blocks, self.block_size);
        let dtype = x.dtype();
        let out = x
            .reshape([batch_size * n_rows, nf, nx])
            .permute([2, 0, 1]) // [nx, rows, nf]
            .matmul(cast_to(self.weight.val(), dtype).swap_dims(1, 2))
            + cast_to(self.bias.val(), dtype).unsqueeze_dim::<3>(1); // [nx, 1, nf]
        out.permute([1, 2, 0]) // [rows, nf, nx]
            .reshape([batch_size, n_rows, width])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Distribution, Tolerance};

    type TestBackend = burn::backend::Flex;

    /// f32 matmul of O(1) values with a few dozen terms: round-off ~1e-6.
    const TOL: f64 = 1e-5;

    fn random(shape: [usize; 3]) -> Tensor<TestBackend, 3> {
        Tensor::random(shape, Distribution::Normal(0.0, 1.0), &Default::default())
    }

    #[test]
    fn split_wise_matches_per_block_matrices_and_structure_path() {
        let device = Default::default();
        let (nf, nx) = (4, 3);
        let mut builder = SplitWiseBuilder::identity(nf, nx);
        builder.zero_block(1);
        // Block 2: a permutation plus a scale (dense).
        builder.zero_block(2);
        builder.set(2, 0, 2, 2.0);
        builder.set(2, 1, 0, -1.0);
        builder.set(2, 2, 1, 0.5);
        let op: SplitWise<TestBackend> = builder.build(DType::F32, &device);
        assert_eq!(
            op.block_kinds,
            vec![
                BlockKind::Identity,
                BlockKind::Zero,
                BlockKind::Dense,
                BlockKind::Identity
            ]
        );
        assert_eq!(op.num_params(), nf * nx * nx + nf * nx);
        let x = random([2, 5, nf * nx]);
        let fast = op.forward(x.clone());
        let dense = op.forward_dense(x.clone());
        fast.to_data()
            .assert_approx_eq::<f32>(&dense.to_data(), Tolerance::absolute(TOL));
        // Direct: block 2 of the output is (2 x2, -x0, 0.5 x1).
        let xb = x.reshape([10, nf, nx]);
        let ob = fast.reshape([10, nf, nx]);
        let expected = Tensor::cat(
            vec![
                xb.clone().narrow(2, 2, 1) * 2.0,
                xb.clone().narrow(2, 0, 1) * -1.0,
                xb.clone().narrow(2, 1, 1) * 0.5,
            ],
            2,
        );
        ob.clone()
            .narrow(1, 2, 1)
            .to_data()
            .assert_approx_eq::<f32>(
                &expected.narrow(1, 2, 1).to_data(),
                Tolerance::absolute(TOL),
            );
        assert_eq!(ob.narrow(1, 1, 1).abs().max().into_scalar(), 0.0);
    }

    #[test]
    fn column_restricted_ops_equal_the_full_ops_narrowed() {
        let device = Default::default();
        let (nf, nx) = (4, 3);
        // Split-wise: identity, zero, a selection (gather) and a dense block.
        let mut split = SplitWiseBuilder::identity(nf, nx);
        split.zero_block(1);
        split.zero_block(2);
        split.set(2, 0, 2, 1.0);
        split.set(2, 1, 0, 1.0);
        split.set(2, 2, 0, 1.0);
        split.set(3, 0, 1, 2.0);
        let split: SplitWise<TestBackend> = split.build(DType::F32, &device);
        // Dimension-wise: a shared sum.
        let mut mix = DimWiseBuilder::zeros(nf, nx);
        mix.set_all_coords(0, 0, 1.0);
        mix.set_all_coords(0, 3, -2.0);
        mix.set_all_coords(2, 1, 1.0);
        mix.set_all_coords(3, 3, 1.0);
        let mix: DimWise<TestBackend> = mix.build(DType::F32, &device);
        let x = random([2, 5, nf * nx]);
        for columns in [0..12, 0..3, 2..7, 6..9, 4..12, 9..12] {
            let (from, len) = (columns.start, columns.len());
            let expect = split.forward(x.clone()).narrow(2, from, len);
            let got = split.forward_columns(x.clone(), columns.clone());
            got.to_data()
                .assert_approx_eq::<f32>(&expect.to_data(), Tolerance::absolute(TOL));
            let expect = mix.forward(x.clone()).narrow(2, from, len);
            let got = mix.forward_columns(x.clone(), columns.clone()).unwrap();
            got.to_data()
                .assert_approx_eq::<f32>(&expect.to_data(), Tolerance::absolute(TOL));
        }
        // A shifted plan reads an input that starts at the shift.
        let plan = restrict_plan(&split.plan, 6..9);
        let shifted = shift_plan(&plan, 6).expect("no matmul block");
        let got = apply_segments(x.clone().narrow(2, 6, 3), &shifted, |_, i| i);
        got.to_data().assert_approx_eq::<f32>(
            &split.forward(x).narrow(2, 6, 3).to_data(),
            Tolerance::absolute(TOL),
        );
        assert!(shift_plan(&restrict_plan(&split.plan, 9..12), 9).is_none());
    }

    #[test]
    fn dim_wise_matches_per_coordinate_matrices_and_structure_path() {
        let device = Default::default();
        let (nf, nx) = (3, 4);
        // Shared mixing: out0 = in0 + in2, out1 = 0, out2 = -in1.
        let mut shared = DimWiseBuilder::zeros(nf, nx);
        shared.set_all_coords(0, 0, 1.0);
        shared.set_all_coords(0, 2, 1.0);
        shared.set_all_coords(2, 1, -1.0);
        let mut per_coord = shared.clone();
        per_coord.set(3, 1, 1, 5.0);
        let shared: DimWise<TestBackend> = shared.build(DType::F32, &device);
        let per_coord: DimWise<TestBackend> = per_coord.build(DType::F32, &device);
        assert_eq!(shared.structure, DimStructure::Shared);
        assert_eq!(per_coord.structure, DimStructure::PerCoordinate);
        assert_eq!(shared.num_params(), nx * nf * nf + nx * nf);
        let x = random([2, 3, nf * nx]);
        let fast = shared.forward(x.clone());
        fast.to_data().assert_approx_eq::<f32>(
            &shared.forward_dense(x.clone()).to_data(),
            Tolerance::absolute(TOL),
        );
        let xb = x.clone().reshape([6, nf, nx]);
        let expected = Tensor::cat(
            vec![
                xb.clone().narrow(1, 0, 1) + xb.clone().narrow(1, 2, 1),
                xb.clone().narrow(1, 0, 1).zeros_like(),
                -xb.clone().narrow(1, 1, 1),
            ],
            1,
        );
        fast.reshape([6, nf, nx])
            .to_data()
            .assert_approx_eq::<f32>(&expected.to_data(), Tolerance::absolute(TOL));
        // Per-coordinate: block 1, coordinate 3 becomes 5 * x[block 1, coord 3].
        let out = per_coord.forward(x).reshape([6, nf, nx]);
        out.narrow(1, 1, 1)
            .narrow(2, 3, 1)
            .to_data()
            .assert_approx_eq::<f32>(
                &(xb.narrow(1, 1, 1).narrow(2, 3, 1) * 5.0).to_data(),
                Tolerance::absolute(TOL),
            );
    }
}
