//! A segment plan ([`crate::segment::Segment`]) evaluated in one pass over the rows, on burn-flex.
//!
//! The generic form ([`crate::hsplit::apply_segments`]) builds one tensor per segment (a copy of a
//! column view, a zero block, a sum of scaled views, a column `select`, a block's matmul) and a
//! `cat` that copies them all once more: for the `[P + T, Ds]` states of the constructed
//! execution, most of them mostly zero blocks, that is two to four passes over every output
//! element, one op each. Here every output row is written once, segment by segment, straight
//! from the input row (and from the matmul outputs of the dense blocks, which the caller computes
//! as before). Each element is computed by the same float operations in the same order as the
//! generic form — a copy, `+0.0`, `x · (coef as element)` (no product when `coef == 1`) summed
//! term by term from the first, a gathered copy — so the outputs are equal bit for bit (tested in
//! the module's tests against the generic form on every kind of segment, strided inputs, f32 and
//! f64).

use burn::tensor::TensorData;
use burn_flex::FlexTensor;

use crate::flex_host::{accumulate, scale, with_element, HostElement, Rows};

use crate::segment::Segment;

/// `x` `[batch_size, n_rows, width]` through `plan`, or `None` where the kernel does not apply
/// (an element type other than f32 / f64, or an input or block output whose columns are not
/// adjacent in storage). `dense[i]` holds the `[batch_size · n_rows, len]` output of the split-wise
/// block of segment `i` when that segment is [`Segment::Dense`] or [`Segment::PartialDense`].
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, width]` → `[batch_size, n_rows, Σ segment lengths]`
pub(crate) fn apply(
    x: &FlexTensor,
    plan: &[Segment],
    dense: &[Option<FlexTensor>],
) -> Option<FlexTensor> {
    let dims = x.layout().shape().to_vec();
    let [batch_size, n_rows, input_width] = <[usize; 3]>::try_from(dims).ok()?;
    let rows = batch_size * n_rows;
    let input = Rows::of(x)?;
    let blocks: Vec<Option<Rows>> = dense
        .iter()
        .map(|block| match block {
            Some(block) if block.dtype() == x.dtype() => Rows::of(block).map(Some),
            Some(_) => None,
            None => Some(None),
        })
        .collect::<Option<_>>()?;
    let out_width: usize = plan.iter().map(Segment::len).sum();
    let shape = [batch_size, n_rows, out_width];
    let data = with_element!(x.dtype(), E => {
        let block_storage: Vec<&[E]> = dense
            .iter()
            .map(|b| b.as_ref().map_or(&[][..], |b| b.storage::<E>()))
            .collect();
        let out = write_rows(
            x.storage::<E>(),
            (&input, input_width),
            &block_storage,
            &blocks,
            plan,
            rows,
            out_width,
        );
        TensorData::new(out, shape)
    })?;
    Some(FlexTensor::from_data(data))
}

/// Pushes `Σ coef · term` over the terms, summed from the first as the generic form's fold of
/// `mul_scalar` and `+` does; `len` zeros when there is no term (a sum of absent blocks).
fn push_sum<'a, E: HostElement + 'a>(
    out: &mut Vec<E>,
    mut terms: impl Iterator<Item = (&'a [E], f64)>,
    len: usize,
) {
    let from = out.len();
    match terms.next() {
        None => out.resize(from + len, E::default()),
        Some((first, coef)) => {
            out.extend_from_slice(first);
            let acc = &mut out[from..];
            scale(acc, coef);
            for (term, coef) in terms {
                accumulate(acc, term, coef);
            }
        }
    }
}

/// The output rows, each written once, segment by segment.
fn write_rows<E: HostElement>(
    input: &[E],
    (input_rows, input_width): (&Rows, usize),
    block_storage: &[&[E]],
    block_rows: &[Option<Rows>],
    plan: &[Segment],
    rows: usize,
    out_width: usize,
) -> Vec<E> {
    let mut out: Vec<E> = Vec::with_capacity(rows * out_width);
    for row in 0..rows {
        let start = input_rows.start_of(row);
        for (i, segment) in plan.iter().enumerate() {
            match segment {
                Segment::Copy { source, len } => {
                    out.extend_from_slice(&input[start + source..start + source + len]);
                }
                Segment::Zero { len } => out.resize(out.len() + len, E::default()),
                Segment::Sum { terms, len } => push_sum(
                    &mut out,
                    terms.iter().map(|&(source, coef)| {
                        (&input[start + source..start + source + len], coef)
                    }),
                    *len,
                ),
                Segment::Gather { index } => {
                    let row_in = &input[start..start + input_width];
                    let from = out.len();
                    out.resize(from + index.len(), E::default());
                    out[from..]
                        .iter_mut()
                        .zip(index)
                        .for_each(|(o, &column)| *o = row_in[column]);
                }
                Segment::Dense { .. } | Segment::PartialDense { .. } => {
                    // Columns `[offset, offset + width)` of the block's output row (all of them
                    // for a whole block).
                    let (offset, width) = match segment {
                        Segment::PartialDense { offset, width, .. } => (*offset, *width),
                        other => (0, other.len()),
                    };
                    let block = block_rows[i].as_ref().expect("a dense block's output");
                    let from = block.start_of(row) + offset;
                    out.extend_from_slice(&block_storage[i][from..from + width]);
                }
            }
        }
    }
    out
}

/// A dimension-wise plan (copies, zeros and sums of whole blocks) applied to head-major input in
/// which only blocks `blocks` are present, the others zero: [`crate::hsplit::DimWise::forward_heads`]
/// (the merge of attention heads and `c_proj`) with every output row written once. The present
/// blocks may come in `parts` (consecutive runs of heads, such as the two halves of the heads that
/// the attention computes as parallel tasks), read where they lie instead of joined first. `None`
/// where the kernel does not apply (an element type other than f32 / f64, parts of different
/// shapes or dtypes, a head row whose columns are not adjacent in storage, negative strides, or a
/// segment other than a copy, a zero or a sum).
///
/// # Shapes
/// * `parts`: `[batch_size, n_i, n_rows, block_size]` with `Σ n_i = blocks.len()`
///   → `[batch_size, n_rows, Σ segment lengths]`
pub(crate) fn apply_heads(
    parts: &[FlexTensor],
    plan: &[Segment],
    blocks: core::ops::Range<usize>,
) -> Option<FlexTensor> {
    let first = parts.first()?;
    let [batch_size, _, n_rows, block_size] =
        <[usize; 4]>::try_from(first.layout().shape().to_vec()).ok()?;
    let unsigned = |s: isize| usize::try_from(s).ok();
    let mut head_parts = Vec::with_capacity(parts.len());
    let mut next_block = blocks.start;
    for part in parts {
        let layout = part.layout();
        let [b, n_heads, rows, width] = <[usize; 4]>::try_from(layout.shape().to_vec()).ok()?;
        if (b, rows, width) != (batch_size, n_rows, block_size) || part.dtype() != first.dtype() {
            return None;
        }
        let [s_batch, s_head, s_row] = match layout.strides() {
            &[s_batch, s_head, s_row, column] if column == 1 || block_size <= 1 => {
                [unsigned(s_batch)?, unsigned(s_head)?, unsigned(s_row)?]
            }
            _ => return None,
        };
        head_parts.push(HeadPart {
            blocks: next_block..next_block + n_heads,
            start: layout.start_offset(),
            s_batch,
            s_head,
            s_row,
        });
        next_block += n_heads;
    }
    if next_block != blocks.end
        || plan.iter().any(|s| {
            !matches!(
                s,
                Segment::Zero { .. } | Segment::Copy { .. } | Segment::Sum { .. }
            )
        })
    {
        return None;
    }
    let heads_rows = HeadRows {
        parts: head_parts,
        block_size,
    };
    let out_width: usize = plan.iter().map(Segment::len).sum();
    let shape = [batch_size, n_rows, out_width];
    let data = with_element!(first.dtype(), E => {
        let storage: Vec<&[E]> = parts.iter().map(|part| part.storage::<E>()).collect();
        TensorData::new(
            write_head_rows(&storage, &heads_rows, plan, batch_size, n_rows, out_width),
            shape,
        )
    })?;
    Some(FlexTensor::from_data(data))
}

/// Where the present blocks `blocks` of one part lie in its storage.
struct HeadPart {
    blocks: core::ops::Range<usize>,
    start: usize,
    s_batch: usize,
    s_head: usize,
    s_row: usize,
}

/// Row `row` of present block `block` of batch entry `batch` in the head-major parts.
struct HeadRows {
    parts: Vec<HeadPart>,
    block_size: usize,
}

impl HeadRows {
    /// The part holding the row and the row's storage range there, or `None` for a block that is
    /// not present (zero).
    fn row(
        &self,
        batch: usize,
        block: usize,
        row: usize,
    ) -> Option<(usize, core::ops::Range<usize>)> {
        let (index, part) = self
            .parts
            .iter()
            .enumerate()
            .find(|(_, part)| part.blocks.contains(&block))?;
        let from = part.start
            + batch * part.s_batch
            + (block - part.blocks.start) * part.s_head
            + row * part.s_row;
        Some((index, from..from + self.block_size))
    }
}

/// The output rows of [`apply_heads`], each written once, segment by segment.
fn write_head_rows<E: HostElement>(
    heads: &[&[E]],
    rows: &HeadRows,
    plan: &[Segment],
    batch_size: usize,
    n_rows: usize,
    out_width: usize,
) -> Vec<E> {
    let nx = rows.block_size;
    let mut out: Vec<E> = Vec::with_capacity(batch_size * n_rows * out_width);
    for batch in 0..batch_size {
        for row in 0..n_rows {
            for segment in plan {
                match segment {
                    Segment::Zero { len } => out.resize(out.len() + len, E::default()),
                    Segment::Copy { source, len } => {
                        for block in source / nx..(source + len) / nx {
                            match rows.row(batch, block, row) {
                                Some((part, range)) => out.extend_from_slice(&heads[part][range]),
                                None => out.resize(out.len() + nx, E::default()),
                            }
                        }
                    }
                    Segment::Sum { terms, .. } => push_sum(
                        &mut out,
                        terms.iter().filter_map(|&(source, coef)| {
                            rows.row(batch, source / nx, row)
                                .map(|(part, range)| (&heads[part][range], coef))
                        }),
                        nx,
                    ),
                    Segment::Gather { .. }
                    | Segment::Dense { .. }
                    | Segment::PartialDense { .. } => {
                        unreachable!("apply_heads checked the plan's segments")
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hsplit::{apply_segments, apply_segments_generic, DimWiseBuilder};
    use crate::testing::{element_bits, signed_zero_normals as values, TestBackend};
    use burn::tensor::{DType, Distribution, Tensor};

    /// Every kind of segment: copies, zeros, sums with coefficients 1, an exact and an inexact
    /// one (rounded to f32 as flex rounds a scalar), gathers with a transposing and a repeating
    /// index, a dense block and part of one.
    fn plan(width: usize) -> Vec<Segment> {
        assert_eq!(width, 16);
        vec![
            Segment::Copy { source: 4, len: 4 },
            Segment::Zero { len: 3 },
            Segment::Sum {
                terms: vec![(0, 1.0), (8, -2.5), (12, 0.3)],
                len: 4,
            },
            Segment::Sum {
                terms: vec![(4, 0.7)],
                len: 4,
            },
            Segment::Gather {
                index: vec![0, 4, 8, 12, 1, 5, 9, 13],
            },
            Segment::Gather {
                index: vec![3, 3, 7, 15, 0],
            },
            Segment::Dense { block: 1, len: 8 },
            Segment::PartialDense {
                block: 0,
                len: 8,
                offset: 2,
                width: 5,
            },
        ]
    }

    /// The kernel equals the generic form bit for bit on contiguous and strided inputs (a row
    /// range and a column range of a wider batched state), f32 and f64, batch sizes 1 and 2.
    #[test]
    fn rows_kernel_equals_the_generic_form_bit_for_bit() {
        let device = Default::default();
        for dtype in [DType::F32, DType::F64] {
            let weight =
                Tensor::<TestBackend, 2>::random([8, 8], Distribution::Normal(0.0, 1.0), &device)
                    .cast(dtype);
            let dense = |_: usize, input: Tensor<TestBackend, 2>| input.matmul(weight.clone());
            for batch_size in [1, 2] {
                let wide = values([batch_size, 9, 21], dtype);
                let inputs = [
                    values([batch_size, 6, 16], dtype),
                    wide.clone().narrow(1, 2, 6).narrow(2, 3, 16),
                    wide.swap_dims(0, 0).narrow(2, 5, 16),
                ];
                for x in inputs {
                    let plan = plan(16);
                    let flex = crate::flex_host::into_flex(x.clone()).expect("flex");
                    let blocks: Vec<Option<FlexTensor>> = plan
                        .iter()
                        .map(|segment| match segment {
                            Segment::Dense { block, len }
                            | Segment::PartialDense { block, len, .. } => {
                                let rows = x.dims()[0] * x.dims()[1];
                                let input =
                                    x.clone().reshape([rows, 16]).narrow(1, block * len, *len);
                                crate::flex_host::into_flex(dense(*block, input)).ok()
                            }
                            _ => None,
                        })
                        .collect();
                    assert!(apply(&flex, &plan, &blocks).is_some(), "the kernel applies");
                    let fast = apply_segments(x.clone(), &plan, dense);
                    let generic = apply_segments_generic(x, &plan, dense);
                    assert_eq!(fast.dims(), generic.dims());
                    assert_eq!(
                        element_bits(fast),
                        element_bits(generic),
                        "{dtype:?}, B = {batch_size}"
                    );
                }
            }
        }
    }

    /// Where the kernel does not apply (an f16 state) `apply_segments` gives the generic form.
    #[test]
    fn other_element_types_take_the_generic_form() {
        let x = values([1, 3, 16], DType::F16);
        let plan = vec![
            Segment::Copy { source: 4, len: 4 },
            Segment::Zero { len: 2 },
        ];
        let flex = crate::flex_host::into_flex(x.clone()).expect("flex");
        assert!(apply(&flex, &plan, &[None, None]).is_none());
        let fast = apply_segments(x.clone(), &plan, |_, i| i);
        let generic = apply_segments_generic(x, &plan, |_, i| i);
        assert_eq!(
            fast.cast(DType::F32).into_data().to_vec::<f32>().unwrap(),
            generic
                .cast(DType::F32)
                .into_data()
                .to_vec::<f32>()
                .unwrap()
        );
    }

    /// The merge of heads and `c_proj`: the kernel equals the generic form bit for bit for all
    /// heads present and for a range of them (the others zero), contiguous heads and a head
    /// range of a wider tensor, f32 and f64, batch sizes 1 and 2.
    #[test]
    fn heads_kernel_equals_the_generic_form_bit_for_bit() {
        let device = Default::default();
        let (nf, nx) = (5, 4);
        // out0 = in0 + 0.3 in3, out1 = in1, out2 = 0, out3 = -in4 + in2 (a sum whose first term
        // may be absent), out4 = in4.
        let mut mix = DimWiseBuilder::zeros(nf, nx);
        mix.set_all_coords(0, 0, 1.0);
        mix.set_all_coords(0, 3, 0.3);
        mix.set_all_coords(1, 1, 1.0);
        mix.set_all_coords(3, 2, 1.0);
        mix.set_all_coords(3, 4, -1.0);
        mix.set_all_coords(4, 4, 1.0);
        for dtype in [DType::F32, DType::F64] {
            let op: crate::hsplit::DimWise<TestBackend> = mix.clone().build(dtype, &device);
            for batch_size in [1, 2] {
                for blocks in [0..nf, 1..4, 3..5] {
                    let n = blocks.len();
                    let contiguous = Tensor::<TestBackend, 4>::random(
                        [batch_size, n, 6, nx],
                        Distribution::Normal(0.0, 1.0),
                        &device,
                    )
                    .cast(dtype);
                    let wide = Tensor::<TestBackend, 4>::random(
                        [batch_size, n + 2, 6, nx],
                        Distribution::Normal(0.0, 1.0),
                        &device,
                    )
                    .cast(dtype);
                    for heads in [contiguous, wide.narrow(1, 1, n)] {
                        let flex = crate::flex_host::into_flex(heads.clone()).expect("flex");
                        assert!(apply_heads(&[flex], &op.plan, blocks.clone()).is_some());
                        let fast = op.forward_heads(heads.clone(), blocks.clone());
                        let generic = op.forward_heads_generic(heads.clone(), blocks.clone());
                        // The same heads in two parts, read where they lie.
                        let half = n / 2;
                        let parts = vec![
                            heads.clone().narrow(1, 0, half),
                            heads.narrow(1, half, n - half),
                        ];
                        let from_parts = op.forward_head_parts(parts, blocks.clone());
                        assert_eq!(
                            element_bits(from_parts),
                            element_bits(generic.clone()),
                            "parts"
                        );
                        assert_eq!(
                            element_bits(fast),
                            element_bits(generic),
                            "{dtype:?}, B = {batch_size}, blocks {blocks:?}"
                        );
                    }
                }
            }
        }
    }
}
