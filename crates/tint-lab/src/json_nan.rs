//! Non-finite numbers in JSON reports: JSON has no NaN, so `serde_json` writes a non-finite `f64` as
//! `null`, and [`nan_if_null`] / [`nans_if_null`] read `null` back as NaN, so a report that holds one
//! (a run told to record them, `--allow-non-finite`) still parses; its cells then fail validation and
//! `--resume` recomputes them.

use serde::{Deserialize, Deserializer};

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
}
