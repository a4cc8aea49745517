//! Test helpers: random f64 states and the shapes the module tests run on.

use burn::tensor::{backend::Backend, DType, Distribution, Tensor};

use crate::{context::SimContext, dims::TintDims, options::TintOptions, prefix};

pub(crate) type TestBackend = burn::backend::Flex;

/// Small valid shapes: S = 1, 2, 3, 4 (D, H, Ds, P, Hs, Tmax, T).
pub(crate) fn test_dims() -> Vec<TintDims> {
    [
        (8, 2, 32, 8, 4, 10, 5),  // S = 1
        (8, 2, 32, 4, 4, 10, 6),  // S = 2
        (12, 3, 48, 4, 4, 10, 6), // S = 3, Ds = (S+1) D
        (16, 4, 80, 4, 5, 9, 7),  // S = 4
    ]
    .into_iter()
    .map(|(d, h, ds, p, hs, tmax, t)| TintDims::new(d, h, ds, p, hs, tmax, t).unwrap())
    .collect()
}

pub(crate) fn f64_options() -> TintOptions {
    TintOptions::default().with_float_dtype(DType::F64)
}

/// `options` with `dtype` as the float dtype of the constructed weights.
pub(crate) fn options_in(dtype: DType) -> TintOptions {
    TintOptions::default().with_float_dtype(dtype)
}

/// The f64 tensor rounded to `dtype` and back: the values a `dtype` module actually sees, so the f64
/// reference math and the module start from identical inputs (copies stay exactly comparable).
pub(crate) fn rounded<const D: usize>(
    x: Tensor<TestBackend, D>,
    dtype: DType,
) -> Tensor<TestBackend, D> {
    x.cast(dtype).cast(DType::F64)
}

/// A context whose training mask has the state dtype `dtype`.
pub(crate) fn context_in(
    dims: &TintDims,
    batch_size: usize,
    dtype: DType,
) -> SimContext<TestBackend> {
    let mask = train_mask(batch_size, dims.seq_length(), dims.seq_length() / 2).cast(dtype);
    SimContext::new(dims, mask, &Default::default()).unwrap()
}

pub(crate) fn random<const D: usize>(shape: [usize; D], std: f64) -> Tensor<TestBackend, D> {
    Tensor::<TestBackend, D>::random(shape, Distribution::Normal(0.0, std), &Default::default())
        .cast(DType::F64)
}

/// Training mask with the first `n_train` tokens of every sequence marked (plus one extra in
/// sequence 1 so sequences differ).
pub(crate) fn train_mask(
    batch_size: usize,
    seq_length: usize,
    n_train: usize,
) -> Tensor<TestBackend, 2> {
    let mut values = vec![0.0f64; batch_size * seq_length];
    for b in 0..batch_size {
        let n = (n_train + b).min(seq_length);
        for t in 0..n {
            values[b * seq_length + t] = 1.0;
        }
    }
    crate::host::tensor_from_f64(
        values,
        [batch_size, seq_length],
        DType::F64,
        &Default::default(),
    )
}

pub(crate) fn context(dims: &TintDims, batch_size: usize) -> SimContext<TestBackend> {
    let mask = train_mask(batch_size, dims.seq_length(), dims.seq_length() / 2);
    SimContext::new(dims, mask, &Default::default()).unwrap()
}

/// A state whose prefix rows hold `(weight, bias)` and whose token rows are random everywhere
/// (signal, memory and the junk between them).
pub(crate) fn state_with_linear(
    dims: &TintDims,
    weight: Tensor<TestBackend, 3>,
    bias: Tensor<TestBackend, 2>,
) -> Tensor<TestBackend, 3> {
    let [batch_size, _, _] = weight.dims();
    let prefix = prefix::write_linear(weight, bias, dims).unwrap();
    let tokens = random([batch_size, dims.seq_length(), dims.d_sim()], 1.0);
    Tensor::cat(vec![prefix, tokens], 1)
}

/// Max |a - b|.
pub(crate) fn max_abs_diff<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> f64 {
    (a - b).abs().max().into_scalar().elem::<f64>()
}

use burn::tensor::ElementConversion;

/// The bits of every element of an f32 or f64 tensor (widened to 64 bits), for tests that a
/// host kernel equals the generic form exactly.
pub(crate) fn element_bits<const D: usize>(x: Tensor<TestBackend, D>) -> Vec<u64> {
    let data = x.into_data();
    match data.dtype {
        DType::F32 => data
            .to_vec::<f32>()
            .expect("f32 data")
            .into_iter()
            .map(|v| u64::from(v.to_bits()))
            .collect(),
        DType::F64 => data
            .to_vec::<f64>()
            .expect("f64 data")
            .into_iter()
            .map(f64::to_bits)
            .collect(),
        other => panic!("element_bits: {other:?} is not f32 or f64"),
    }
}

/// Normal values of `dtype` with every fifth element `-0.0` (`c + 0.0` and sums of signed zeros
/// are where a reordered or skipped operation of a host kernel would show).
pub(crate) fn signed_zero_normals<const D: usize>(
    shape: [usize; D],
    dtype: DType,
) -> Tensor<TestBackend, D> {
    let device = Default::default();
    let x = Tensor::<TestBackend, D>::random(shape, Distribution::Normal(0.0, 1.0), &device);
    let n = x.shape().num_elements() as i64;
    let every_fifth = Tensor::<TestBackend, 1, burn::tensor::Int>::arange(0..n, &device)
        .remainder_scalar(5)
        .equal_elem(0)
        .reshape(shape);
    x.mask_fill(every_fifth, -0.0).cast(dtype)
}
