//! The methods the evaluations compare, by name: `vanilla` (the unadapted model; `icl` in the
//! in-context classification reports), `dyn-eval` (dynamic evaluation) and the TinT methods of
//! each TinT engine ([`Engine`]: `tint`, `tint-structured`, `tint-ref`).

use tint_sim::Engine;

use crate::methods::{parse_tint_method, tint_method_name};
use crate::EvalError;

/// An evaluated method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// The unadapted model (`vanilla`; `icl` is accepted as a name and used in ICL reports).
    Vanilla,
    /// Dynamic evaluation: SGD on the training part (`dyn-eval`), every parameter (the paper's
    /// baseline).
    DynEval,
    /// Dynamic evaluation restricted to exactly the parameters a TinT step updates (the budget's
    /// layers and TinT's parameter groups, [`crate::methods::tint_updated_params`]), for the
    /// budget's steps: the matched baseline (`dyn-eval-matched`).
    DynEvalMatched,
    /// A TinT method (`tint`, `tint-structured`, `tint-ref`).
    Tint(Engine),
}

impl Method {
    /// Every method, in the default order of `eval lm`.
    pub const ALL: [Method; 6] = [
        Method::Vanilla,
        Method::DynEval,
        Method::DynEvalMatched,
        Method::Tint(Engine::CONSTRUCTED),
        Method::Tint(Engine::STRUCTURED),
        Method::Tint(Engine::Reference),
    ];

    /// The method's name in language-modelling reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Method::Vanilla => "vanilla",
            Method::DynEval => "dyn-eval",
            Method::DynEvalMatched => "dyn-eval-matched",
            Method::Tint(engine) => tint_method_name(engine),
        }
    }

    /// The method's name in in-context classification reports (`icl` for the plain model).
    pub fn icl_name(self) -> &'static str {
        match self {
            Method::Vanilla => "icl",
            other => other.name(),
        }
    }

    /// Whether the method adapts to the training part (everything but `vanilla`).
    pub fn adapts(self) -> bool {
        self != Method::Vanilla
    }

    /// Whether the method is dynamic evaluation (on every parameter or the matched ones).
    pub fn is_dyn_eval(self) -> bool {
        matches!(self, Method::DynEval | Method::DynEvalMatched)
    }

    /// Whether the method is one of the TinT methods.
    pub fn is_tint(self) -> bool {
        matches!(self, Method::Tint(_))
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Method {
    type Err = EvalError;

    fn from_str(name: &str) -> Result<Self, EvalError> {
        match name {
            "vanilla" | "icl" => Ok(Method::Vanilla),
            "dyn-eval" => Ok(Method::DynEval),
            "dyn-eval-matched" => Ok(Method::DynEvalMatched),
            _ => parse_tint_method(name)
                .map(Method::Tint)
                .map_err(|_| EvalError::UnknownMethod {
                    name: name.to_string(),
                    known: "vanilla (or icl), dyn-eval, dyn-eval-matched, tint, tint-structured, tint-ref"
                        .into(),
                }),
        }
    }
}

impl serde::Serialize for Method {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Method {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for method in Method::ALL {
            assert_eq!(method.to_string().parse::<Method>().unwrap(), method);
        }
        assert_eq!("icl".parse::<Method>().unwrap(), Method::Vanilla);
        assert_eq!(Method::Vanilla.icl_name(), "icl");
        assert_eq!(Method::DynEval.icl_name(), "dyn-eval");
        let err = "gpt4".parse::<Method>().unwrap_err().to_string();
        assert!(err.contains("gpt4") && err.contains("tint-ref"), "{err}");
        assert!(!Method::Vanilla.adapts() && Method::ALL[1..].iter().all(|m| m.adapts()));
        let structured = Method::Tint(Engine::STRUCTURED);
        let json = serde_json::to_value(structured).unwrap();
        assert_eq!(json, "tint-structured");
        assert_eq!(serde_json::from_value::<Method>(json).unwrap(), structured);
        assert!(serde_json::from_value::<Method>("gpt4".into()).is_err());
    }
}
