//! The two mends of the vendored burn-flex (vendor/README.md, "burn-flex 0.21.0"), checked through
//! burn's tensor API on the `flex` backend: copies of strided views (the row-run copy of
//! `FlexTensor::copy_contiguous`) give the elements of the view, and fresh zero tensors
//! (`FlexTensor::empty`, stored at their element's alignment) hold zeros of every element size.
//! Exact: copies and zeros move values, so every element must be bit-equal (tolerance 0).

use burn::{
    backend::Flex,
    tensor::{DType, Int, Tensor, TensorData},
};

type B = Flex;

/// `[d0, d1, d2]` with element `(i, j, k)` = its row-major index, exact in f32 below 2²⁴.
fn counting(dims: [usize; 3]) -> Tensor<B, 3> {
    let n = dims.iter().product::<usize>();
    let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
    Tensor::from_data(TensorData::new(values, dims), &Default::default())
}

/// The elements of a `[d0, d1, d2]` counting tensor's view, row-major over the view's indices,
/// where `source(a, b, c)` maps a view index to the source index `(i, j, k)`.
fn expected(
    dims: [usize; 3],
    view: [usize; 3],
    source: impl Fn(usize, usize, usize) -> (usize, usize, usize),
) -> Vec<f32> {
    let mut out = Vec::new();
    for a in 0..view[0] {
        for b in 0..view[1] {
            for c in 0..view[2] {
                let (i, j, k) = source(a, b, c);
                out.push(((i * dims[1] + j) * dims[2] + k) as f32);
            }
        }
    }
    out
}

fn values(t: Tensor<B, 3>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().expect("f32 data")
}

/// Column ranges (inner runs of 20 ≥ the mend's 16 and of 8 < 16, which keep the tiled copy),
/// row ranges of a batched tensor, a column range of a row range, and a head split (a permuted
/// view whose innermost dimension is still contiguous) copy exactly the view's elements.
#[test]
fn strided_views_copy_their_elements() {
    let dims = [3, 7, 48];
    let x = counting(dims);
    for (start, len) in [(5, 20), (0, 16), (3, 8), (40, 8), (28, 20)] {
        let view = x.clone().narrow(2, start, len);
        assert_eq!(
            values(view),
            expected(dims, [3, 7, len], |a, b, c| (a, b, start + c)),
            "columns {start}..{}",
            start + len
        );
    }
    let rows = x.clone().narrow(1, 2, 4);
    assert_eq!(
        values(rows),
        expected(dims, [3, 4, 48], |a, b, c| (a, b + 2, c))
    );
    let block = x.clone().narrow(1, 1, 5).narrow(2, 16, 24);
    assert_eq!(
        values(block),
        expected(dims, [3, 5, 24], |a, b, c| (a, b + 1, c + 16))
    );
    // `[3, 7, 48]` → `[3, 7, 3, 16]` heads → `[3, 3, 7, 16]`: inner runs of 16, four dimensions.
    let heads = x.clone().reshape([3, 7, 3, 16]).swap_dims(1, 2);
    let got = heads.into_data().to_vec::<f32>().expect("f32 data");
    let mut want = Vec::new();
    for a in 0..3 {
        for h in 0..3 {
            for t in 0..7 {
                for c in 0..16 {
                    want.push(((a * 7 + t) * 48 + h * 16 + c) as f32);
                }
            }
        }
    }
    assert_eq!(got, want);
    // A transpose (innermost stride ≠ 1) still takes the tiled copy.
    let transposed = x.narrow(2, 0, 20).swap_dims(1, 2);
    assert_eq!(
        values(transposed),
        expected(dims, [3, 20, 7], |a, b, c| (a, c, b))
    );
}

/// Zero tensors of 8-, 4- and 2-byte floats and of integers are zeros, and take the values written
/// into them by later ops (a matmul's output buffer is such a tensor).
#[test]
fn fresh_tensors_are_zero_at_every_element_size() {
    let device = Default::default();
    for dtype in [DType::F64, DType::F32, DType::F16, DType::BF16] {
        let zeros = Tensor::<B, 2>::zeros([5, 33], (&device, dtype));
        let back = zeros
            .cast(DType::F32)
            .into_data()
            .to_vec::<f32>()
            .expect("f32");
        assert!(back.iter().all(|&v| v == 0.0), "{dtype:?}");
    }
    let ints = Tensor::<B, 2, Int>::zeros([4, 9], &device);
    assert!(ints.into_data().iter::<i64>().all(|v| v == 0));
    let a = Tensor::<B, 2>::from_data(
        TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2]),
        &device,
    );
    let product = a
        .clone()
        .matmul(a)
        .into_data()
        .to_vec::<f32>()
        .expect("f32");
    assert_eq!(product, vec![7.0, 10.0, 15.0, 22.0]);
}
