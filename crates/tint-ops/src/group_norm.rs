//! The group norm over the first `D` dims of a row (docs/construction.md §3.4): which
//! normalisation ([`NormKind`]: LayerNorm or RMSNorm), its plain forms, first-order differences and
//! Jacobian, and the constructed first-order difference shared by both norm backwards.

use burn::tensor::{backend::Backend, DType, Tensor};

use crate::{
    difference::{layer_norm_difference, rms_norm_difference},
    hsplit::DimWise,
    layout,
    precision::in_float64,
};

/// Which normalisation `f` a norm module simulates: the two differ only in `f`, its first-order
/// difference and its Jacobian, so one [`crate::norm::NormForward`] / [`crate::norm::NormBackward`]
/// serves both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormKind {
    /// LayerNorm without affine, `f(x) = (x - mean)/sqrt(var + eps)` (biased variance; GPT-2, OPT;
    /// docs/construction.md §6.5–6.6).
    Layer,
    /// RMSNorm without gain, `f(x) = x / sqrt(mean(x²) + eps)` (LLaMA; paper appendix J.1, Def. J.2).
    Rms,
}

impl NormKind {
    /// `f` over the last dim with the group-norm weight value `w` (`tanh(g10)`, 1 for exact gates),
    /// in the official form: [`layer_norm_plain`] or [`rms_norm_plain`].
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, d]` → `[batch_size, n_rows, d]`
    pub fn plain<B: Backend>(self, x: Tensor<B, 3>, eps: f64, gate_value: f64) -> Tensor<B, 3> {
        match self {
            Self::Layer => layer_norm_plain(x, eps, gate_value),
            Self::Rms => rms_norm_plain(x, eps, gate_value),
        }
    }

    /// The group norm over the first `D` dims of a row (§3.4; Def. J.2 for RMSNorm), without
    /// affine (the gain and bias are applied by the following linear module): [`NormKind::plain`]
    /// on dims `< d_model`, plus `(1 - w) x` there for a non-exact gate value `w`; identity on dims
    /// `>= d_model`.
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, d_sim]` → `[batch_size, n_rows, d_sim]`
    pub fn group_first<B: Backend>(
        self,
        x: Tensor<B, 3>,
        d_model: usize,
        eps: f64,
        gate_value: f64,
    ) -> Tensor<B, 3> {
        let [_, _, d_sim] = x.dims();
        if gate_value == 1.0 {
            if let Some(out) = normalize_on_flex(&x, self, d_model, eps, gate_value) {
                return out;
            }
        }
        let head = x.clone().narrow(2, 0, d_model);
        let normed = self.plain(head.clone(), eps, gate_value);
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

    /// `f(x)` with weight 1 and materialised row statistics (flex walks a broadcast operand element
    /// by element): the structured execution's normalisation.
    ///
    /// # Shapes
    /// * `x`: `[batch_size, rows, d]` (contiguous) → same
    pub fn normalize_rows<B: Backend>(self, x: Tensor<B, 3>, eps: f64) -> Tensor<B, 3> {
        let [_, _, d] = x.dims();
        let centered = match self {
            Self::Layer => x.clone() - layout::repeat_columns(x.mean_dim(2), d),
            Self::Rms => x,
        };
        let mean_square = (centered.clone() * centered.clone()).mean_dim(2);
        centered / layout::repeat_columns((mean_square + eps).sqrt(), d)
    }

    /// The first-order difference `s (f(x + v/s) - f(x))` in cancellation-free form
    /// ([`layer_norm_difference`], [`rms_norm_difference`]).
    ///
    /// # Shapes
    /// * `x`, `v`: `[batch_size, rows, d]` → same
    pub fn difference<B: Backend>(
        self,
        x: Tensor<B, 3>,
        v: Tensor<B, 3>,
        eps: f64,
        scale: f64,
    ) -> Tensor<B, 3> {
        match self {
            Self::Layer => layer_norm_difference(x, v, eps, scale),
            Self::Rms => rms_norm_difference(x, v, eps, scale),
        }
    }

    /// The exact backward `J_f(x) v`: for LayerNorm `(v - mean(v) - z mean(v z)) / σ(x)`, for
    /// RMSNorm `(v - z mean(v z)) / rms(x)`, `z = f(x)`.
    ///
    /// # Shapes
    /// * `x`, `v`: `[batch_size, rows, d]` → same
    pub fn jacobian_product<B: Backend>(
        self,
        x: Tensor<B, 3>,
        v: Tensor<B, 3>,
        eps: f64,
    ) -> Tensor<B, 3> {
        let centered = match self {
            Self::Layer => x.clone() - x.mean_dim(2),
            Self::Rms => x,
        };
        let sigma = (centered.clone().powi_scalar(2).mean_dim(2) + eps).sqrt();
        let z = centered / sigma.clone();
        let projection = z.clone() * (v.clone() * z).mean_dim(2);
        let v = match self {
            Self::Layer => v.clone() - v.mean_dim(2),
            Self::Rms => v,
        };
        (v - projection) / sigma
    }
}

/// `w (x - mean)/sqrt(eps + w var)` over the last dim (`w = 1`: plain LayerNorm without affine).
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, d]` → `[batch_size, n_rows, d]`
pub fn layer_norm_plain<B: Backend>(x: Tensor<B, 3>, eps: f64, gate_value: f64) -> Tensor<B, 3> {
    let width = x.dims()[2];
    normalize_on_flex(&x, NormKind::Layer, width, eps, gate_value)
        .unwrap_or_else(|| layer_norm_plain_generic(x, eps, gate_value))
}

/// The generic form of [`layer_norm_plain`] (the reference of the float64 host kernel, module
/// `flex_norm`).
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, d]` → `[batch_size, n_rows, d]`
pub(crate) fn layer_norm_plain_generic<B: Backend>(
    x: Tensor<B, 3>,
    eps: f64,
    gate_value: f64,
) -> Tensor<B, 3> {
    let centered = x.clone() - x.mean_dim(2);
    let var = centered.clone().powi_scalar(2).mean_dim(2);
    let sigma = (var * gate_value + eps).sqrt();
    centered * gate_value / sigma
}

/// `x` with its first `d_model` columns normalised (the others copied) by the float64 host
/// kernel on burn-flex (module `flex_norm`), or `None` where it does not apply.
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, width]` → `[batch_size, n_rows, width]`
fn normalize_on_flex<B: Backend>(
    x: &Tensor<B, 3>,
    kind: NormKind,
    d_model: usize,
    eps: f64,
    gate_value: f64,
) -> Option<Tensor<B, 3>> {
    if !crate::flex_host::is_flex::<B>() || x.dtype() != DType::F64 {
        return None;
    }
    let flex = crate::flex_host::into_flex(x.clone()).ok()?;
    crate::flex_norm::normalize_first(&flex, kind == NormKind::Layer, d_model, eps, gate_value)
        .map(crate::flex_host::from_flex)
}

/// `w x / sqrt(eps + w mean(x²))` over the last dim (`w = 1`: plain RMSNorm without gain).
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, d]` → `[batch_size, n_rows, d]`
pub fn rms_norm_plain<B: Backend>(x: Tensor<B, 3>, eps: f64, gate_value: f64) -> Tensor<B, 3> {
    let width = x.dims()[2];
    normalize_on_flex(&x, NormKind::Rms, width, eps, gate_value)
        .unwrap_or_else(|| rms_norm_plain_generic(x, eps, gate_value))
}

/// The generic form of [`rms_norm_plain`] (the reference of the float64 host kernel, module
/// `flex_norm`).
///
/// # Shapes
/// * `x`: `[batch_size, n_rows, d]` → `[batch_size, n_rows, d]`
pub(crate) fn rms_norm_plain_generic<B: Backend>(
    x: Tensor<B, 3>,
    eps: f64,
    gate_value: f64,
) -> Tensor<B, 3> {
    let mean_square = x.clone().powi_scalar(2).mean_dim(2);
    let rms = (mean_square * gate_value + eps).sqrt();
    x * gate_value / rms
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
