//! The group-norm over the first `D` dims of a row (docs/construction.md §3.4).

use burn::tensor::{backend::Backend, Tensor};

use crate::{hsplit::DimWise, precision::in_float64};

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

/// The constructed first-order norm backward of docs/construction.md §6.6 on the token rows `dz`
/// (`γ ⊙ dy` in `[0, D)`, `ẑ` at `memory_index`, `x` at `memory_index + D`): `shift_in` forms
/// `dz/s + x`; the group norm `norm` computes `f(dz/s + x)` and, as the paper's module does (App. F),
/// `f(x)` from the stored `x`, written into the `ẑ` slot that `shift_out` reads (the stored `ẑ` was
/// rounded to the state's precision, which `s` would multiply); `shift_out` forms
/// `s f(dz/s + x) − s f(x)`; the stored `ẑ` then passes through like the rest of the memory. The
/// chain runs in float64 arithmetic on float32 states ([`in_float64`]). Shared by the LayerNorm and
/// RMSNorm backward, which differ only in `norm`.
///
/// # Shapes
/// * `dz`: `[batch_size, T, Ds]` → `[batch_size, T, Ds]`
pub fn constructed_norm_difference<B: Backend>(
    dz: Tensor<B, 3>,
    shift_in: &DimWise<B>,
    shift_out: &DimWise<B>,
    d_model: usize,
    memory_index: usize,
    norm: impl Fn(Tensor<B, 3>) -> Tensor<B, 3>,
) -> Tensor<B, 3> {
    let (d, mem) = (d_model, memory_index);
    in_float64(dz, |dz| {
        let zhat = dz.clone().narrow(2, mem, d);
        let shifted = shift_in.forward(dz);
        let [batch_size, n_rows, _] = shifted.dims();
        let f_x = norm(shifted.clone().narrow(2, mem + d, d));
        let normed = norm(shifted.slice_assign([0..batch_size, 0..n_rows, mem..mem + d], f_x));
        shift_out
            .forward(normed)
            .slice_assign([0..batch_size, 0..n_rows, mem..mem + d], zhat)
    })
}
