//! Step-size selection on a tuning split (never on evaluated data): a grid bracketed until its best
//! value is interior, scored on the tuning blocks; what was chosen goes into a
//! [`TuneRecord`].

use crate::lm::LmMethod;
use crate::perplexity::BlockNll;
use crate::tune_record::{best_index, TuneRecord};
use crate::EvalError;

/// Extensions past an edge that [`bracket`] tries by default before it stops with
/// [`EvalError::Unbracketed`] (`--tune-extend`).
pub const DEFAULT_MAX_EXTENSIONS: usize = 3;

/// A grid scored until its best value is interior ([`bracket`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Bracketed {
    /// Every scored value, increasing (the given grid and the extensions).
    pub grid: Vec<f64>,
    /// The score of each value (NaN: not finite, a diverged step).
    pub scores: Vec<f64>,
    /// The values added past an edge, in the order they were scored.
    pub extended: Vec<f64>,
    /// Index of the best (lowest finite) score in `grid`; never on an edge.
    pub best: usize,
}

/// Checks a tuning grid: at least two positive, finite values in strictly increasing order (an
/// edge needs a neighbour to extend from, and an unsorted or repeated grid hides which value is
/// an edge).
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] naming `--tune` and the grid.
pub fn check_grid(grid: &[f64]) -> Result<(), EvalError> {
    let ok = grid.len() >= 2
        && grid.iter().all(|g| g.is_finite() && *g > 0.0)
        && grid.windows(2).all(|w| w[0] < w[1]);
    if ok {
        Ok(())
    } else {
        Err(EvalError::InvalidSetting {
            name: "--tune",
            value: format!("{grid:?}"),
            rule: "a tuning grid needs at least two positive, finite values in increasing order"
                .into(),
        })
    }
}

/// `v` rounded to 10 significant digits, so that an extension of `{1e-4, 3e-4}` is `9e-4` and not
/// `8.999999999999998e-4` in reports (a relative change below 1e-10 of a step size).
fn tidy(v: f64) -> f64 {
    format!("{v:.9e}").parse().unwrap_or(v)
}

/// Scores `grid` with `score` (lower is better) and, while the best finite score is the grid's
/// smallest or largest value, extends the grid past that edge by the ratio of the two values at
/// that edge (`g₀² / g₁` below, `gₙ² / gₙ₋₁` above) and scores the new value, at most
/// `max_extensions` times. A non-finite score (a diverged step) is never best but counts as a worse
/// neighbour: the best value below a diverged one is interior. When the extensions downwards are
/// spent and the smallest value is still best, the end of the step's domain, 0 (no update), is
/// scored as well: either it is best (the step does not help on the tuning data, and 0 is the
/// choice, bracketed by the domain) or the smallest positive value is interior.
///
/// # Errors
///
/// A grid that [`check_grid`] refuses; errors of `score`; [`EvalError::InvalidSetting`] when no
/// value scores finite; [`EvalError::Unbracketed`] (naming `method` and `parameter`) when the
/// best value is still on an edge after `max_extensions` extensions.
pub fn bracket(
    method: &str,
    parameter: &str,
    grid: &[f64],
    max_extensions: usize,
    score: &mut dyn FnMut(f64) -> Result<f64, EvalError>,
) -> Result<Bracketed, EvalError> {
    bracket_grid(method, parameter, grid, max_extensions, &mut |values| {
        values.iter().map(|&v| score(v)).collect()
    })
}

/// Scores of several step sizes at once, in their order ([`bracket_grid`]).
pub type ScoreValues<'s> = dyn FnMut(&[f64]) -> Result<Vec<f64>, EvalError> + 's;

/// [`bracket`] with `score` given several values at once (the whole grid first, then each
/// extension alone) and returning their scores in order, so that values can share work: e.g. the
/// grid scored block by block, each block's gradient computed once for every value.
///
/// # Errors
///
/// As [`bracket`].
pub fn bracket_grid(
    method: &str,
    parameter: &str,
    grid: &[f64],
    max_extensions: usize,
    score: &mut ScoreValues<'_>,
) -> Result<Bracketed, EvalError> {
    check_grid(grid)?;
    let mut values = grid.to_vec();
    let mut scores: Vec<f64> = score(&values)?
        .into_iter()
        .map(|s| if s.is_finite() { s } else { f64::NAN })
        .collect();
    let mut score = |v: f64| score(&[v]).map(|s| s[0]);
    let mut extended = Vec::new();
    loop {
        let best = best_index(&scores, true)?;
        let last = values.len() - 1;
        // A step of 0 (no update) ends the step's domain: chosen there, the step is bracketed.
        let edge = if best == 0 && values[0] == 0.0 {
            return Ok(Bracketed {
                grid: values,
                scores,
                extended,
                best,
            });
        } else if best == 0 {
            "smallest"
        } else if best == last {
            "largest"
        } else {
            return Ok(Bracketed {
                grid: values,
                scores,
                extended,
                best,
            });
        };
        let zero_tried = values[0] == 0.0;
        if best == 0 && extended.len() >= max_extensions && !zero_tried {
            // The extensions downwards are spent: the domain's end, no step, is scored last.
            let s = score(0.0)?;
            values.insert(0, 0.0);
            scores.insert(0, if s.is_finite() { s } else { f64::NAN });
            extended.push(0.0);
            continue;
        }
        if extended.len() >= max_extensions {
            return Err(EvalError::Unbracketed(Box::new(
                crate::error::Unbracketed {
                    method: method.into(),
                    parameter: parameter.into(),
                    best: values[best],
                    grid: values,
                    scores,
                    edge,
                    extensions: extended.len(),
                },
            )));
        }
        if best == 0 {
            let v = tidy(values[0] * values[0] / values[1]);
            let s = score(v)?;
            values.insert(0, v);
            scores.insert(0, if s.is_finite() { s } else { f64::NAN });
            extended.push(v);
        } else {
            let v = tidy(values[last] * values[last] / values[last - 1]);
            let s = score(v)?;
            values.push(v);
            scores.push(if s.is_finite() { s } else { f64::NAN });
            extended.push(v);
        }
    }
}

/// Chooses `parameter` for `method` from `grid`: every value builds a method with `make`, which is
/// scored by its token-weighted mean NLL on the evaluated parts of the tuning `blocks` at
/// `train_fraction`; the lowest wins, and a best value on an edge of the grid extends it
/// ([`bracket`], at most `max_extensions` values). A value whose losses are not finite (a diverging
/// step) scores NaN and is never chosen. `split` describes the tuning blocks for the record;
/// `progress` is called after each block with `(done, total, message)`, where `total` counts the
/// given grid (and grows by one value's blocks when the grid is extended).
///
/// With `by_block`, the given grid's methods are built at once and scored block by block (each
/// block by every value before the next block), so that methods sharing a block's work (one
/// gradient for every step size: [`crate::lm_grid::shares_gradients`]) do it once per block;
/// otherwise value by value, one method alive at a time. Each value's score sums its blocks in
/// block order either way: the same record.
///
/// # Errors
///
/// An invalid grid ([`check_grid`]) or an empty block list, a fraction that leaves no training or
/// evaluated token, errors of the methods, a grid on which every value diverges
/// ([`EvalError::NonFinite`] of the first non-finite NLL, with its origin), and a best value still
/// on an edge after the extensions ([`EvalError::Unbracketed`]).
#[allow(clippy::too_many_arguments)]
pub fn tune_lm<'a>(
    method: &str,
    parameter: &str,
    grid: &[f64],
    max_extensions: usize,
    blocks: &[Vec<u32>],
    train_fraction: f64,
    split: &str,
    by_block: bool,
    make: &mut dyn FnMut(f64) -> Result<Box<dyn LmMethod + 'a>, EvalError>,
    progress: &mut dyn FnMut(usize, usize, String),
) -> Result<TuneRecord, EvalError> {
    if blocks.is_empty() {
        return Err(EvalError::InvalidSetting {
            name: "--tune",
            value: format!("{} grid values, 0 blocks", grid.len()),
            rule: "tuning needs at least one tuning block".into(),
        });
    }
    check_grid(grid)?;
    let block_size = blocks[0].len();
    let spec = crate::blocks::BlockSpec {
        block_size,
        train_fraction,
        max_blocks: 1,
    };
    spec.validate()?;
    let mut scoring = TuneScoring {
        method,
        parameter,
        train_len: spec.train_len(),
        train_fraction,
        total: grid.len() * blocks.len(),
        done: 0,
        first_non_finite: None,
        progress,
    };
    let mut score = |values: &[f64]| -> Result<Vec<f64>, EvalError> {
        if scoring.done >= scoring.total {
            scoring.total += values.len() * blocks.len();
        }
        let mut nll = vec![Vec::with_capacity(blocks.len()); values.len()];
        if by_block && values.len() > 1 {
            let mut methods = values
                .iter()
                .map(|&v| make(v))
                .collect::<Result<Vec<_>, _>>()?;
            for (b, block) in blocks.iter().enumerate() {
                for ((m, &value), nll) in methods.iter_mut().zip(values).zip(&mut nll) {
                    nll.push(scoring.block(m.as_mut(), value, b, block)?);
                }
            }
        } else {
            for (&value, nll) in values.iter().zip(&mut nll) {
                let mut m = make(value)?;
                for (b, block) in blocks.iter().enumerate() {
                    nll.push(scoring.block(m.as_mut(), value, b, block)?);
                }
            }
        }
        Ok(nll.iter().map(|blocks| mean_nll(blocks)).collect())
    };
    let bracketed = bracket_grid(method, parameter, grid, max_extensions, &mut score);
    // Every value diverged: the first non-finite NLL says where (e.g. the weights).
    let bracketed = match bracketed {
        Err(EvalError::InvalidSetting { name: "--tune", .. })
            if scoring.first_non_finite.is_some() =>
        {
            return Err(scoring.first_non_finite.expect("checked"))
        }
        other => other?,
    };
    Ok(TuneRecord {
        method: method.into(),
        parameter: parameter.into(),
        choice: bracketed.grid[bracketed.best],
        grid: bracketed.grid,
        scores: bracketed.scores,
        objective: "mean NLL per evaluated token, lower is better".into(),
        source: format!(
            "{} tuning blocks at train fraction {train_fraction} ({split})",
            blocks.len()
        ),
        tuned: true,
        train_fraction: Some(train_fraction),
        extended: bracketed.extended,
        interior: true,
        inputs_sha256: None,
    })
}

/// The token-weighted mean NLL of scored blocks.
fn mean_nll(blocks: &[BlockNll]) -> f64 {
    let (sum, count) = blocks
        .iter()
        .fold((0.0, 0usize), |(s, c), b| (s + b.sum_nll, c + b.count));
    sum / count.max(1) as f64
}

/// What [`tune_lm`] keeps while it scores blocks: the progress count and the first non-finite
/// NLL (with its origin).
struct TuneScoring<'p> {
    method: &'p str,
    parameter: &'p str,
    train_len: usize,
    train_fraction: f64,
    /// Blocks to score (the given grid's, and each extension's once it starts).
    total: usize,
    done: usize,
    first_non_finite: Option<EvalError>,
    progress: &'p mut dyn FnMut(usize, usize, String),
}

impl TuneScoring<'_> {
    /// Tuning block `b` scored by `m`, built for `value`.
    fn block(
        &mut self,
        m: &mut dyn LmMethod,
        value: f64,
        b: usize,
        block: &[u32],
    ) -> Result<BlockNll, EvalError> {
        let (method, parameter, train_fraction) =
            (self.method, self.parameter, self.train_fraction);
        let block_nll = m.block_nll(block, self.train_len)?;
        if !block_nll.sum_nll.is_finite() && self.first_non_finite.is_none() {
            self.first_non_finite = Some(EvalError::NonFinite {
                method: format!("{method} ({parameter} = {value:e}, tuning)"),
                quantity: "NLL",
                location: format!("tuning block {b} at train fraction {train_fraction}"),
                value: block_nll.sum_nll,
                origin: m.non_finite_origin(block, self.train_len),
            });
        }
        self.done += 1;
        (self.progress)(
            self.done,
            self.total,
            format!("tuning {method} {parameter}={value:e} f={train_fraction}"),
        );
        Ok(block_nll)
    }
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
            DEFAULT_MAX_EXTENSIONS,
            &blocks,
            0.5,
            "test blocks",
            false,
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
            record.summary().contains("eta = 1e-4 (interior) chosen"),
            "{}",
            record.summary()
        );
        let given = TuneRecord::given("tint", "eta", 1e-4, "--inner-lr");
        assert!(given.summary().contains("not tuned"), "{}", given.summary());
    }

    #[test]
    fn by_block_scores_every_value_of_a_block_before_the_next_block_and_records_the_same() {
        // A bowl that logs (step, block's first token) and whose NLL varies by block.
        struct Logged(f64, std::rc::Rc<std::cell::RefCell<Vec<(f64, u32)>>>);
        impl LmMethod for Logged {
            fn name(&self) -> String {
                "logged".into()
            }
            fn block_nll(
                &mut self,
                block: &[u32],
                train_len: usize,
            ) -> Result<BlockNll, EvalError> {
                self.1.borrow_mut().push((self.0, block[0]));
                let count = block.len() - train_len;
                let per = (self.0.log10() + 4.0).powi(2) + 1.0 + f64::from(block[0]) * 0.1;
                Ok(BlockNll {
                    sum_nll: per * count as f64,
                    count,
                })
            }
        }
        let blocks: Vec<Vec<u32>> = (0..3).map(|b| vec![b; 10]).collect();
        let run = |by_block: bool| {
            let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let mut totals = Vec::new();
            let record = tune_lm(
                "logged",
                "eta",
                &[1e-6, 1e-5],
                DEFAULT_MAX_EXTENSIONS,
                &blocks,
                0.5,
                "test blocks",
                by_block,
                &mut |eta| Ok(Box::new(Logged(eta, log.clone()))),
                &mut |done, total, _| totals.push((done, total)),
            )
            .unwrap();
            let order = log.borrow().clone();
            (record, order, totals)
        };
        let (by_value, value_order, value_totals) = run(false);
        let (by_block, block_order, block_totals) = run(true);
        assert_eq!(by_block, by_value, "the same record, to the bit");
        assert_eq!(value_totals, block_totals, "the same progress");
        // The given grid block by block, then each extension (1e-4, 1e-3) value by value.
        let (a, b) = (1e-6, 1e-5);
        assert_eq!(
            block_order[..6],
            [(a, 0), (b, 0), (a, 1), (b, 1), (a, 2), (b, 2)],
            "{block_order:?}"
        );
        assert_eq!(
            value_order[..6],
            [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1), (b, 2)],
            "{value_order:?}"
        );
        assert_eq!(block_order[6..], value_order[6..]);
        assert_eq!(block_order.len(), 12);
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
            DEFAULT_MAX_EXTENSIONS,
            &blocks,
            0.5,
            "test blocks",
            false,
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

    /// The bowl's score (its minimum at 1e-4) for the bracketing tests.
    fn bowl_score(step: f64) -> Result<f64, EvalError> {
        Ok((step.log10() + 4.0).powi(2) + 1.0)
    }

    #[test]
    fn an_edge_choice_extends_the_grid_until_the_best_is_interior() {
        // Best at the largest value of {1e-6, 1e-5}: two extensions upwards (1e-4, then 1e-3,
        // which is worse) bracket the minimum at 1e-4.
        let mut scored = Vec::new();
        let up = bracket("bowl", "eta", &[1e-6, 1e-5], 3, &mut |v| {
            scored.push(v);
            bowl_score(v)
        })
        .unwrap();
        let close = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-12;
        assert_eq!(scored.len(), 4, "{scored:?}");
        assert!(close(up.grid[up.best], 1e-4), "{up:?}");
        assert_eq!(up.extended.len(), 2);
        assert!(close(up.extended[0], 1e-4) && close(up.extended[1], 1e-3));
        assert!(up.best > 0 && up.best < up.grid.len() - 1);
        assert!(up.grid.windows(2).all(|w| w[0] < w[1]));
        // Best at the smallest value of {1e-2, 1e-1}: extended downwards (ratio 10).
        let down = bracket("bowl", "eta", &[1e-2, 1e-1], 3, &mut bowl_score).unwrap();
        assert!(close(down.grid[down.best], 1e-4), "{down:?}");
        assert!(close(down.grid[0], 1e-5) && down.extended.len() == 3);
        // An interior best is not extended.
        let inner = bracket("bowl", "eta", &[1e-5, 1e-4, 1e-3], 3, &mut bowl_score).unwrap();
        assert!(inner.extended.is_empty() && inner.best == 1);
        // A diverged value above the best brackets it.
        let diverged = bracket("bowl", "eta", &[1e-5, 1e-4], 3, &mut |v| {
            Ok(if v > 2e-4 { f64::NAN } else { bowl_score(v)? })
        })
        .unwrap();
        assert_eq!(diverged.best, 1);
        assert!(diverged.scores[2].is_nan() && diverged.extended.len() == 1);
    }

    #[test]
    fn an_edge_choice_that_stays_on_the_edge_stops_with_a_clear_error() {
        // The loss falls with the step all the way: never bracketed.
        let err = bracket("dyn-eval f=0.5", "eta", &[1e-6, 1e-5], 2, &mut |v| Ok(-v)).unwrap_err();
        match &err {
            EvalError::Unbracketed(grid) => {
                assert_eq!(grid.method, "dyn-eval f=0.5");
                assert_eq!(grid.edge, "largest");
                assert_eq!(grid.extensions, 2);
                assert_eq!(grid.grid.len(), 4);
            }
            other => panic!("expected Unbracketed, got {other}"),
        }
        let text = err.to_string();
        assert!(
            text.contains("dyn-eval f=0.5") && text.contains("--tune-extend"),
            "{text}"
        );
        // Without extensions, an edge choice is refused at once.
        assert!(bracket("bowl", "eta", &[1e-6, 1e-5], 0, &mut bowl_score).is_err());
    }

    #[test]
    fn a_lower_edge_that_stays_scores_no_step_and_brackets_there() {
        // Every step hurts (the objective rises with the step): after the extensions the domain's
        // end, 0, is scored and chosen.
        let mut scored = Vec::new();
        let none = bracket("dyn-eval", "lr", &[1e-4, 1e-3], 2, &mut |v| {
            scored.push(v);
            Ok(1.0 + v)
        })
        .unwrap();
        assert_eq!(scored, vec![1e-4, 1e-3, 1e-5, 1e-6, 0.0]);
        assert_eq!((none.best, none.grid[0]), (0, 0.0));
        assert_eq!(none.extended.last(), Some(&0.0));
        let record = TuneRecord {
            method: "dyn-eval".into(),
            parameter: "lr".into(),
            choice: 0.0,
            grid: none.grid.clone(),
            scores: none.scores.clone(),
            objective: "test".into(),
            source: "test".into(),
            tuned: true,
            train_fraction: None,
            extended: none.extended.clone(),
            interior: true,
            inputs_sha256: None,
        };
        assert!(record.is_no_step() && record.is_interior());
        assert_eq!(record.check(), Ok(()));
        assert!(record.summary().contains("no step"), "{}", record.summary());
        // No step scores worse than the smallest step: that step is interior.
        let small = bracket("dyn-eval", "lr", &[1e-4, 1e-3], 1, &mut |v| {
            Ok(if v == 0.0 { 2.0 } else { 1.0 + v })
        })
        .unwrap();
        assert_eq!(small.grid, vec![0.0, 1e-5, 1e-4, 1e-3]);
        assert_eq!(small.best, 1);
        // No step that diverges (a NaN) is never chosen either.
        let nan = bracket("x", "eta", &[1e-4, 1e-3], 0, &mut |v| {
            Ok(if v == 0.0 { f64::NAN } else { 1.0 + v })
        })
        .unwrap();
        assert_eq!((nan.grid[0], nan.best), (0.0, 1));
    }

    #[test]
    fn extensions_are_tidy_numbers() {
        let up = bracket("tint-ref", "eta", &[1e-4, 3e-4], 1, &mut |v| Ok(-v))
            .map(|_| ())
            .unwrap_err();
        match up {
            EvalError::Unbracketed(grid) => assert_eq!(grid.grid[2], 9e-4, "{:?}", grid.grid),
            other => panic!("expected Unbracketed, got {other}"),
        }
    }

    #[test]
    fn grids_that_cannot_bracket_are_refused() {
        for bad in [
            vec![1e-4],
            vec![1e-4, 1e-5],
            vec![1e-4, 1e-4],
            vec![0.0, 1e-4],
            vec![1e-4, f64::INFINITY],
        ] {
            assert!(check_grid(&bad).is_err(), "{bad:?} must be refused");
        }
        assert!(check_grid(&[1e-5, 3e-5]).is_ok());
    }

    #[test]
    fn a_tuned_record_says_it_was_extended_and_interior() {
        let blocks = vec![vec![0u32; 10]; 2];
        let record = tune_lm(
            "bowl",
            "eta",
            &[1e-6, 1e-5],
            DEFAULT_MAX_EXTENSIONS,
            &blocks,
            0.3,
            "test blocks",
            false,
            &mut |eta| Ok(Box::new(Bowl(eta))),
            &mut |done, total, _| assert!(done <= total),
        )
        .unwrap();
        assert!((record.choice / 1e-4 - 1.0).abs() < 1e-12);
        assert!(record.interior && record.extended.len() == 2);
        assert_eq!(record.train_fraction, Some(0.3));
        assert_eq!(record.given_grid(), vec![1e-6, 1e-5]);
        let summary = record.summary();
        assert!(
            summary.contains("(interior)") && summary.contains("grid extended by"),
            "{summary}"
        );
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["interior"], true);
        assert_eq!(json["train_fraction"], 0.3);

        // `--resume` reuses it only while its numbers say its choice.
        assert_eq!(record.check(), Ok(()));
        let edited = [
            TuneRecord {
                choice: record.grid[0],
                ..record.clone()
            },
            TuneRecord {
                scores: record.scores.iter().rev().copied().collect(),
                ..record.clone()
            },
            TuneRecord {
                interior: false,
                ..record.clone()
            },
            TuneRecord {
                scores: record.scores[1..].to_vec(),
                ..record.clone()
            },
        ];
        for bad in edited {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn records_written_before_interior_was_recorded_are_described_from_their_grid() {
        let old = r#"{"method": "dyn-eval", "parameter": "lr", "grid": [1e-3, 3e-3, 1e-2],
            "scores": [0.75, 0.58, 1.25], "objective": "o", "choice": 3e-3, "source": "s",
            "tuned": true}"#;
        let record: TuneRecord = serde_json::from_str(old).unwrap();
        assert!(!record.interior && record.is_interior());
        assert!(
            record.summary().contains("(interior)"),
            "{}",
            record.summary()
        );
        let edge = TuneRecord {
            choice: 1e-2,
            ..record
        };
        assert!(
            edge.summary().contains("on the grid's edge"),
            "{}",
            edge.summary()
        );
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
