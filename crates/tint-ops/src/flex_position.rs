//! The position term of a TinT attention's q, k or v added in one pass, on burn-flex.
//!
//! The generic form ([`crate::attention::PositionProjection::term`] and an add) builds the term
//! `[n_rows, heads · d]` head after head with a `cat` of scaled copies and zero blocks, repeats it
//! over the batch with another `cat`, and adds it to the content projection: three passes over a
//! state-sized tensor. Here each element of the content is updated once, in place when the content
//! tensor is not shared: `c + t` with `t` the position row (`λ = 1`), its product with `λ as
//! element` (other `λ`) or `+0.0` (`λ = 0`) — the generic form's operations, so the sums are equal
//! bit for bit (tested in the module's tests against the generic form).

use burn::tensor::TensorData;
use burn_flex::FlexTensor;

use crate::flex_host::{accumulate, with_element, HostElement};

/// The rows of a position term: `pos[r] = W^p[index[r], column..column + d] + b[column..column + d]`
/// (the one-hot row gather and the bias add of `PositionProjection::position_rows`, one add per
/// element as there).
pub(crate) struct PositionRows<'a> {
    /// `W^p`, `[Pd, 3d]`.
    pub weight: &'a FlexTensor,
    /// `b`, `[3d]`.
    pub bias: &'a FlexTensor,
    /// The position (row of `W^p`) of each row.
    pub index: &'a [usize],
    /// First column of q's, k's or v's part.
    pub column: usize,
}

/// `content + term` where the term of head `h` is `lambda[h] · pos`, or `content` back (`Err`)
/// where the kernel does not apply (an element type other than f32 / f64, shapes that do not
/// match, an index out of range, or an operand whose rows are not stored contiguously).
///
/// # Shapes
/// * `content`: `[batch_size, n_rows, lambda.len() · d]`, `pos`: `n_rows` rows of `d` → as `content`
pub(crate) fn add_head_terms(
    content: FlexTensor,
    pos: PositionRows<'_>,
    lambda: &[f64],
) -> Result<FlexTensor, FlexTensor> {
    let shapes = (
        <[usize; 3]>::try_from(content.layout().shape().to_vec()),
        <[usize; 2]>::try_from(pos.weight.layout().shape().to_vec()),
        pos.weight.layout().contiguous_offsets(),
        pos.bias.layout().contiguous_offsets(),
        content.layout().contiguous_offsets(),
    );
    let (
        Ok([batch_size, n_rows, width]),
        Ok([n_positions, three_d]),
        Some(weight_range),
        Some(bias_range),
        Some(range),
    ) = shapes
    else {
        return Err(content);
    };
    let d = width / lambda.len().max(1);
    let fits = pos.index.len() == n_rows
        && lambda.len() * d == width
        && d * 3 == three_d
        && pos.column + d <= three_d
        && bias_range.1 - bias_range.0 == three_d
        && pos.index.iter().all(|&i| i < n_positions)
        && content.dtype() == pos.weight.dtype()
        && content.dtype() == pos.bias.dtype();
    if !fits {
        return Err(content);
    }
    let rows = batch_size * n_rows;
    let mut content = content;
    // In place when the content is not shared (a fresh projection: `None`), on a copy otherwise.
    let copy = with_element!(content.dtype(), E => {
        let weight = &pos.weight.storage::<E>()[weight_range.0..weight_range.1];
        let bias = &pos.bias.storage::<E>()[bias_range.0 + pos.column..][..d];
        let mut rows_of_pos: Vec<E> = Vec::with_capacity(n_rows * d);
        for &i in pos.index {
            let w = &weight[i * three_d + pos.column..][..d];
            rows_of_pos.extend(w.iter().zip(bias).map(|(&w, &b)| w + b));
        }
        match content.try_storage_mut::<E>() {
            Some(values) => {
                add_terms(&mut values[range.0..range.1], &rows_of_pos, lambda, rows, d);
                None
            }
            None => {
                let mut values = content.storage::<E>()[range.0..range.1].to_vec();
                add_terms(&mut values, &rows_of_pos, lambda, rows, d);
                Some(FlexTensor::from_data(TensorData::new(values, [batch_size, n_rows, width])))
            }
        }
    });
    match copy {
        None => Err(content),
        Some(None) => Ok(content),
        Some(Some(sum)) => Ok(sum),
    }
}

/// Adds the head terms to `values` (`rows` rows of `lambda.len() · d`; row `r` takes position row
/// `r % n_pos_rows`, the term repeated over the batch).
fn add_terms<E: HostElement>(values: &mut [E], pos: &[E], lambda: &[f64], rows: usize, d: usize) {
    let width = lambda.len() * d;
    let pos_rows = pos.len() / d.max(1);
    for row in 0..rows {
        let p = &pos[(row % pos_rows.max(1)) * d..][..d];
        let out = &mut values[row * width..(row + 1) * width];
        for (head, &l) in out.chunks_exact_mut(d.max(1)).zip(lambda) {
            if l == 0.0 {
                head.iter_mut().for_each(|c| *c = *c + E::default());
            } else {
                accumulate(head, p, l);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{PositionProjectionBuilder, Qkv};
    use crate::testing::{element_bits, signed_zero_normals, TestBackend};
    use burn::tensor::{DType, Int, Tensor};

    /// `add_term` equals the generic form (term built, repeated over the batch and added) bit
    /// for bit: λ of 0, 1, an exact and an inexact value, every one of q, k, v, a range of heads,
    /// f32 and f64, batch sizes 1 and 2, with the content fresh (added in place) and shared
    /// (added on a copy, the shared tensor left as it was).
    #[test]
    fn position_term_kernel_equals_the_generic_form_bit_for_bit() {
        let device = Default::default();
        let (pd, d, nh, n_rows) = (7, 4, 5, 6);
        let mut builder = PositionProjectionBuilder::zeros(pd, d, nh);
        let mut seed = 0.37_f64;
        for which in [Qkv::Query, Qkv::Key, Qkv::Value] {
            for position in 0..pd {
                for coord in 0..d {
                    seed = (seed * 997.0 + 0.123).fract();
                    // Every seventh weight -0.0: `-0.0 + b` is where a skipped bias add shows.
                    let value = if (position + coord) % 7 == 0 {
                        -0.0
                    } else {
                        seed - 0.5
                    };
                    builder.set(which, position, coord, value);
                }
            }
            for (head, lambda) in [0.0, 1.0, -2.5, 0.3, 1.0].into_iter().enumerate() {
                builder.set_lambda(which, head, lambda);
            }
        }
        let index: Vec<i64> = vec![3, 0, 6, 6, 1, 2];
        let position_index =
            Tensor::<TestBackend, 1, Int>::from_data(TensorData::new(index, [n_rows]), &device);
        for dtype in [DType::F32, DType::F64] {
            let mut positions = builder.clone().build::<TestBackend>(dtype, &device);
            // The construction's bias is zero; a non-zero one checks that the kernel adds it
            // where the generic form does.
            positions.bias = burn::module::Param::from_tensor(signed_zero_normals([3 * d], dtype));
            for batch_size in [1, 2] {
                for heads in [0..nh, 1..4, 2..3] {
                    for which in [Qkv::Query, Qkv::Key, Qkv::Value] {
                        let content =
                            signed_zero_normals([batch_size, n_rows, heads.len() * d], dtype);
                        let generic = positions.add_term_generic(
                            content.clone(),
                            which,
                            position_index.clone(),
                            heads.clone(),
                        );
                        let before = element_bits(content.clone());
                        let shared = positions.add_term(
                            content.clone(),
                            which,
                            position_index.clone(),
                            heads.clone(),
                        );
                        assert_eq!(element_bits(content.clone()), before, "shared content kept");
                        let fresh = positions.add_term(
                            content.clone() * 1.0,
                            which,
                            position_index.clone(),
                            heads.clone(),
                        );
                        let expected = element_bits(generic);
                        assert_eq!(
                            element_bits(shared),
                            expected,
                            "{dtype:?} B {batch_size} {heads:?} {which:?}"
                        );
                        assert_eq!(
                            element_bits(fresh),
                            expected,
                            "{dtype:?} B {batch_size} {heads:?} {which:?}"
                        );
                    }
                }
            }
        }
    }
}
