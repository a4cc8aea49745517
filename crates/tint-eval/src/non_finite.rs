//! No silent NaN in the evaluations (issue 20): where a non-finite NLL, score or training loss first
//! appeared ([`NonFiniteOrigin`], carried by [`crate::EvalError::NonFinite`]), and how reports keep
//! such values when a run is told to record them (`allow_non_finite`): JSON has no NaN, so
//! `serde_json` writes them as `null`, and [`nan_if_null`] / [`nans_if_null`] read `null` back as
//! NaN, so a report that holds one still parses (its cells then fail validation and `--resume`
//! recomputes them).

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use serde::{Deserialize, Deserializer};
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

/// Reads an `f64` written by `serde_json`, where `null` stands for a non-finite value: `null` is NaN.
///
/// # Errors
///
/// Anything but a number or `null`.
pub fn nan_if_null<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::NAN))
}

/// [`nan_if_null`] for every element of a list.
///
/// # Errors
///
/// Anything but a list of numbers or `null`s.
pub fn nans_if_null<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f64>, D::Error> {
    Ok(Vec::<Option<f64>>::deserialize(deserializer)?
        .into_iter()
        .map(|v| v.unwrap_or(f64::NAN))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Serialize, serde::Deserialize)]
    struct Stored {
        #[serde(deserialize_with = "nan_if_null")]
        value: f64,
        #[serde(deserialize_with = "nans_if_null")]
        values: Vec<f64>,
    }

    #[test]
    fn non_finite_values_round_trip_through_json_as_nan() {
        let text = serde_json::to_string(&Stored {
            value: f64::NAN,
            values: vec![1.5, f64::INFINITY, -2.0],
        })
        .unwrap();
        assert_eq!(text, r#"{"value":null,"values":[1.5,null,-2.0]}"#);
        let back: Stored = serde_json::from_str(&text).unwrap();
        assert!(back.value.is_nan());
        assert_eq!(back.values[0], 1.5);
        assert!(back.values[1].is_nan());
        assert_eq!(back.values[2], -2.0);
        for bad in [
            r#"{"value":"x","values":[]}"#,
            r#"{"value":1,"values":[true]}"#,
        ] {
            assert!(serde_json::from_str::<Stored>(bad).is_err(), "{bad}");
        }
    }

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
