//! Host-side (plain `Vec<f64>`) construction of weights, converted to tensors of the chosen dtype.

use burn::tensor::{backend::Backend, DType, Tensor, TensorData};

/// A tensor of `dtype` from row-major f64 values.
pub(crate) fn tensor_from_f64<B: Backend, const D: usize>(
    values: Vec<f64>,
    shape: [usize; D],
    dtype: DType,
    device: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(values, shape), (device, dtype))
}
