//! The residual sum of a LLaMA half-block on the token rows: dims `[0, D)` of the token rows of a
//! state plus those of a module output (docs/tint-llama.md; the residual connection of §7 of
//! docs/construction.md), prefix rows and the other dims left as they are.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_ops::layout;

use crate::simulator::add_rows;

/// `state` with its token-row dims `[0, D)` replaced by those of `state + other` (the same float
/// additions as a sum over the whole state, on contiguous copies of the token rows only: flex walks
/// a row- or column-range view element by element, docs/performance.md "Changes of 2026-11-25").
///
/// # Shapes
/// * `state`, `other`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
pub(super) fn add_token_residual<B: Backend>(
    state: Tensor<B, 3>,
    other: Tensor<B, 3>,
    n_prefixes: usize,
    d_model: usize,
) -> Tensor<B, 3> {
    let [batch_size, n_rows, _] = state.dims();
    let tokens = |t: Tensor<B, 3>| layout::token_rows(t, n_prefixes).narrow(2, 0, d_model);
    let sum = add_rows(tokens(state.clone()), tokens(other));
    state.slice_assign([0..batch_size, n_prefixes..n_rows, 0..d_model], sum)
}
