//! Plain-tensor building blocks shared by the functional reference and the simulator: LayerNorm
//! without affine, activations, and their first-order (finite-difference) or exact backward passes.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_ops::difference::{activation_difference, layer_norm_difference};

use crate::params::Activation;
use crate::step_config::DerivativeMode;

/// `sqrt(2 / pi)`, the constant of `gelu_new`.
const GELU_C: f64 = 0.797_884_560_802_865_4;
/// Cubic coefficient of `gelu_new`.
const GELU_A: f64 = 0.044_715;

/// Heads split out of the last dimension and moved before the sequence: `[.., seq_length, n ·
/// head_dim]` → `[.., n, seq_length, head_dim]` (`E = D + 1`, checked when compiled). One function for
/// the GPT-2 / OPT reference's batches (`[batch_size, seq_length, d_model]`) and the LLaMA
/// reference's sequence (`[seq_length, n · head_dim]`).
pub(crate) fn split_heads<B: Backend, const D: usize, const E: usize>(
    x: Tensor<B, D>,
    n: usize,
) -> Tensor<B, E> {
    const { assert!(E == D + 1 && D >= 2) };
    let dims = x.dims();
    let mut shape = [0; E];
    shape[..D - 1].copy_from_slice(&dims[..D - 1]);
    shape[D - 1] = n;
    shape[D] = dims[D - 1] / n;
    x.reshape(shape).swap_dims(D - 2, D - 1)
}

/// The inverse of [`split_heads`]: `[.., n, seq_length, head_dim]` → `[.., seq_length, n ·
/// head_dim]` (`E = D + 1`, checked when compiled).
pub(crate) fn merge_heads<B: Backend, const E: usize, const D: usize>(
    x: Tensor<B, E>,
) -> Tensor<B, D> {
    const { assert!(E == D + 1 && D >= 2) };
    let dims = x.dims();
    let mut shape = [0; D];
    shape[..D - 2].copy_from_slice(&dims[..E - 3]);
    shape[D - 2] = dims[E - 2];
    shape[D - 1] = dims[E - 3] * dims[E - 1];
    x.swap_dims(E - 3, E - 2).reshape(shape)
}

/// `f(x) = (x - mean) / sqrt(var + eps)` over the last dimension (biased variance, no affine).
///
/// # Shapes
/// `x`: `[batch_size, seq_length, d_model]` → same.
pub fn normalize<B: Backend>(x: Tensor<B, 3>, eps: f64) -> Tensor<B, 3> {
    let (var, mean) = x.clone().var_mean_bias(2);
    (x - mean) / var.add_scalar(eps).sqrt()
}

/// The auxiliary MLP non-linearity, element-wise: tint-ops' own (one definition, so the
/// executions and this reference round it alike).
///
/// # Shapes
/// `x`: any `[..]` → same.
pub fn activate<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    activation: Activation,
) -> Tensor<B, D> {
    tint_ops::activation::activate(activation.kind(), x)
}

/// Derivative of [`activate`], element-wise.
fn activation_derivative<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    activation: Activation,
) -> Tensor<B, D> {
    match activation {
        Activation::GeluNew => {
            let x2 = x.clone() * x.clone();
            let t = (x.clone() + x2.clone() * x.clone().mul_scalar(GELU_A))
                .mul_scalar(GELU_C)
                .tanh();
            let dinner = x2
                .mul_scalar(3.0 * GELU_A)
                .add_scalar(1.0)
                .mul_scalar(GELU_C);
            // d/dx 0.5 x (1 + t) = 0.5 (1 + t) + 0.5 x (1 - t^2) d(inner)/dx.
            t.clone().add_scalar(1.0).mul_scalar(0.5)
                + x.mul_scalar(0.5) * (t.clone() * t).neg().add_scalar(1.0) * dinner
        }
        Activation::Relu => {
            let dtype = x.dtype();
            x.greater_elem(0.0).float().cast(dtype)
        }
    }
}

/// Backward of the activation at pre-activation `u` for the output gradient `dy`:
/// `s (act(u + dy/s) - act(u))` (docs/construction.md §6.9), evaluated in the cancellation-free form of
/// [`activation_difference`], or `act'(u) dy`.
///
/// # Shapes
/// `u`, `dy`: `[batch_size, seq_length, d_inner]` → same.
pub fn activation_backward<B: Backend>(
    u: Tensor<B, 3>,
    dy: Tensor<B, 3>,
    activation: Activation,
    mode: DerivativeMode,
    scale: f64,
) -> Tensor<B, 3> {
    match mode {
        DerivativeMode::FiniteDifference => activation_difference(activation.kind(), u, dy, scale),
        DerivativeMode::Exact => activation_derivative(u, activation) * dy,
    }
}

/// Backward of a LayerNorm with gain `gamma` at input `x` for the output gradient `dy`:
/// `s (f(x + gamma dy / s) - f(x))` (docs/construction.md §6.6), evaluated in the cancellation-free form of
/// [`layer_norm_difference`], or the exact `J_f(x) (gamma dy)`.
///
/// # Shapes
/// `x`, `dy`: `[batch_size, seq_length, d_model]`; `gamma`: `[copies, 1, d_model]` → `[batch_size, seq_length, d_model]`.
pub fn layer_norm_backward<B: Backend>(
    x: Tensor<B, 3>,
    gamma: Tensor<B, 3>,
    dy: Tensor<B, 3>,
    eps: f64,
    mode: DerivativeMode,
    scale: f64,
) -> Tensor<B, 3> {
    let dz = dy * gamma;
    match mode {
        DerivativeMode::FiniteDifference => layer_norm_difference(x, dz, eps, scale),
        DerivativeMode::Exact => {
            let (var, mean) = x.clone().var_mean_bias(2);
            let inv_sigma = var.add_scalar(eps).sqrt().recip();
            let z = (x - mean) * inv_sigma.clone();
            // J v = (v - mean(v) - z mean(z v)) / sigma.
            let zv_mean = (z.clone() * dz.clone()).mean_dim(2);
            (dz.clone() - dz.mean_dim(2) - z * zv_mean) * inv_sigma
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Distribution, Tolerance};

    type TestBackend = burn::backend::Flex;

    /// Element `[b, h, t, i]` of the split heads is element `[b, t, h · head_dim + i]` of the
    /// input, for a batch (rank 3) and one sequence (rank 2), and merging gives the input back
    /// (layout only: equal to the bit).
    #[test]
    fn split_heads_moves_each_head_before_the_sequence_and_merge_undoes_it() {
        let device = Default::default();
        let (batch, seq, heads, head_dim) = (2, 3, 4, 5);
        let width = heads * head_dim;
        let values: Vec<f32> = (0..batch * seq * width).map(|v| v as f32).collect();
        let x = Tensor::<TestBackend, 1>::from_floats(values.as_slice(), &device)
            .reshape([batch, seq, width]);
        let split: Tensor<TestBackend, 4> = split_heads(x.clone(), heads);
        assert_eq!(split.dims(), [batch, heads, seq, head_dim]);
        let got: Vec<f32> = split.clone().into_data().to_vec().unwrap();
        for b in 0..batch {
            for h in 0..heads {
                for t in 0..seq {
                    for i in 0..head_dim {
                        let at = ((b * heads + h) * seq + t) * head_dim + i;
                        assert_eq!(got[at], values[(b * seq + t) * width + h * head_dim + i]);
                    }
                }
            }
        }
        let merged: Tensor<TestBackend, 3> = merge_heads(split.clone());
        assert_eq!(merged.into_data(), x.clone().into_data());
        // One sequence: the same as the first batch entry.
        let first: Tensor<TestBackend, 2> = x.clone().narrow(0, 0, 1).reshape([seq, width]);
        let split_one: Tensor<TestBackend, 3> = split_heads(first.clone(), heads);
        let expected = split.narrow(0, 0, 1).reshape([heads, seq, head_dim]);
        assert_eq!(split_one.clone().into_data(), expected.into_data());
        let merged_one: Tensor<TestBackend, 2> = merge_heads(split_one);
        assert_eq!(merged_one.into_data(), first.into_data());
    }

    /// Finite differences at scale s in the cancellation-free forms of tint-ops agree with the
    /// exact derivative to `|v|^2 |f''| / (2 s)`, without the round-off of a naive difference.
    /// LayerNorm's curvature grows as `1/sigma^2`, and 8 random values can have a small sigma: at
    /// s = 1e6 a CI run saw 1.3e-5. At s = 1e8 the truncation is ~1e-7 even then, so 1e-5 is far
    /// above it and far below the O(1) values.
    const FD_SCALE: f64 = 1e8;
    const FD_VS_EXACT_TOL: f64 = 1e-5;

    #[test]
    fn finite_differences_converge_to_exact_derivatives() {
        let device = Default::default();
        let x =
            Tensor::<TestBackend, 3>::random([2, 3, 8], Distribution::Normal(0.0, 1.0), &device)
                .cast(burn::tensor::DType::F64);
        let dy =
            Tensor::<TestBackend, 3>::random([2, 3, 8], Distribution::Normal(0.0, 1.0), &device)
                .cast(burn::tensor::DType::F64);
        let gamma =
            Tensor::<TestBackend, 3>::random([1, 1, 8], Distribution::Normal(1.0, 0.2), &device)
                .cast(burn::tensor::DType::F64);
        let tol = Tolerance::<f64>::absolute(FD_VS_EXACT_TOL);
        for act in [Activation::GeluNew, Activation::Relu] {
            let fd = activation_backward(
                x.clone(),
                dy.clone(),
                act,
                DerivativeMode::FiniteDifference,
                FD_SCALE,
            );
            let exact =
                activation_backward(x.clone(), dy.clone(), act, DerivativeMode::Exact, FD_SCALE);
            fd.into_data()
                .assert_approx_eq::<f64>(&exact.into_data(), tol);
        }
        let fd = layer_norm_backward(
            x.clone(),
            gamma.clone(),
            dy.clone(),
            1e-5,
            DerivativeMode::FiniteDifference,
            FD_SCALE,
        );
        let exact = layer_norm_backward(x, gamma, dy, 1e-5, DerivativeMode::Exact, FD_SCALE);
        fd.into_data()
            .assert_approx_eq::<f64>(&exact.into_data(), tol);
    }

    #[test]
    fn gelu_new_matches_its_formula_at_known_points() {
        let device = Default::default();
        let x = Tensor::<TestBackend, 1>::from_floats([0.0, 1.0, -2.0], &device);
        let y: Vec<f32> = activate(x, Activation::GeluNew)
            .into_data()
            .to_vec()
            .unwrap();
        // 0.5 x (1 + tanh(0.79788456 (x + 0.044715 x^3))) evaluated by hand.
        let expected = [0.0f32, 0.841_192, -0.045_402_3];
        for (a, b) in y.iter().zip(expected) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
}
