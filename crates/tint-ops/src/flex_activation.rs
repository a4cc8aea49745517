//! GPT-2's `gelu_new` in one pass per row, on burn-flex.
//!
//! The generic form ([`crate::activation::activate`]) is seven element-wise ops, each a pass over
//! the tensor: `x·x`, `·x`, `·c`, `x + …`, `·2k`, flex's `sigmoid` and `x · …`, and
//! [`crate::activation::activate_blocks`] joins the activated column blocks and zero blocks with a
//! `cat`. Here each output row is written once. Every value is the generic form's: the products
//! and sums are the same single IEEE operations in the same order (no fused multiply-add), the
//! scalars are converted as flex converts them (`as f32` for f32), and the sigmoid is flex's own —
//! `burn_flex::ops::exp_f32::sigmoid_in_place` for f32 (its patched `sigmoid`, equal to the
//! published scalar form), the published two-branch form with `f64::exp` for f64 — so the outputs
//! are equal bit for bit (tested in the module's tests against the generic form).

use burn::tensor::{DType, TensorData};
use burn_flex::FlexTensor;

use crate::flex_host::Rows;

/// `gelu_new` of the column blocks of `x` marked in `used` (blocks of `width / used.len()`
/// columns), zero in the others; `None` where the kernel does not apply (a dtype other than f32
/// or f64, columns not adjacent in storage, a width that `used` does not divide).
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, width]` → `[batch_size, n_rows, width]`
pub(crate) fn gelu_new_blocks(
    x: &FlexTensor,
    used: &[bool],
    cubic: f64,
    scale: f64,
) -> Option<FlexTensor> {
    let [batch_size, n_rows, width] = <[usize; 3]>::try_from(x.layout().shape().to_vec()).ok()?;
    if used.is_empty() || width % used.len() != 0 {
        return None;
    }
    let block = width / used.len();
    let rows = Rows::of(x)?;
    let shape = [batch_size, n_rows, width];
    let data = match x.dtype() {
        DType::F32 => {
            let (cubic, scale) = (cubic as f32, scale as f32);
            let out = write_rows(x.storage::<f32>(), &rows, shape, used, block, |x, out| {
                inner(x, out, cubic, scale);
                burn_flex::ops::exp_f32::sigmoid_in_place(out);
                times_x(x, out);
            });
            TensorData::new(out, shape)
        }
        DType::F64 => {
            let out = write_rows(x.storage::<f64>(), &rows, shape, used, block, |x, out| {
                inner(x, out, cubic, scale);
                out.iter_mut().for_each(|v| *v = sigmoid_f64(*v));
                times_x(x, out);
            });
            TensorData::new(out, shape)
        }
        _ => return None,
    };
    Some(FlexTensor::from_data(data))
}

/// flex's float64 `sigmoid` (`burn_flex::ops::activation`, `sigmoid_f64`).
fn sigmoid_f64(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `out = (x + x·x·x·cubic) · scale`, operation for operation as the generic form.
fn inner<E>(x: &[E], out: &mut [E], cubic: E, scale: E)
where
    E: Copy + core::ops::Add<Output = E> + core::ops::Mul<Output = E>,
{
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v + v * v * v * cubic) * scale;
    }
}

/// `out = x · out`.
fn times_x<E>(x: &[E], out: &mut [E])
where
    E: Copy + core::ops::Mul<Output = E>,
{
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v * *o;
    }
}

/// The output rows: each run of used blocks through `activate_run(input, output)`, zeros elsewhere.
fn write_rows<E: Copy + Default>(
    input: &[E],
    rows: &Rows,
    [batch_size, n_rows, width]: [usize; 3],
    used: &[bool],
    block: usize,
    activate_run: impl Fn(&[E], &mut [E]),
) -> Vec<E> {
    let mut out = vec![E::default(); batch_size * n_rows * width];
    for (row, out_row) in out.chunks_exact_mut(width.max(1)).enumerate() {
        let start = rows.start_of(row);
        let x = &input[start..start + width];
        let mut first = 0;
        while first < used.len() {
            let mut end = first;
            while end < used.len() && used[end] == used[first] {
                end += 1;
            }
            if used[first] {
                let columns = first * block..end * block;
                activate_run(&x[columns.clone()], &mut out_row[columns]);
            }
            first = end;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::activation::{activate_blocks, activate_blocks_generic};
    use crate::options::ActivationKind;
    use crate::testing::{element_bits, signed_zero_normals};
    use burn::tensor::DType;

    /// `gelu_new` through the kernel equals the generic form bit for bit: every block used,
    /// some of them, a contiguous and a strided input, f32 and f64, values from -12 to 12 (both
    /// branches of the sigmoid, its saturation), batch sizes 1 and 2.
    #[test]
    fn gelu_kernel_equals_the_generic_form_bit_for_bit() {
        for dtype in [DType::F32, DType::F64] {
            for batch_size in [1, 2] {
                let wide = signed_zero_normals([batch_size, 9, 40], dtype) * 4.0;
                let inputs = [
                    signed_zero_normals([batch_size, 7, 24], dtype) * 4.0,
                    wide.narrow(1, 1, 7).narrow(2, 5, 24),
                ];
                for x in inputs {
                    for used in [
                        vec![true; 4],
                        vec![true, false, true, true],
                        vec![false, true, false, false],
                    ] {
                        let fast = activate_blocks(ActivationKind::GeluNew, x.clone(), &used);
                        let generic =
                            activate_blocks_generic(ActivationKind::GeluNew, x.clone(), &used);
                        assert_eq!(
                            element_bits(fast),
                            element_bits(generic),
                            "{dtype:?} {used:?}"
                        );
                    }
                }
            }
        }
    }
}
