//! The prefix layout of docs/construction.md §2.5: a `D x D` map `y = W x + b` (out x in) stored in the `P`
//! prefix rows. Prefix `p`, slot `k < S` holds row `W[p*S + k, :]` in dims `[k*D, (k+1)*D)`; the
//! bias is in dims `[S*D, (S+1)*D)` of every prefix row, only prefix 0's copy is read; the rest is 0.
//!
//! Writing and reading are pure copies, so every comparison here is **exact** (`==` on the f64
//! values): any tolerance would hide a misplaced element.

use burn::{
    backend::Flex,
    tensor::{DType, Tensor, TensorData},
};
use tint_ops::{prefix, TintDims, TintOpsError};

use crate::common::Rng;

type B = Flex;

/// Valid shapes `(D, H, Ds, P, Hs, Tmax, T)` with `S = 1, 2, 3, 4`, `Ds = (S+1) D` and `Ds > (S+1) D`
/// (zero tail), and the GPT-2 layout (`S = 3`, `Ds = 4D`) scaled down.
fn test_dims() -> Vec<TintDims> {
    [
        (8, 2, 32, 8, 4, 10, 5),  // S = 1, Ds = 4D > 2D: a zero tail
        (8, 2, 32, 4, 4, 10, 6),  // S = 2, Ds = 4D > 3D: a zero tail
        (12, 3, 48, 4, 4, 10, 6), // S = 3, Ds = (S+1) D: no tail
        (16, 4, 80, 4, 5, 9, 7),  // S = 4, Ds = (S+1) D
    ]
    .into_iter()
    .map(|(d, h, ds, p, hs, tmax, t)| TintDims::new(d, h, ds, p, hs, tmax, t).unwrap())
    .collect()
}

const BATCH: usize = 3;

fn tensor<const D: usize>(values: Vec<f64>, shape: [usize; D]) -> Tensor<B, D> {
    Tensor::from_data(
        TensorData::new(values, shape),
        (&Default::default(), DType::F64),
    )
}

fn to_host<const D: usize>(x: Tensor<B, D>) -> Vec<f64> {
    x.into_data().to_vec::<f64>().expect("f64 tensor")
}

/// Random `[BATCH, D, D]` weights and `[BATCH, D]` biases (host copies and tensors).
fn random_linear(rng: &mut Rng, d: usize) -> (Vec<f64>, Vec<f64>) {
    (rng.normals(BATCH * d * d, 1.0), rng.normals(BATCH * d, 1.0))
}

#[test]
fn write_then_read_round_trips_exactly() {
    let mut rng = Rng::new(0x5eed_0001);
    for dims in test_dims() {
        let d = dims.d_model();
        let (w, b) = random_linear(&mut rng, d);
        let rows = prefix::write_linear(
            tensor(w.clone(), [BATCH, d, d]),
            tensor(b.clone(), [BATCH, d]),
            &dims,
        )
        .unwrap();
        assert_eq!(rows.dims(), [BATCH, dims.n_prefixes(), dims.d_sim()]);
        let (w_back, b_back) = prefix::read_linear(rows, &dims).unwrap();
        assert_eq!(w_back.dims(), [BATCH, d, d]);
        assert_eq!(b_back.dims(), [BATCH, d]);
        assert_eq!(to_host(w_back), w, "weight round trip, {dims:?}");
        assert_eq!(to_host(b_back), b, "bias round trip, {dims:?}");
    }
}

/// Every element of the written prefix rows is where §2.5 says, and nothing else is non-zero.
#[test]
fn written_rows_follow_the_spec_layout() {
    let mut rng = Rng::new(0x5eed_0002);
    for dims in test_dims() {
        let (d, p, ds, s) = (
            dims.d_model(),
            dims.n_prefixes(),
            dims.d_sim(),
            dims.stack(),
        );
        assert_eq!(s * p, d, "S = D/P");
        let (w, b) = random_linear(&mut rng, d);
        let rows = to_host(
            prefix::write_linear(
                tensor(w.clone(), [BATCH, d, d]),
                tensor(b.clone(), [BATCH, d]),
                &dims,
            )
            .unwrap(),
        );
        for batch in 0..BATCH {
            for pre in 0..p {
                let row = &rows[(batch * p + pre) * ds..(batch * p + pre + 1) * ds];
                // Slot k: weight row p*S + k, all D input columns.
                for k in 0..s {
                    let w_row = pre * s + k;
                    let expected = &w[(batch * d + w_row) * d..(batch * d + w_row + 1) * d];
                    assert_eq!(
                        &row[k * d..(k + 1) * d],
                        expected,
                        "{dims:?}: batch {batch}, prefix {pre}, slot {k} must hold W[{w_row}, :]"
                    );
                }
                // Bias in every prefix row.
                assert_eq!(
                    &row[s * d..(s + 1) * d],
                    &b[batch * d..(batch + 1) * d],
                    "{dims:?}: batch {batch}, prefix {pre}: bias at dims [S*D, S*D + D)"
                );
                assert!(
                    row[(s + 1) * d..].iter().all(|&x| x == 0.0),
                    "{dims:?}: batch {batch}, prefix {pre}: dims >= (S+1) D must be 0"
                );
            }
            // Every weight row appears exactly once: prefix p, slot k <-> row p*S + k is a bijection.
            let mut seen = vec![false; d];
            for pre in 0..p {
                for k in 0..s {
                    assert!(!seen[pre * s + k]);
                    seen[pre * s + k] = true;
                }
            }
            assert!(seen.iter().all(|&x| x));
        }
    }
}

/// Only prefix 0's bias copy is read, and nothing outside `[0, (S+1) D)` of the rows is read.
#[test]
fn read_uses_prefix_zero_bias_and_ignores_other_dims() {
    let mut rng = Rng::new(0x5eed_0003);
    for dims in test_dims() {
        let (d, p, ds, s) = (
            dims.d_model(),
            dims.n_prefixes(),
            dims.d_sim(),
            dims.stack(),
        );
        let (w, b) = random_linear(&mut rng, d);
        let mut rows = to_host(
            prefix::write_linear(
                tensor(w.clone(), [BATCH, d, d]),
                tensor(b.clone(), [BATCH, d]),
                &dims,
            )
            .unwrap(),
        );
        // Junk in the other prefixes' bias copies and in the tail.
        for batch in 0..BATCH {
            for pre in 0..p {
                let row = &mut rows[(batch * p + pre) * ds..(batch * p + pre + 1) * ds];
                if pre > 0 {
                    row[s * d..(s + 1) * d].fill(1.0e3 + pre as f64);
                }
                row[(s + 1) * d..].fill(-7.0);
            }
        }
        let (w_back, b_back) = prefix::read_linear(tensor(rows, [BATCH, p, ds]), &dims).unwrap();
        assert_eq!(to_host(w_back), w, "{dims:?}: weight");
        assert_eq!(to_host(b_back), b, "{dims:?}: bias must come from prefix 0");
    }
}

/// LayerNorm `(gamma, beta)` is stored as `W = diag(gamma)`, `b = beta` (§2.5).
#[test]
fn layer_norm_is_written_as_a_diagonal_weight() {
    let mut rng = Rng::new(0x5eed_0004);
    for dims in test_dims() {
        let d = dims.d_model();
        let (gamma, beta) = (rng.normals(BATCH * d, 1.0), rng.normals(BATCH * d, 1.0));
        let rows = prefix::write_layer_norm(
            tensor(gamma.clone(), [BATCH, d]),
            tensor(beta.clone(), [BATCH, d]),
            &dims,
        )
        .unwrap();
        let mut diag = vec![0.0; BATCH * d * d];
        for batch in 0..BATCH {
            for i in 0..d {
                diag[(batch * d + i) * d + i] = gamma[batch * d + i];
            }
        }
        let expected = prefix::write_linear(
            tensor(diag.clone(), [BATCH, d, d]),
            tensor(beta.clone(), [BATCH, d]),
            &dims,
        )
        .unwrap();
        assert_eq!(to_host(rows.clone()), to_host(expected), "{dims:?}");
        let (w_back, b_back) = prefix::read_linear(rows, &dims).unwrap();
        assert_eq!(to_host(w_back), diag, "{dims:?}: diag(gamma)");
        assert_eq!(to_host(b_back), beta, "{dims:?}: beta");
    }
}

fn assert_shape_error(
    result: Result<impl core::fmt::Debug, TintOpsError>,
    what: &'static str,
    expected: &[usize],
    actual: &[usize],
) {
    let err = result.expect_err("a shape error");
    assert_eq!(
        err,
        TintOpsError::Shape {
            what,
            expected: expected.to_vec(),
            actual: actual.to_vec(),
        }
    );
    let message = err.to_string();
    assert!(
        message.contains(what)
            && message.contains(&format!("{expected:?}"))
            && message.contains(&format!("{actual:?}")),
        "the message must name the argument and both shapes: {message}"
    );
}

#[test]
fn wrong_shapes_are_shape_errors() {
    let dims = TintDims::new(8, 2, 32, 4, 4, 10, 6).unwrap(); // D = 8, P = 4, Ds = 32
    let zeros3 =
        |shape: [usize; 3]| Tensor::<B, 3>::zeros(shape, (&Default::default(), DType::F64));
    let zeros2 =
        |shape: [usize; 2]| Tensor::<B, 2>::zeros(shape, (&Default::default(), DType::F64));
    // write_linear: weight not D x D (either side), bias not [batch, D], batch mismatch.
    assert_shape_error(
        prefix::write_linear(zeros3([2, 8, 9]), zeros2([2, 8]), &dims),
        "prefix weight",
        &[2, 8, 8],
        &[2, 8, 9],
    );
    assert_shape_error(
        prefix::write_linear(zeros3([2, 7, 8]), zeros2([2, 8]), &dims),
        "prefix weight",
        &[2, 8, 8],
        &[2, 7, 8],
    );
    assert_shape_error(
        prefix::write_linear(zeros3([2, 8, 8]), zeros2([2, 4]), &dims),
        "prefix bias",
        &[2, 8],
        &[2, 4],
    );
    assert_shape_error(
        prefix::write_linear(zeros3([2, 8, 8]), zeros2([3, 8]), &dims),
        "prefix bias",
        &[2, 8],
        &[3, 8],
    );
    // read_linear: rows not [batch, P, Ds].
    assert_shape_error(
        prefix::read_linear(zeros3([2, 5, 32]), &dims),
        "prefix rows",
        &[2, 4, 32],
        &[2, 5, 32],
    );
    assert_shape_error(
        prefix::read_linear(zeros3([2, 4, 24]), &dims),
        "prefix rows",
        &[2, 4, 32],
        &[2, 4, 24],
    );
    // write_layer_norm: gamma not [batch, D]; beta checked as the bias.
    assert_shape_error(
        prefix::write_layer_norm(zeros2([2, 6]), zeros2([2, 8]), &dims),
        "layer norm gamma",
        &[2, 8],
        &[2, 6],
    );
    assert_shape_error(
        prefix::write_layer_norm(zeros2([2, 8]), zeros2([2, 6]), &dims),
        "prefix bias",
        &[2, 8],
        &[2, 6],
    );
    assert_shape_error(
        prefix::write_layer_norm(zeros2([2, 8]), zeros2([1, 8]), &dims),
        "prefix bias",
        &[2, 8],
        &[1, 8],
    );
}
