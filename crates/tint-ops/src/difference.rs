//! The first-order differences of the norm and activation backward, `s (f(x + v/s) - f(x))`
//! (paper Def. F.1 / Thm. F.1 for LayerNorm, Def. J.2 for RMSnorm, Def. J.5 for the SwiGLU gate,
//! docs/construction.md §6.9 for the MLP activation), evaluated in a **cancellation-free** form:
//! the same number in exact arithmetic, rewritten so that no two large, nearly equal values are
//! subtracted. Evaluated literally in float32, `f(x + v/s)` and `f(x)` agree in all but their last
//! few bits when `|v/s|` is small against `|x|` (SmolLM2's massive residual channels reach
//! `|x| ≈ 2e4` with `s = 1000`), and the difference, multiplied by `s`, keeps mostly round-off
//! (docs/tint-llama.md, "Float32 numerics", has the derivations and the measured errors).
//!
//! Every function reduces over the last dimension (the norms) or acts element-wise (the
//! activations) and works for any rank. They are **not** the exact derivative (`J_f v`): they keep
//! the `O(1/s)` term of the first-order difference, so they equal the literal formula in float64 to
//! round-off (tests below, `1e-9`) for any `s`.

use burn::tensor::{activation::sigmoid, backend::Backend, Tensor};

use crate::options::ActivationKind;

/// `sqrt(2/π)`, the constant of `gelu_new`.
const GELU_SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of `gelu_new`.
const GELU_CUBIC: f64 = 0.044715;

/// `s (f(x + v/s) - f(x))` for the RMSNorm without gain `f(x) = x / r(x)`,
/// `r(x) = sqrt(mean(x²) + eps)`, as
/// `v / r' - x q / (r r' (r + r'))` with `q = mean((2x + v/s) ⊙ v)` and `r'² = r² + q / s`
/// (`r' = r(x + v/s)`; `f(x+δ) - f(x) = δ/r' + x (1/r' - 1/r)` and `r - r' = -(r'² - r²)/(r + r')`).
///
/// # Shapes
/// * `x`, `v`: `[.., d]` → `[.., d]`
pub fn rms_norm_difference<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    v: Tensor<B, D>,
    eps: f64,
    scale: f64,
) -> Tensor<B, D> {
    let last = D - 1;
    let mean_square = x.clone().square().mean_dim(last).add_scalar(eps);
    let q = ((x.clone().mul_scalar(2.0) + v.clone().div_scalar(scale)) * v.clone()).mean_dim(last);
    shifted_norm_difference(x, v, mean_square, q, eps, scale)
}

/// `s (f(x + v/s) - f(x))` for the LayerNorm without affine `f(x) = (x - mean(x)) / σ(x)`,
/// `σ(x) = sqrt(var(x) + eps)`, as the RMS form on the centred vectors `c = x - mean(x)`,
/// `w = v - mean(v)`: `w / σ' - c q / (σ σ' (σ + σ'))`, `q = mean((2c + w/s) ⊙ w)`,
/// `σ'² = σ² + q / s` (`x + v/s` centres to `c + w/s`).
///
/// # Shapes
/// * `x`, `v`: `[.., d]` → `[.., d]`
pub fn layer_norm_difference<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    v: Tensor<B, D>,
    eps: f64,
    scale: f64,
) -> Tensor<B, D> {
    let last = D - 1;
    let (var, mean) = x.clone().var_mean_bias(last);
    let c = x - mean;
    let w = v.clone() - v.mean_dim(last);
    let q = ((c.clone().mul_scalar(2.0) + w.clone().div_scalar(scale)) * w.clone()).mean_dim(last);
    shifted_norm_difference(c, w, var.add_scalar(eps), q, eps, scale)
}

/// `v / r' - x q / (r r' (r + r'))` with `r = sqrt(mean_square)`, `r'² = r² + q/s` (at least
/// `eps`, its exact lower bound), shared by the RMS and centred forms.
fn shifted_norm_difference<B: Backend, const D: usize>(
    x: Tensor<B, D>,
    v: Tensor<B, D>,
    mean_square: Tensor<B, D>,
    q: Tensor<B, D>,
    eps: f64,
    scale: f64,
) -> Tensor<B, D> {
    let r = mean_square.clone().sqrt();
    let r_new = (mean_square + q.clone().div_scalar(scale))
        .clamp_min(eps)
        .sqrt();
    let denominator = r.clone() * r_new.clone() * (r + r_new.clone());
    v / r_new - x * (q / denominator)
}

/// `s (silu(a + d/s) - silu(a))`, `silu(a) = a σ(a)`, as
/// `d σ(a+h) + a σ(a+h) σ(-a) s (1 - e^{-h})` with `h = d/s` and
/// `s (1 - e^{-h}) = 2 s t / (1 + t)`, `t = tanh(h/2)`
/// (`σ(a+h) - σ(a) = σ(a+h) σ(-a) (1 - e^{-h})`).
///
/// # Shapes
/// * `a`, `d`: any `[..]` (same) → same
pub fn silu_difference<B: Backend, const D: usize>(
    a: Tensor<B, D>,
    d: Tensor<B, D>,
    scale: f64,
) -> Tensor<B, D> {
    let h = d.clone().div_scalar(scale);
    let sig_new = sigmoid(a.clone() + h.clone());
    let t = h.mul_scalar(0.5).tanh();
    let scaled_one_minus_exp = t.clone().mul_scalar(2.0 * scale) / t.add_scalar(1.0);
    d * sig_new.clone() + a.clone() * sig_new * sigmoid(a.neg()) * scaled_one_minus_exp
}

/// `s (act(u + d/s) - act(u))` for the MLP activation:
/// * `gelu_new(x) = x (1 + tanh(k(x)))/2`, `k(x) = c (x + a x³)`: with `h = d/s`,
///   `T = tanh(k(u))`, `T' = tanh(k(u + h))`,
///   `d (1 + T')/2 + u s tanh(Δ) (1 - T T') / 2` (the first term evaluated as `d sigmoid(2 k(u+h))`),
///   `Δ = k(u+h) - k(u) = c h (1 + a (3u² + 3uh + h²))` (`T' - T = tanh(Δ) (1 - T T')`), and
///   `1 - T T'` without cancellation from `p = e^{-2|k(u)|}`, `q = e^{-2|k(u+h)|}`:
///   `2 (p + q) / ((1 + p)(1 + q))` when `k(u)` and `k(u+h)` have the same sign, else
///   `2 (1 + p q) / ((1 + p)(1 + q))` (no overflow for any `u`);
/// * `relu`: `max(d, -s u)` where `u > 0`, else `max(s u + d, 0)`.
///
/// # Shapes
/// * `u`, `d`: any `[..]` (same) → same
pub fn activation_difference<B: Backend, const D: usize>(
    kind: ActivationKind,
    u: Tensor<B, D>,
    d: Tensor<B, D>,
    scale: f64,
) -> Tensor<B, D> {
    match kind {
        ActivationKind::GeluNew => {
            let h = d.clone().div_scalar(scale);
            let k = |x: Tensor<B, D>| {
                (x.clone() + x.clone() * x.clone() * x * GELU_CUBIC) * GELU_SQRT_2_OVER_PI
            };
            let k_old = k(u.clone());
            let k_new = k(u.clone() + h.clone());
            // c (1 + a (3u² + 3uh + h²)) h, the step of k without subtracting k values.
            let poly = (u.clone() * u.clone()).mul_scalar(3.0)
                + (u.clone() * h.clone()).mul_scalar(3.0)
                + h.clone() * h.clone();
            let step =
                (poly.mul_scalar(GELU_CUBIC).add_scalar(1.0) * h).mul_scalar(GELU_SQRT_2_OVER_PI);
            let p = k_old.clone().abs().mul_scalar(-2.0).exp();
            let q = k_new.clone().abs().mul_scalar(-2.0).exp();
            let denominator =
                (p.clone().add_scalar(1.0) * q.clone().add_scalar(1.0)).div_scalar(2.0);
            let same_sign = (k_old * k_new.clone()).greater_equal_elem(0.0);
            let one_minus_product = (p.clone() * q.clone())
                .add_scalar(1.0)
                .mask_where(same_sign, p + q)
                / denominator;
            // `0.5 (1 + tanh k) = sigmoid(2 k)`: one pass instead of tanh, add and scale (issue 17).
            d * sigmoid(k_new.mul_scalar(2.0))
                + u * step.tanh().mul_scalar(0.5 * scale) * one_minus_product
        }
        ActivationKind::Relu => {
            let positive = u.clone().greater_elem(0.0);
            let above = d.clone().max_pair(u.clone().mul_scalar(-scale));
            let below = (u.mul_scalar(scale) + d).clamp_min(0.0);
            below.mask_where(positive, above)
        }
    }
}

#[cfg(test)]
#[allow(clippy::print_stdout, clippy::print_stderr)] // tests report their measured values
mod tests {
    use super::*;
    use crate::activation::activate;
    use crate::testing::TestBackend;
    use burn::tensor::DType;

    /// Literal and rewritten forms in float64: both are the same real number; the literal one
    /// loses `~1e-16 · s · |f|` to cancellation (s = 1000, |f| ≤ ~30 here: ~3e-12).
    const F64_TOL: f64 = 1e-9;

    fn max_abs(a: Tensor<TestBackend, 2>) -> f64 {
        a.abs()
            .max()
            .into_data()
            .convert::<f64>()
            .to_vec::<f64>()
            .unwrap()[0]
    }

    fn max_diff(a: Tensor<TestBackend, 2>, b: Tensor<TestBackend, 2>) -> f64 {
        max_abs(a - b)
    }

    fn rms(x: Tensor<TestBackend, 2>, eps: f64) -> Tensor<TestBackend, 2> {
        x.clone() / x.square().mean_dim(1).add_scalar(eps).sqrt()
    }

    fn layer_norm(x: Tensor<TestBackend, 2>, eps: f64) -> Tensor<TestBackend, 2> {
        let (var, mean) = x.clone().var_mean_bias(1);
        (x - mean) / var.add_scalar(eps).sqrt()
    }

    fn silu(x: Tensor<TestBackend, 2>) -> Tensor<TestBackend, 2> {
        x.clone() * sigmoid(x)
    }

    /// Deterministic inputs `[5, 16]` with two massive channels (±6000, as SmolLM2's residual
    /// stream) and O(1) ones; `v` of order 1.
    fn inputs() -> (Tensor<TestBackend, 2>, Tensor<TestBackend, 2>) {
        let (rows, cols) = (5, 16);
        let x: Vec<f64> = (0..rows * cols)
            .map(|k| {
                let (i, j) = ((k / cols) as f64, (k % cols) as f64);
                let base = 2.0 * (1.3 * i + 0.7 * j + 0.1).sin();
                if k % cols < 2 {
                    3000.0 * (base.signum() + base)
                } else {
                    base
                }
            })
            .collect();
        let v: Vec<f64> = (0..rows * cols)
            .map(|k| (0.9 * (k / cols) as f64 + 1.1 * (k % cols) as f64).cos())
            .collect();
        let tensor = |values: Vec<f64>| {
            Tensor::<TestBackend, 2>::from_data(
                burn::tensor::TensorData::new(values, [rows, cols]),
                (&Default::default(), DType::F64),
            )
        };
        (tensor(x), tensor(v))
    }

    #[test]
    fn rewritten_forms_equal_the_literal_differences_in_f64() {
        let (x, v) = inputs();
        for scale in [1.0, 10.0, 1000.0] {
            let eps = 1e-5;
            let literal = (rms(x.clone() + v.clone() / scale, eps) - rms(x.clone(), eps)) * scale;
            let got = rms_norm_difference(x.clone(), v.clone(), eps, scale);
            assert!(max_diff(got, literal) < F64_TOL, "rms, s = {scale}");
            let literal = (layer_norm(x.clone() + v.clone() / scale, eps)
                - layer_norm(x.clone(), eps))
                * scale;
            let got = layer_norm_difference(x.clone(), v.clone(), eps, scale);
            assert!(max_diff(got, literal) < F64_TOL, "layer norm, s = {scale}");
            let a = x.clone().div_scalar(100.0);
            let literal = (silu(a.clone() + v.clone() / scale) - silu(a.clone())) * scale;
            let got = silu_difference(a.clone(), v.clone(), scale);
            assert!(max_diff(got, literal) < F64_TOL, "silu, s = {scale}");
            for kind in [ActivationKind::GeluNew, ActivationKind::Relu] {
                let literal = (activate(kind, a.clone() + v.clone() / scale)
                    - activate(kind, a.clone()))
                    * scale;
                let got = activation_difference(kind, a.clone(), v.clone(), scale);
                assert!(max_diff(got, literal) < F64_TOL, "{kind:?}, s = {scale}");
            }
        }
    }

    #[test]
    fn rewritten_forms_are_accurate_in_f32_where_the_literal_ones_cancel() {
        // Reference: the literal forms in f64 (relative round-off ~1e-16 · s · |f| / |out|,
        // ~1e-10 here). Relative to the largest output, the rewritten forms in f32 keep a few
        // ulps of O(1) terms (measured <= 2e-7): bound F32_REL_TOL = 1e-5. The literal forms in
        // f32 lose ~6e-8 · s · |f| to cancellation, and `x + v/s` drops most of `v/s` in the
        // massive channels (ulp(6000) ≈ 5e-4 against |v/s| ≈ 1e-3): measured >= 3e-4, so they
        // must fail the bound by at least LITERAL_MARGIN = 10x (the test shows the bound bites).
        const F32_REL_TOL: f64 = 1e-5;
        const LITERAL_MARGIN: f64 = 10.0;
        let (x, v) = inputs();
        let (s, eps) = (1000.0, 1e-5);
        let f32 = |t: &Tensor<TestBackend, 2>| t.clone().cast(DType::F32);
        let check = |name: &str,
                     new: Tensor<TestBackend, 2>,
                     old: Tensor<TestBackend, 2>,
                     reference: Tensor<TestBackend, 2>| {
            let scale = max_abs(reference.clone());
            let new = max_diff(new.cast(DType::F64), reference.clone()) / scale;
            let old = max_diff(old.cast(DType::F64), reference) / scale;
            eprintln!("{name}: rewritten {new:.2e}, literal {old:.2e} (f32, relative)");
            assert!(
                new < F32_REL_TOL,
                "{name}: rewritten form in f32 off by {new:e}"
            );
            assert!(
                old > LITERAL_MARGIN * F32_REL_TOL,
                "{name}: literal form only off by {old:e}"
            );
        };
        let literal = |f: &dyn Fn(Tensor<TestBackend, 2>) -> Tensor<TestBackend, 2>,
                       x: &Tensor<TestBackend, 2>,
                       v: &Tensor<TestBackend, 2>| {
            (f(x.clone() + v.clone() / s) - f(x.clone())) * s
        };
        let rms_f = |t: Tensor<TestBackend, 2>| rms(t, eps);
        check(
            "rms",
            rms_norm_difference(f32(&x), f32(&v), eps, s),
            literal(&rms_f, &f32(&x), &f32(&v)),
            literal(&rms_f, &x, &v),
        );
        let ln_f = |t: Tensor<TestBackend, 2>| layer_norm(t, eps);
        check(
            "layer norm",
            layer_norm_difference(f32(&x), f32(&v), eps, s),
            literal(&ln_f, &f32(&x), &f32(&v)),
            literal(&ln_f, &x, &v),
        );
        // Activations at pre-activations up to ~60 (SmolLM2's gate inputs reach ~50).
        let a = x.clone().div_scalar(100.0);
        check(
            "silu",
            silu_difference(f32(&a), f32(&v), s),
            literal(&silu, &f32(&a), &f32(&v)),
            literal(&silu, &a, &v),
        );
        for kind in [ActivationKind::GeluNew, ActivationKind::Relu] {
            let act = |t: Tensor<TestBackend, 2>| activate(kind, t);
            check(
                &format!("{kind:?}"),
                activation_difference(kind, f32(&a), f32(&v), s),
                literal(&act, &f32(&a), &f32(&v)),
                literal(&act, &a, &v),
            );
        }
    }

    #[test]
    fn gelu_difference_is_finite_and_right_at_huge_pre_activations() {
        // |u| up to 1e4: cosh(k(u)) would overflow; the p/q form of `1 - T T'` must not.
        // Reference: the literal form in f64, exact to ~1e-16 · s · |u| ≈ 1e-9 at these sizes
        // (tolerance 1e-6 relative to the largest output, with margin for that round-off).
        let (x, v) = inputs();
        let u = x.clone().mul_scalar(1.5);
        let s = 1000.0;
        let got = activation_difference(ActivationKind::GeluNew, u.clone(), v.clone(), s);
        let literal = (activate(ActivationKind::GeluNew, u.clone() + v.clone() / s)
            - activate(ActivationKind::GeluNew, u))
            * s;
        let has_nan = got
            .clone()
            .is_nan()
            .any()
            .into_data()
            .to_vec::<bool>()
            .unwrap()[0];
        assert!(!has_nan, "NaN in the rewritten gelu difference");
        let scale = max_abs(literal.clone());
        assert!(max_diff(got, literal) / scale < 1e-6);
    }
}
