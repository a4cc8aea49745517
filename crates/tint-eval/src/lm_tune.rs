//! Step-size selection on a tuning split (never on evaluated data), and the record of it that every
//! report carries: the grid, the score of each grid value, the choice, and which split it came from —
//! or that the value was given on the command line and nothing was tuned.

use serde::{Deserialize, Serialize};

use crate::lm::LmMethod;
use crate::perplexity::BlockNll;
use crate::EvalError;

/// How one method's step size was set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneRecord {
    /// The method (report name).
    pub method: String,
    /// The tuned parameter: `eta` (TinT's step on the summed loss; dynamic evaluation's matched
    /// step) or `lr` (dynamic evaluation's step on the mean loss).
    pub parameter: String,
    /// The grid (empty when the value was given).
    pub grid: Vec<f64>,
    /// Score of each grid value on the tuning split (same order as `grid`; NaN for a value whose
    /// run diverged; `null` in JSON).
    #[serde(deserialize_with = "crate::non_finite::nans_if_null")]
    pub scores: Vec<f64>,
    /// What the score is (e.g. "mean NLL per token, lower is better").
    pub objective: String,
    /// The value used for evaluation.
    pub choice: f64,
    /// The tuning split in words, or the flag that gave the value.
    pub source: String,
    /// Whether `choice` was tuned (false: given on the command line).
    pub tuned: bool,
}

impl TuneRecord {
    /// A value given on the command line (`flag`), not tuned.
    pub fn given(method: &str, parameter: &str, value: f64, flag: &str) -> Self {
        Self {
            method: method.into(),
            parameter: parameter.into(),
            grid: Vec::new(),
            scores: Vec::new(),
            objective: String::new(),
            choice: value,
            source: format!("given by {flag}; not tuned"),
            tuned: false,
        }
    }

    /// One line for reports.
    pub fn summary(&self) -> String {
        if !self.tuned {
            return format!(
                "`{}`: {} = {:e} {}",
                self.method, self.parameter, self.choice, self.source
            );
        }
        let grid: Vec<String> = self
            .grid
            .iter()
            .zip(&self.scores)
            .map(|(g, s)| format!("{g:e}: {s:.4}"))
            .collect();
        format!(
            "`{}`: {} = {:e} chosen from {{{}}} ({}) on {}",
            self.method,
            self.parameter,
            self.choice,
            grid.join(", "),
            self.objective,
            self.source
        )
    }
}

/// Index of the best finite score (`lower_is_better` picks the minimum); the first on ties.
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] when no score is finite.
pub fn best_index(scores: &[f64], lower_is_better: bool) -> Result<usize, EvalError> {
    let mut best: Option<usize> = None;
    for (i, &s) in scores.iter().enumerate() {
        if !s.is_finite() {
            continue;
        }
        let better = match best {
            None => true,
            Some(b) if lower_is_better => s < scores[b],
            Some(b) => s > scores[b],
        };
        if better {
            best = Some(i);
        }
    }
    best.ok_or(EvalError::InvalidSetting {
        name: "tune",
        value: format!("{scores:?}"),
        rule: "no grid value gave a finite score on the tuning split",
    })
}

/// Chooses `parameter` for `method` from `grid`: every value builds a method with `make`, which is
/// scored by its token-weighted mean NLL on the evaluated parts of the tuning `blocks` at
/// `train_fraction`; the lowest wins. A value whose losses are not finite (a diverging step) scores
/// NaN and is never chosen. `split` describes the tuning blocks for the record; `progress` is called
/// after each block with `(done, total, message)`.
///
/// # Errors
///
/// An empty grid or block list, a fraction that leaves no training or evaluated token, errors of
/// the methods, and a grid on which every value diverges ([`EvalError::NonFinite`] of the first
/// non-finite NLL, with its origin).
#[allow(clippy::too_many_arguments)]
pub fn tune_lm<'a>(
    method: &str,
    parameter: &str,
    grid: &[f64],
    blocks: &[Vec<u32>],
    train_fraction: f64,
    split: &str,
    make: &mut dyn FnMut(f64) -> Result<Box<dyn LmMethod + 'a>, EvalError>,
    progress: &mut dyn FnMut(usize, usize, String),
) -> Result<TuneRecord, EvalError> {
    if grid.is_empty() || blocks.is_empty() {
        return Err(EvalError::InvalidSetting {
            name: "tune",
            value: format!("{} grid values, {} blocks", grid.len(), blocks.len()),
            rule: "tuning needs a grid and at least one tuning block",
        });
    }
    let block_size = blocks[0].len();
    let spec = crate::blocks::BlockSpec {
        block_size,
        train_fraction,
        max_blocks: 1,
    };
    spec.validate()?;
    let train_len = spec.train_len();
    let total = grid.len() * blocks.len();
    let mut done = 0;
    let mut scores = Vec::with_capacity(grid.len());
    let mut first_non_finite = None;
    for &value in grid {
        let mut m = make(value)?;
        let mut nll = Vec::with_capacity(blocks.len());
        for (b, block) in blocks.iter().enumerate() {
            let block_nll = m.block_nll(block, train_len)?;
            if !block_nll.sum_nll.is_finite() && first_non_finite.is_none() {
                first_non_finite = Some(EvalError::NonFinite {
                    method: format!("{method} ({parameter} = {value:e}, tuning)"),
                    quantity: "NLL",
                    location: format!("tuning block {b} at train fraction {train_fraction}"),
                    value: block_nll.sum_nll,
                    origin: m.non_finite_origin(block, train_len),
                });
            }
            nll.push(block_nll);
            done += 1;
            progress(
                done,
                total,
                format!("tuning {method} {parameter}={value:e}"),
            );
        }
        let (sum, count) = nll.iter().fold((0.0, 0usize), |(s, c), b: &BlockNll| {
            (s + b.sum_nll, c + b.count)
        });
        let score = sum / count.max(1) as f64;
        scores.push(if score.is_finite() { score } else { f64::NAN });
    }
    // Every value diverged: the first non-finite NLL says where (e.g. the weights).
    let best = best_index(&scores, true).map_err(|e| first_non_finite.unwrap_or(e))?;
    Ok(TuneRecord {
        method: method.into(),
        parameter: parameter.into(),
        grid: grid.to_vec(),
        scores,
        objective: "mean NLL per evaluated token, lower is better".into(),
        choice: grid[best],
        source: format!(
            "{} tuning blocks at train fraction {train_fraction} ({split})",
            blocks.len()
        ),
        tuned: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::non_finite::NonFiniteOrigin;

    /// NLL per target = (log10(step) + 4)² + 1: best at step 1e-4, NaN above 1e-2.
    struct Bowl(f64);

    impl LmMethod for Bowl {
        fn name(&self) -> String {
            "bowl".into()
        }
        fn block_nll(&mut self, block: &[u32], train_len: usize) -> Result<BlockNll, EvalError> {
            let count = block.len() - train_len;
            let per = if self.0 > 1e-2 {
                f64::NAN
            } else {
                (self.0.log10() + 4.0).powi(2) + 1.0
            };
            Ok(BlockNll {
                sum_nll: per * count as f64,
                count,
            })
        }
    }

    #[test]
    fn the_best_grid_value_is_chosen_and_recorded() {
        let blocks = vec![vec![0u32; 10]; 3];
        let mut calls = 0;
        let record = tune_lm(
            "bowl",
            "eta",
            &[1e-5, 1e-4, 1e-3, 1e-1],
            &blocks,
            0.5,
            "test blocks",
            &mut |eta| Ok(Box::new(Bowl(eta))),
            &mut |done, total, _| {
                calls += 1;
                assert!(done <= total);
            },
        )
        .unwrap();
        assert_eq!(calls, 12);
        assert_eq!(record.choice, 1e-4);
        assert!((record.scores[0] - 2.0).abs() < 1e-12);
        assert!(
            record.scores[3].is_nan(),
            "a diverging value is kept as NaN"
        );
        assert!(record.tuned && record.source.contains("3 tuning blocks"));
        assert!(
            record.summary().contains("eta = 1e-4 chosen"),
            "{}",
            record.summary()
        );
        let given = TuneRecord::given("tint", "eta", 1e-4, "--inner-lr");
        assert!(given.summary().contains("not tuned"), "{}", given.summary());
    }

    #[test]
    fn a_grid_that_only_diverges_names_the_first_non_finite_value_and_its_origin() {
        struct Diverging;
        impl LmMethod for Diverging {
            fn name(&self) -> String {
                "diverging".into()
            }
            fn block_nll(&mut self, _: &[u32], _: usize) -> Result<BlockNll, EvalError> {
                Ok(BlockNll {
                    sum_nll: f64::INFINITY,
                    count: 5,
                })
            }
            fn non_finite_origin(&mut self, _: &[u32], _: usize) -> NonFiniteOrigin {
                NonFiniteOrigin::Weights("weight w (1 of 4 values non-finite)".into())
            }
        }
        let blocks = vec![vec![0u32; 10]; 2];
        let err = tune_lm(
            "dyn-eval",
            "eta",
            &[1e-4, 1e-3],
            &blocks,
            0.5,
            "test blocks",
            &mut |_| Ok(Box::new(Diverging)),
            &mut |_, _, _| {},
        )
        .unwrap_err();
        match err {
            EvalError::NonFinite {
                method,
                location,
                origin: NonFiniteOrigin::Weights(w),
                ..
            } => {
                assert_eq!(method, "dyn-eval (eta = 1e-4, tuning)");
                assert_eq!(location, "tuning block 0 at train fraction 0.5");
                assert!(w.starts_with("weight w"), "{w}");
            }
            other => panic!("expected NonFinite from the weights, got {other}"),
        }
    }

    #[test]
    fn a_record_with_a_diverged_value_survives_its_json() {
        let record = TuneRecord {
            scores: vec![1.5, f64::NAN],
            grid: vec![1e-4, 1e-3],
            ..TuneRecord::given("tint", "eta", 1e-4, "--inner-lr")
        };
        let text = serde_json::to_string(&record).unwrap();
        let back: TuneRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back.scores[0], 1.5);
        assert!(back.scores[1].is_nan(), "{text}");
    }

    #[test]
    fn best_index_skips_non_finite_and_respects_direction() {
        assert_eq!(best_index(&[f64::NAN, 3.0, 1.0, 2.0], true).unwrap(), 2);
        assert_eq!(best_index(&[0.5, 0.7, 0.7], false).unwrap(), 1);
        assert!(best_index(&[f64::NAN, f64::INFINITY], true).is_err());
    }
}
