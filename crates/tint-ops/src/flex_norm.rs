//! The constructed norms' row normalisation in one pass per row, on burn-flex (float64).
//!
//! The generic form ([`crate::group_norm::layer_norm_plain`], [`crate::group_norm::rms_norm_plain`]
//! and the `cat` of [`crate::group_norm::NormKind::group_first`]) runs a mean, a broadcast
//! subtraction, a square, a second mean, a scalar product and a broadcast division, each a pass
//! over a `[batch_size, T, D]` tensor, then copies the row once more to join the untouched columns.
//! The constructed execution runs these chains in float64 ([`crate::precision`]). Here each row is
//! read and written once. Every value is flex's: its float64 `mean_dim` sums a row from `0.0` in
//! column order and divides by the length (`sum_dim` through `reduce_dim_impl`, then
//! `scalar_div`), `powi_scalar(2)` is `x · x`, and the scalar and element-wise ops are single IEEE
//! operations; the kernel does the same operations in the same order, so the outputs are equal
//! bit for bit (tested in the module's tests against the generic form). Float32 rows are summed by
//! flex's vectorised reduction in another order: they keep the generic form.

use burn::tensor::{DType, TensorData};
use burn_flex::FlexTensor;

use crate::flex_host::Rows;

/// `x` with its first `d_model` columns normalised with the group-norm weight `gate_value` (`f(x)`
/// of `NormKind::plain`: LayerNorm when `subtract_mean`, RMSNorm otherwise) and the other columns
/// copied, or `None` where the kernel does
/// not apply (a dtype other than float64, columns not adjacent in storage).
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, width]` → `[batch_size, n_rows, width]` (`d_model <= width`)
pub(crate) fn normalize_first(
    x: &FlexTensor,
    subtract_mean: bool,
    d_model: usize,
    eps: f64,
    gate_value: f64,
) -> Option<FlexTensor> {
    let [batch_size, n_rows, width] = <[usize; 3]>::try_from(x.layout().shape().to_vec()).ok()?;
    if x.dtype() != DType::F64 || d_model == 0 || d_model > width {
        return None;
    }
    let rows = Rows::of(x)?;
    let input = x.storage::<f64>();
    let mut out: Vec<f64> = Vec::with_capacity(batch_size * n_rows * width);
    let len = d_model as f64;
    for row in 0..batch_size * n_rows {
        let start = rows.start_of(row);
        let head = &input[start..start + d_model];
        let from = out.len();
        if subtract_mean {
            let mean = head.iter().fold(0.0, |acc, &v| acc + v) / len;
            out.extend(head.iter().map(|&v| v - mean));
        } else {
            out.extend_from_slice(head);
        }
        let centered = &mut out[from..];
        let mean_square = centered.iter().fold(0.0, |acc, &c| acc + c * c) / len;
        let sigma = (mean_square * gate_value + eps).sqrt();
        centered
            .iter_mut()
            .for_each(|c| *c = (*c * gate_value) / sigma);
        out.extend_from_slice(&input[start + d_model..start + width]);
    }
    Some(FlexTensor::from_data(TensorData::new(
        out,
        [batch_size, n_rows, width],
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group_norm::{layer_norm_plain_generic, rms_norm_plain_generic, NormKind};
    use crate::testing::{element_bits, signed_zero_normals, TestBackend};
    use burn::tensor::Tensor;

    /// Each norm equals the generic form bit for bit, with weight 1 and `tanh(10)`, on a
    /// contiguous and on a strided (column and row range of a wider state) input, for the
    /// whole row and for its first columns with the rest copied ([`NormKind::group_first`]).
    #[test]
    fn norm_kernel_equals_the_generic_form_bit_for_bit() {
        for batch_size in [1, 2] {
            let wide = signed_zero_normals([batch_size, 9, 21], DType::F64) * 3.0 + 0.5;
            let inputs = [
                signed_zero_normals([batch_size, 7, 12], DType::F64),
                wide.narrow(1, 1, 7).narrow(2, 4, 12),
            ];
            for x in inputs {
                for gate_value in [1.0, 10f64.tanh()] {
                    for (kind, generic) in [
                        (
                            NormKind::Layer,
                            layer_norm_plain_generic::<TestBackend> as fn(_, _, _) -> _,
                        ),
                        (NormKind::Rms, rms_norm_plain_generic::<TestBackend>),
                    ] {
                        let fast = kind.plain(x.clone(), 1e-5, gate_value);
                        let expected = generic(x.clone(), 1e-5, gate_value);
                        assert_eq!(
                            element_bits(fast),
                            element_bits(expected),
                            "{kind:?}, B {batch_size}"
                        );
                        let flex = crate::flex_host::into_flex(x.clone()).expect("flex");
                        let first =
                            normalize_first(&flex, kind == NormKind::Layer, 5, 1e-5, gate_value)
                                .expect("f64");
                        let first: Tensor<TestBackend, 3> = crate::flex_host::from_flex(first);
                        let head = generic(x.clone().narrow(2, 0, 5), 1e-5, gate_value);
                        let expected = Tensor::cat(vec![head, x.clone().narrow(2, 5, 7)], 2);
                        assert_eq!(
                            element_bits(first),
                            element_bits(expected),
                            "{kind:?} first 5"
                        );
                    }
                }
            }
        }
        // Float32 rows keep the generic form.
        let x = signed_zero_normals([1, 3, 8], DType::F32);
        let flex = crate::flex_host::into_flex(x).expect("flex");
        assert!(normalize_first(&flex, true, 8, 1e-5, 1.0).is_none());
    }
}
