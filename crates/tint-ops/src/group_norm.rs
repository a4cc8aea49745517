//! The group-norm over the first `D` dims of a row (docs/construction.md §3.4).

use burn::tensor::{backend::Backend, Tensor};

/// `f(x) = (x - mean)/sqrt(var + eps)` (biased variance) on dims `< d_model`, identity elsewhere;
/// with gate value `w` (`tanh(g10)`, 1 for exact gates) the official form
/// `w (x - mu)/sqrt(eps + w var) + (1 - w) x` on dims `< d_model`.
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, d_sim]` → `[batch_size, n_rows, d_sim]`
pub fn group_norm_first<B: Backend>(
    x: Tensor<B, 3>,
    d_model: usize,
    eps: f64,
    gate_value: f64,
) -> Tensor<B, 3> {
    let [_, _, d_sim] = x.dims();
    let head = x.clone().narrow(2, 0, d_model);
    let normed = layer_norm_plain(head.clone(), eps, gate_value);
    let head = if gate_value == 1.0 {
        normed
    } else {
        normed + head * (1.0 - gate_value)
    };
    if d_sim == d_model {
        head
    } else {
        Tensor::cat(vec![head, x.narrow(2, d_model, d_sim - d_model)], 2)
    }
}

/// `w (x - mean)/sqrt(eps + w var)` over the last dim (`w = 1`: plain LayerNorm without affine).
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, d]` → `[batch_size, n_rows, d]`
pub fn layer_norm_plain<B: Backend>(x: Tensor<B, 3>, eps: f64, gate_value: f64) -> Tensor<B, 3> {
    let centered = x.clone() - x.mean_dim(2);
    let var = centered.clone().powi_scalar(2).mean_dim(2);
    let sigma = (var * gate_value + eps).sqrt();
    centered * gate_value / sigma
}
