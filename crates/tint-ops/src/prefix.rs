//! Prefix layout (docs/construction.md §2.5): a `D x D` map `y = W x + b` stored in the `P` prefix rows.
//!
//! Prefix `p`, slot `k < S` holds row `W[p*S + k, :]` in dims `[k*D, (k+1)*D)`; the bias is written to
//! dims `[S*D, S*D + D)` of every prefix row (only prefix 0's copy is read or updated); other dims are 0.

use burn::tensor::{backend::Backend, Tensor};

use crate::{dims::TintDims, error::TintOpsError};

/// Writes a batch of `D x D` weights (out x in) and biases into prefix rows.
///
/// # Shapes
/// * `weight`: `[batch_size, D, D]`, `bias`: `[batch_size, D]` → `[batch_size, P, Ds]`
///
/// # Errors
/// [`TintOpsError::Shape`] if the shapes do not match `dims`.
pub fn write_linear<B: Backend>(
    weight: Tensor<B, 3>,
    bias: Tensor<B, 2>,
    dims: &TintDims,
) -> Result<Tensor<B, 3>, TintOpsError> {
    let (d, p, ds, s) = (
        dims.d_model(),
        dims.n_prefixes(),
        dims.d_sim(),
        dims.stack(),
    );
    let [batch_size, rows, cols] = weight.dims();
    if rows != d || cols != d {
        return Err(TintOpsError::Shape {
            what: "prefix weight",
            expected: vec![batch_size, d, d],
            actual: vec![batch_size, rows, cols],
        });
    }
    if bias.dims() != [batch_size, d] {
        return Err(TintOpsError::Shape {
            what: "prefix bias",
            expected: vec![batch_size, d],
            actual: bias.dims().to_vec(),
        });
    }
    let stacked = weight.reshape([batch_size, p, s * d]); // rows p*S..p*S+S of W, contiguous
    let biases = bias.unsqueeze_dim::<3>(1).repeat_dim(1, p); // [batch_size, P, D]
    let mut parts = vec![stacked, biases];
    let rest = ds - (s + 1) * d;
    if rest > 0 {
        parts.push(Tensor::zeros(
            [batch_size, p, rest],
            (&parts[0].device(), parts[0].dtype()),
        ));
    }
    Ok(Tensor::cat(parts, 2))
}

/// Writes LayerNorm `(gamma, beta)` as `W = diag(gamma)`, `b = beta`.
///
/// # Shapes
/// * `gamma`, `beta`: `[batch_size, D]` → `[batch_size, P, Ds]`
///
/// # Errors
/// [`TintOpsError::Shape`] if the shapes do not match `dims`.
pub fn write_layer_norm<B: Backend>(
    gamma: Tensor<B, 2>,
    beta: Tensor<B, 2>,
    dims: &TintDims,
) -> Result<Tensor<B, 3>, TintOpsError> {
    let [batch_size, d] = gamma.dims();
    if d != dims.d_model() {
        return Err(TintOpsError::Shape {
            what: "layer norm gamma",
            expected: vec![batch_size, dims.d_model()],
            actual: vec![batch_size, d],
        });
    }
    let eye: Tensor<B, 2> = Tensor::<B, 2>::eye(d, &gamma.device()).cast(gamma.dtype());
    let diag = eye.unsqueeze::<3>() * gamma.unsqueeze_dim::<3>(1); // [batch_size, D, D]
    write_linear(diag, beta, dims)
}

/// Reads the weight (out x in) and prefix 0's bias back from prefix rows.
///
/// # Shapes
/// * `prefix`: `[batch_size, P, Ds]` → (`[batch_size, D, D]`, `[batch_size, D]`)
///
/// # Errors
/// [`TintOpsError::Shape`] if `prefix` is not `[batch_size, P, Ds]`.
pub fn read_linear<B: Backend>(
    prefix: Tensor<B, 3>,
    dims: &TintDims,
) -> Result<(Tensor<B, 3>, Tensor<B, 2>), TintOpsError> {
    let (d, p, ds, s) = (
        dims.d_model(),
        dims.n_prefixes(),
        dims.d_sim(),
        dims.stack(),
    );
    let [batch_size, rows, cols] = prefix.dims();
    if rows != p || cols != ds {
        return Err(TintOpsError::Shape {
            what: "prefix rows",
            expected: vec![batch_size, p, ds],
            actual: vec![batch_size, rows, cols],
        });
    }
    let weight = prefix
        .clone()
        .narrow(2, 0, s * d)
        .reshape([batch_size, d, d]);
    let bias = prefix
        .narrow(1, 0, 1)
        .narrow(2, s * d, d)
        .reshape([batch_size, d]);
    Ok((weight, bias))
}
