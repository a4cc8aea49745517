//! The float tensors of burn-flex, reached from generic code: the door to this crate's host
//! kernels (`flex_segments`, `flex_position`, `flex_norm`, `flex_activation`) and the pieces they
//! share.
//!
//! burn 0.21's flex runs, for example, a segment plan as one op per segment and a `cat` that
//! copies them all again; a kernel of our own writes each output row once (docs/performance.md,
//! "Host kernels on burn-flex for the constructed execution"). The modules stay generic over `B: Backend`: when `B`'s float primitive is
//! burn-flex's [`FlexTensor`] (the `flex` backend, checked by type, never under autodiff, whose
//! primitive differs) the kernel runs on the tensor's host storage; on every other backend the
//! generic form of the op runs, and it stays the reference the kernel is tested against.

use std::any::{Any, TypeId};

use burn::tensor::{backend::Backend, Tensor, TensorPrimitive};
use burn_flex::FlexTensor;

/// Whether `B`'s float tensors are burn-flex's [`FlexTensor`]s.
pub(crate) fn is_flex<B: Backend>() -> bool {
    TypeId::of::<B::FloatTensorPrimitive>() == TypeId::of::<FlexTensor>()
}

/// The [`FlexTensor`] behind `x`, or `x` back when `B` is not flex (or `x` is quantized).
pub(crate) fn into_flex<B: Backend, const D: usize>(
    x: Tensor<B, D>,
) -> Result<FlexTensor, Tensor<B, D>> {
    if !is_flex::<B>() {
        return Err(x);
    }
    match x.into_primitive() {
        TensorPrimitive::Float(primitive) => {
            let boxed: Box<dyn Any> = Box::new(primitive);
            Ok(*boxed
                .downcast::<FlexTensor>()
                .expect("is_flex checked the primitive's type"))
        }
        quantized => Err(Tensor::from_primitive(quantized)),
    }
}

/// `x` as a tensor of `B`, which must be flex ([`is_flex`]; the callers hold a tensor that
/// [`into_flex`] gave them).
pub(crate) fn from_flex<B: Backend, const D: usize>(x: FlexTensor) -> Tensor<B, D> {
    let boxed: Box<dyn Any> = Box::new(x);
    let primitive = *boxed
        .downcast::<B::FloatTensorPrimitive>()
        .expect("from_flex is called only on a flex backend");
    Tensor::from_primitive(TensorPrimitive::Float(primitive))
}

/// The float elements the host kernels run on, with the arithmetic of flex's `mul_scalar` and
/// `add`, so a kernel computes every element by the same operations as the generic ops.
pub(crate) trait HostElement:
    Copy + Default + core::ops::Add<Output = Self> + core::ops::Mul<Output = Self>
{
    /// A scalar as flex converts it for this element type (`as f32` for f32).
    fn coefficient(coef: f64) -> Self;
}

impl HostElement for f32 {
    fn coefficient(coef: f64) -> Self {
        coef as f32
    }
}

impl HostElement for f64 {
    fn coefficient(coef: f64) -> Self {
        coef
    }
}

/// `acc · coef` in place, as `mul_scalar` computes it (no product for `coef == 1`).
pub(crate) fn scale<E: HostElement>(acc: &mut [E], coef: f64) {
    if coef != 1.0 {
        let coef = E::coefficient(coef);
        acc.iter_mut().for_each(|a| *a = *a * coef);
    }
}

/// `acc + term · coef` in place, as `acc + term.mul_scalar(coef)` computes it (no product for
/// `coef == 1`).
pub(crate) fn accumulate<E: HostElement>(acc: &mut [E], term: &[E], coef: f64) {
    if coef == 1.0 {
        acc.iter_mut().zip(term).for_each(|(a, &t)| *a = *a + t);
    } else {
        let coef = E::coefficient(coef);
        acc.iter_mut()
            .zip(term)
            .for_each(|(a, &t)| *a = *a + t * coef);
    }
}

/// `$body` with `$element` the Rust type of `$dtype` (f32 or f64) in `Some`, `None` for other
/// dtypes.
macro_rules! with_element {
    ($dtype:expr, $element:ident => $body:expr) => {
        match $dtype {
            burn::tensor::DType::F32 => {
                type $element = f32;
                Some($body)
            }
            burn::tensor::DType::F64 => {
                type $element = f64;
                Some($body)
            }
            _ => None,
        }
    };
}
pub(crate) use with_element;

/// Rows of a flex tensor `[.., n_rows, width]` whose columns are adjacent in storage: row `r` of
/// the flattened leading dimensions starts at `start + (r / n_rows) · outer + (r % n_rows) · inner`.
pub(crate) struct Rows {
    start: usize,
    outer: usize,
    inner: usize,
    n_rows: usize,
}

impl Rows {
    /// The row addressing of a 2-D or 3-D tensor with unit column stride and non-negative
    /// strides; `None` otherwise.
    pub(crate) fn of(x: &FlexTensor) -> Option<Self> {
        let layout = x.layout();
        let dims = layout.shape().as_slice();
        let strides = layout.strides();
        let unsigned = |s: isize| usize::try_from(s).ok();
        match (dims, strides) {
            ([_, n_rows, width], &[outer, inner, column]) => {
                (column == 1 || *width <= 1).then_some(())?;
                Some(Self {
                    start: layout.start_offset(),
                    outer: unsigned(outer)?,
                    inner: unsigned(inner)?,
                    n_rows: (*n_rows).max(1),
                })
            }
            ([_, width], &[inner, column]) => {
                (column == 1 || *width <= 1).then_some(())?;
                Some(Self {
                    start: layout.start_offset(),
                    outer: 0,
                    inner: unsigned(inner)?,
                    n_rows: usize::MAX,
                })
            }
            _ => None,
        }
    }

    pub(crate) fn start_of(&self, row: usize) -> usize {
        self.start + (row / self.n_rows) * self.outer + (row % self.n_rows) * self.inner
    }
}
