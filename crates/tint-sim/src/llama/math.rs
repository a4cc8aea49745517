//! RMSNorm and SwiGLU forward and backward (first-order finite differences, docs/construction.md §6.6 / paper
//! Def. J.5, or exact), on token-major activations `[seq_length, width]`.

use burn::tensor::activation::{sigmoid, silu};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_ops::difference::{rms_norm_difference, silu_difference};

use crate::config::DerivativeMode;

/// `f(x) = x / sqrt(mean(x²) + eps)` over the last dimension (RMSNorm without its gain).
///
/// # Shapes
/// `x`: `[seq_length, d_model]` → same.
pub fn rms_normalize<B: Backend>(x: Tensor<B, 2>, eps: f64) -> Tensor<B, 2> {
    let inv_rms = x
        .clone()
        .square()
        .mean_dim(1)
        .add_scalar(eps)
        .sqrt()
        .recip();
    x * inv_rms
}

/// RMSNorm with gain `gain`: `gain ⊙ f(x)`.
///
/// # Shapes
/// `x`: `[seq_length, d_model]`, `gain`: `[d_model]` → `[seq_length, d_model]`.
pub fn rms_norm<B: Backend>(x: Tensor<B, 2>, gain: &Tensor<B, 1>, eps: f64) -> Tensor<B, 2> {
    rms_normalize(x, eps) * gain.clone().unsqueeze_dim::<2>(0)
}

/// Backward of an RMSNorm with gain `gain` at input `x` for the output gradient `dy`:
/// `s (f(x + gain ⊙ dy / s) - f(x))` (the paper's Group-RMSnorm backward, Def. J.2 with F's
/// first-order rule; evaluated in the cancellation-free form of [`rms_norm_difference`]) or the exact `J_f(x) (gain ⊙ dy) = (v - z mean(z v)) / rms(x)`, `v = gain ⊙ dy`.
///
/// # Shapes
/// `x`, `dy`: `[seq_length, d_model]`, `gain`: `[d_model]` → `[seq_length, d_model]`.
pub fn rms_norm_backward<B: Backend>(
    x: Tensor<B, 2>,
    gain: &Tensor<B, 1>,
    dy: Tensor<B, 2>,
    eps: f64,
    mode: DerivativeMode,
    scale: f64,
) -> Tensor<B, 2> {
    let v = dy * gain.clone().unsqueeze_dim::<2>(0);
    match mode {
        DerivativeMode::FiniteDifference => rms_norm_difference(x, v, eps, scale),
        DerivativeMode::Exact => {
            let inv_rms = x
                .clone()
                .square()
                .mean_dim(1)
                .add_scalar(eps)
                .sqrt()
                .recip();
            let z = x * inv_rms.clone();
            let zv_mean = (z.clone() * v.clone()).mean_dim(1);
            (v - z * zv_mean) * inv_rms
        }
    }
}

/// Gradient of the summed loss with respect to an RMSNorm gain: `Σ_t train_t f(x_t) ⊙ dy_t`
/// (paper Def. F.2, gamma part).
///
/// # Shapes
/// `x`, `dy`: `[seq_length, d_model]`, `train`: `[seq_length, 1]` → `[d_model]`.
pub fn rms_gain_gradient<B: Backend>(
    x: Tensor<B, 2>,
    dy: Tensor<B, 2>,
    train: &Tensor<B, 2>,
    eps: f64,
) -> Tensor<B, 1> {
    (rms_normalize(x, eps) * dy * train.clone())
        .sum_dim(0)
        .squeeze_dim::<1>(0)
}

/// SwiGLU hidden state `silu(gate_pre) ⊙ up`.
///
/// # Shapes
/// `gate_pre`, `up`: `[seq_length, d_ff]` → same.
pub fn swiglu<B: Backend>(gate_pre: Tensor<B, 2>, up: Tensor<B, 2>) -> Tensor<B, 2> {
    silu(gate_pre) * up
}

/// Backward of `hidden = silu(gate_pre) ⊙ up` for the hidden-state gradient `d_hidden`; returns
/// `(d_gate_pre, d_up)`.
///
/// `d_up = d_hidden ⊙ silu(gate_pre)` is a product (exact in both modes, TinT's GLU layer).
/// `d_gate_pre` is `up ⊙ s (silu(gate_pre + d_hidden / s) - silu(gate_pre))` (paper Def. J.5 with
/// `ε = 1/s`; evaluated in the cancellation-free form of [`silu_difference`]) or the exact
/// `up ⊙ silu'(gate_pre) ⊙ d_hidden`.
///
/// # Shapes
/// `gate_pre`, `up`, `d_hidden`: `[seq_length, d_ff]` → two `[seq_length, d_ff]`.
pub fn swiglu_backward<B: Backend>(
    gate_pre: Tensor<B, 2>,
    up: Tensor<B, 2>,
    d_hidden: Tensor<B, 2>,
    mode: DerivativeMode,
    scale: f64,
) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let act = silu(gate_pre.clone());
    let d_up = d_hidden.clone() * act.clone();
    let d_gate_pre = match mode {
        DerivativeMode::FiniteDifference => silu_difference(gate_pre, d_hidden, scale) * up,
        DerivativeMode::Exact => {
            // silu'(x) = σ(x) (1 + x (1 - σ(x))).
            let sig = sigmoid(gate_pre.clone());
            let derivative = sig.clone() * (gate_pre * sig.neg().add_scalar(1.0)).add_scalar(1.0);
            derivative * d_hidden * up
        }
    };
    (d_gate_pre, d_up)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{DType, Distribution, TensorData, Tolerance};

    type TestBackend = burn::backend::Flex;

    fn random64(shape: [usize; 2], mean: f64, std: f64) -> Tensor<TestBackend, 2> {
        Tensor::<TestBackend, 2>::random(
            shape,
            Distribution::Normal(mean, std),
            &Default::default(),
        )
        .cast(DType::F64)
    }

    fn values(t: Tensor<TestBackend, 2>) -> Vec<f64> {
        t.into_data().convert::<f64>().to_vec().unwrap()
    }

    /// Central differences in f64 with step 1e-6: truncation ~1e-12 · |f'''|, round-off
    /// ~1e-16 / 1e-6 = 1e-10; 1e-7 is far above both and far below the O(1) derivatives.
    const CENTRAL_DIFF_TOL: f64 = 1e-7;
    /// One-sided differences with s = 1e7 in f64: O(|f''| / s) ~ 1e-7 plus round-off 1e-16 · s = 1e-9.
    const FD_VS_EXACT_TOL: f64 = 1e-5;

    #[test]
    fn exact_rms_and_swiglu_backward_match_central_differences_of_the_plain_math() {
        let (t, d) = (3, 6);
        let x = random64([t, d], 0.0, 1.5);
        let dy = random64([t, d], 0.0, 1.0);
        let gain = random64([1, d], 1.0, 0.3).squeeze_dim::<1>(0);
        let eps = 1e-5;
        let exact = values(rms_norm_backward(
            x.clone(),
            &gain,
            dy.clone(),
            eps,
            DerivativeMode::Exact,
            1.0,
        ));
        // Plain math: y_j = g_j x_j / sqrt(mean(x²) + eps); dL/dx_i for L = Σ dy ⊙ y.
        let (xs, dys, gs) = (
            values(x),
            values(dy),
            gain.into_data().to_vec::<f64>().unwrap(),
        );
        let loss = |row: &[f64], r: usize| {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / d as f64;
            (0..d)
                .map(|j| dys[r * d + j] * gs[j] * row[j] / (ms + eps).sqrt())
                .sum::<f64>()
        };
        let h = 1e-6;
        for r in 0..t {
            for i in 0..d {
                let mut plus = xs[r * d..(r + 1) * d].to_vec();
                let mut minus = plus.clone();
                plus[i] += h;
                minus[i] -= h;
                let numeric = (loss(&plus, r) - loss(&minus, r)) / (2.0 * h);
                assert!(
                    (numeric - exact[r * d + i]).abs() < CENTRAL_DIFF_TOL,
                    "rms [{r},{i}]: {numeric} vs {}",
                    exact[r * d + i]
                );
            }
        }

        let gate_pre = random64([t, d], 0.0, 2.0);
        let up = random64([t, d], 0.0, 1.0);
        let d_hidden = random64([t, d], 0.0, 1.0);
        let (d_gate, d_up) = swiglu_backward(
            gate_pre.clone(),
            up.clone(),
            d_hidden.clone(),
            DerivativeMode::Exact,
            1.0,
        );
        let (gs, us, dhs) = (values(gate_pre), values(up), values(d_hidden));
        let silu_f = |v: f64| v / (1.0 + (-v).exp());
        let (d_gate, d_up) = (values(d_gate), values(d_up));
        for k in 0..t * d {
            let numeric_gate = (silu_f(gs[k] + h) - silu_f(gs[k] - h)) / (2.0 * h) * us[k] * dhs[k];
            assert!((numeric_gate - d_gate[k]).abs() < CENTRAL_DIFF_TOL);
            assert!((silu_f(gs[k]) * dhs[k] - d_up[k]).abs() < CENTRAL_DIFF_TOL);
        }
    }

    #[test]
    fn finite_differences_converge_to_exact_derivatives() {
        let (t, d) = (4, 8);
        let x = random64([t, d], 0.0, 1.0);
        let dy = random64([t, d], 0.0, 1.0);
        let gain = random64([1, d], 1.0, 0.2).squeeze_dim::<1>(0);
        let tol = Tolerance::<f64>::absolute(FD_VS_EXACT_TOL);
        let s = 1e7;
        let fd = rms_norm_backward(
            x.clone(),
            &gain,
            dy.clone(),
            1e-5,
            DerivativeMode::FiniteDifference,
            s,
        );
        let exact = rms_norm_backward(x.clone(), &gain, dy.clone(), 1e-5, DerivativeMode::Exact, s);
        fd.into_data()
            .assert_approx_eq::<f64>(&exact.into_data(), tol);
        let (fd_gate, fd_up) = swiglu_backward(
            x.clone(),
            dy.clone(),
            gain.clone().unsqueeze_dim::<2>(0).repeat_dim(0, t),
            DerivativeMode::FiniteDifference,
            s,
        );
        let (ex_gate, ex_up) = swiglu_backward(
            x,
            dy,
            gain.unsqueeze_dim::<2>(0).repeat_dim(0, t),
            DerivativeMode::Exact,
            s,
        );
        fd_gate
            .into_data()
            .assert_approx_eq::<f64>(&ex_gate.into_data(), tol);
        // The up-branch is a product in both modes.
        fd_up
            .into_data()
            .assert_approx_eq::<f64>(&ex_up.into_data(), Tolerance::absolute(0.0));
    }

    #[test]
    fn rms_norm_and_gain_gradient_match_plain_math() {
        let x = Tensor::<TestBackend, 2>::from_data(
            TensorData::new(vec![3.0f64, 4.0, 0.0, 1.0], [2, 2]),
            (&Default::default(), DType::F64),
        );
        let gain = Tensor::<TestBackend, 1>::from_data(
            TensorData::new(vec![2.0f64, 0.5], [2]),
            (&Default::default(), DType::F64),
        );
        // Rows: rms([3,4]) = sqrt(12.5), rms([0,1]) = sqrt(0.5); eps 0.
        let y = values(rms_norm(x.clone(), &gain, 0.0));
        let r0 = 12.5f64.sqrt();
        let r1 = 0.5f64.sqrt();
        let expected = [2.0 * 3.0 / r0, 0.5 * 4.0 / r0, 0.0, 0.5 / r1];
        for (a, b) in y.iter().zip(expected) {
            assert!((a - b).abs() < 1e-14, "{a} vs {b}");
        }
        let dy = Tensor::<TestBackend, 2>::from_data(
            TensorData::new(vec![1.0f64, 1.0, 2.0, 3.0], [2, 2]),
            (&Default::default(), DType::F64),
        );
        let train = Tensor::<TestBackend, 2>::from_data(
            TensorData::new(vec![1.0f64, 0.0], [2, 1]),
            (&Default::default(), DType::F64),
        );
        // Only row 0 trains: grad = z_0 ⊙ dy_0.
        let g: Vec<f64> = rms_gain_gradient(x, dy, &train, 0.0)
            .into_data()
            .to_vec()
            .unwrap();
        assert!((g[0] - 3.0 / r0).abs() < 1e-14 && (g[1] - 4.0 / r0).abs() < 1e-14);
    }
}
