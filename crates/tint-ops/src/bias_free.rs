//! Bias-free auxiliary linear layers (LLaMA): the descent modules (docs/construction.md §6.3) also step the
//! bias slot of a prefix block, `b ← b − η Σ_train dy`. A bias-free layer has no `b`, so its block
//! keeps the slot at its stored value (0): the same as a LinearDescent whose bias-head value
//! weights are zero (no extra parameters, no extra layer). The LLaMA simulator builds exactly those
//! modules ([`crate::LinearBackwardDescent::with_bias_step_scale`] with scale 0), so nothing edits
//! a prefix block after a module wrote it; [`keep_bias`] is the same map written as a prefix edit,
//! kept for callers that hold a full-step descent module.

use burn::tensor::{backend::Backend, Tensor};

use crate::dims::TintDims;

/// `updated` with the bias slot (dims `[S·D, (S+1)·D)` of every prefix row) copied from `before`.
///
/// # Shapes
/// * `before`, `updated`: `[batch_size, P, Ds]` → `[batch_size, P, Ds]`
pub fn keep_bias<B: Backend>(
    before: &Tensor<B, 3>,
    updated: Tensor<B, 3>,
    dims: &TintDims,
) -> Tensor<B, 3> {
    let (d, s) = (dims.d_model(), dims.stack());
    let [batch_size, p, _] = updated.dims();
    let slot = s * d..(s + 1) * d;
    let old = before.clone().slice([0..batch_size, 0..p, slot.clone()]);
    updated.slice_assign([0..batch_size, 0..p, slot], old)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        prefix,
        testing::{max_abs_diff, random, test_dims},
    };

    #[test]
    fn keeps_the_old_bias_and_the_new_weight() {
        for dims in test_dims() {
            let d = dims.d_model();
            let (w0, b0) = (random([2, d, d], 1.0), random([2, d], 1.0));
            let (w1, b1) = (random([2, d, d], 1.0), random([2, d], 1.0));
            let before = prefix::write_linear(w0, b0.clone(), &dims).unwrap();
            let updated = prefix::write_linear(w1.clone(), b1, &dims).unwrap();
            let kept = keep_bias(&before, updated, &dims);
            let (w, b) = prefix::read_linear(kept.clone(), &dims).unwrap();
            assert_eq!(max_abs_diff(w, w1), 0.0);
            assert_eq!(max_abs_diff(b, b0.clone()), 0.0);
            // Every prefix row's copy is restored, not only prefix 0's.
            let expected = prefix::write_linear(random([2, d, d], 1.0), b0, &dims).unwrap();
            let slot = dims.stack() * d;
            assert_eq!(
                max_abs_diff(kept.narrow(2, slot, d), expected.narrow(2, slot, d)),
                0.0
            );
        }
    }
}
