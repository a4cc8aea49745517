//! No silent NaN in the evaluations (issue 20): where a non-finite NLL, score or training loss first
//! appeared ([`NonFiniteOrigin`], carried by [`crate::EvalError::NonFinite`]). Reports keep such
//! values when a run is told to record them (`allow_non_finite`) through `tint_lab::json_nan`.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_aux::AuxModel;

/// Where a non-finite value of an evaluation first appeared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NonFiniteOrigin {
    /// A weight of the checkpoint is NaN or infinite (the first one, in the model's parameter
    /// order): `weight NAME (k of n values non-finite)`.
    Weights(String),
    /// Every weight is finite and the unadapted model's output on this input is finite: the
    /// method's update (its step size and steps, in words) made it non-finite.
    Update(String),
    /// Every weight is finite but the unadapted model's output on this input is already
    /// non-finite: the forward pass overflowed.
    Forward,
    /// The method does not say.
    Unknown,
}

impl std::fmt::Display for NonFiniteOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NonFiniteOrigin::Weights(weight) => {
                write!(f, "it first appears in the checkpoint weights: {weight}")
            }
            NonFiniteOrigin::Update(step) => write!(
                f,
                "the unadapted model's output is finite, so it first appears in the update ({step})"
            ),
            NonFiniteOrigin::Forward => f.write_str(
                "every weight is finite and the unadapted model's output is already non-finite: \
                 the forward pass overflowed",
            ),
            NonFiniteOrigin::Unknown => f.write_str("its origin is not known"),
        }
    }
}

/// [`NonFiniteOrigin::Weights`] when a weight of `model` is NaN or infinite, else `None`.
pub fn weights_origin<B: Backend>(model: &AuxModel<B>) -> Option<NonFiniteOrigin> {
    tint_aux::first_non_finite_weight(model).map(NonFiniteOrigin::Weights)
}

/// The origin of a non-finite output of an adapted model: the weights when one of `model` is not
/// finite, else the forward pass when `unadapted_finite` is false, else the update described by
/// `step`.
pub fn adapted_origin<B: Backend>(
    model: &AuxModel<B>,
    unadapted_finite: bool,
    step: impl FnOnce() -> String,
) -> NonFiniteOrigin {
    weights_origin(model).unwrap_or_else(|| {
        if unadapted_finite {
            NonFiniteOrigin::Update(step())
        } else {
            NonFiniteOrigin::Forward
        }
    })
}

/// Whether every value of `tensor` is finite (read on the host).
pub fn all_finite<B: Backend, const D: usize>(tensor: &Tensor<B, D>) -> bool {
    tint_aux::count_non_finite(tensor).0 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_say_where_the_value_appeared() {
        let weights = NonFiniteOrigin::Weights("weight h.0.mlp (1 of 4 values non-finite)".into());
        assert!(weights
            .to_string()
            .contains("checkpoint weights: weight h.0.mlp"));
        let update = NonFiniteOrigin::Update("inner_lr 1e300, 1 step(s)".into());
        assert!(update.to_string().contains("update (inner_lr 1e300"));
        assert!(NonFiniteOrigin::Forward.to_string().contains("overflowed"));
    }
}
