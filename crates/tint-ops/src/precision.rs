//! Float64 evaluation of the constructed first-order differences on float32 states.
//!
//! The norm and activation backward of the constructed execution compute
//! `s · f(x + v/s) − s · f(x)` through their stored shift maps and a group norm (or the activation)
//! (docs/construction.md §6.6, §6.9). In float32 the two shifted terms agree in all but their last
//! bits when `|v/s|` is small against `|x|`, and `s` multiplies the round-off (docs/tint-llama.md,
//! "Float32 numerics"). The structured execution and the references evaluate the same difference in
//! a rewritten form ([`crate::difference`]); the constructed network cannot be rewritten without
//! changing its modules, so it runs the chain — the same stored maps, the same group norm — in
//! float64 arithmetic and rounds the result back to the state's precision. Inputs (the stored `x`,
//! `ẑ` and the incoming gradient) stay as stored: only the arithmetic of the chain is widened.

use burn::tensor::{backend::Backend, DType, Tensor};

/// Applies `chain` to `x` in float64 when `x` is a narrower float and the backend supports float64
/// on its device, casting the result back to `x`'s dtype; otherwise applies it as is (float64
/// states, or backends without float64 such as most wgpu devices).
///
/// # Shapes
/// * `x`: any `[..]` → the shape `chain` returns
pub fn in_float64<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    chain: impl FnOnce(Tensor<B, D>) -> Tensor<B, D>,
) -> Tensor<B, D> {
    let dtype = x.dtype();
    if dtype == DType::F64 || !B::supports_dtype(&x.device(), DType::F64) {
        return chain(x);
    }
    chain(x.cast(DType::F64)).cast(dtype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestBackend;
    use burn::tensor::TensorData;

    #[test]
    fn widens_a_float32_chain_and_rounds_back() {
        // `(a + 1e-4) − a` at a = 3000 with s = 1e4: in f32 the sum rounds to a multiple of
        // ulp(3000) = 2.4e-4, so the literal difference times s is 0 or ~2.4; in f64 it is 1
        // to ~1e-9 (tolerance 1e-6: f64 round-off of 3000 times s).
        let x = Tensor::<TestBackend, 1>::from_data(
            TensorData::new(vec![3000.0f32], [1]),
            (&Default::default(), DType::F32),
        );
        let chain = |t: Tensor<TestBackend, 1>| (t.clone().add_scalar(1e-4) - t).mul_scalar(1e4);
        let narrow = chain(x.clone()).into_data().to_vec::<f32>().unwrap()[0];
        let wide = in_float64(x.clone(), chain);
        assert_eq!(wide.dtype(), DType::F32);
        let wide = wide.into_data().to_vec::<f32>().unwrap()[0];
        assert!((wide - 1.0).abs() < 1e-6, "widened: {wide}");
        assert!(
            (narrow - 1.0).abs() > 0.5,
            "f32 chain only off by {}",
            narrow - 1.0
        );
    }

    #[test]
    fn leaves_float64_chains_alone() {
        let x = Tensor::<TestBackend, 1>::from_data(
            TensorData::new(vec![1.5f64], [1]),
            (&Default::default(), DType::F64),
        );
        let out = in_float64(x, |t| t.mul_scalar(2.0));
        assert_eq!(out.dtype(), DType::F64);
        assert_eq!(out.into_data().to_vec::<f64>().unwrap()[0], 3.0);
    }
}
