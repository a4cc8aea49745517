//! The points of a learning curve (`cargo xtask eval cgt --eval-every N`): the held-out in-context
//! accuracy and the no-example (format-only) accuracy measured during training, kept in
//! `curve.jsonl` beside the run's loss log. The chart and table over the runs are in [`crate::curve`].

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tint_cgt::metrics::IclEvaluation;

use super::error::CgtRunError;
use tint_assets::write_atomic;

/// The held-out accuracies after `step` training steps.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Training steps done.
    pub step: usize,
    /// Answer-character accuracy on the last two examples of every task ([`IclEvaluation::dynamic_accuracy`]).
    pub dynamic_accuracy: f64,
    /// The same on the first example of every task ([`IclEvaluation::no_example_accuracy`]).
    pub no_example_accuracy: f64,
}

impl CurvePoint {
    /// The point of an evaluation after `step` steps.
    pub fn of(step: usize, evaluation: &IclEvaluation) -> Self {
        Self {
            step,
            dynamic_accuracy: evaluation.dynamic_accuracy,
            no_example_accuracy: evaluation.no_example_accuracy,
        }
    }

    /// In-context gain: dynamic minus no-example accuracy.
    pub fn gain(&self) -> f64 {
        self.dynamic_accuracy - self.no_example_accuracy
    }
}

/// The points of `path` (none when it does not exist).
///
/// # Errors
/// The file cannot be read, or a line is not a point ([`CgtRunError::Curve`]).
pub fn read_curve(path: &Path) -> Result<Vec<CurvePoint>, CgtRunError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(path).map_err(|source| CgtRunError::Io {
        operation: "read",
        path: path.to_path_buf(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| CgtRunError::Curve {
                path: path.to_path_buf(),
                line: i + 1,
                message: e.to_string(),
            })
        })
        .collect()
}

/// Appends one point to `path` (created with its directory when missing).
///
/// # Errors
/// The file cannot be opened or written.
pub fn append_point(path: &Path, point: &CurvePoint) -> Result<(), CgtRunError> {
    let io = |operation| {
        move |source| CgtRunError::Io {
            operation,
            path: path.to_path_buf(),
            source,
        }
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io("create"))?;
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io("open for appending"))?;
    let line = serde_json::to_string(point).expect("a curve point serialises");
    writeln!(file, "{line}").map_err(io("append to"))
}

/// The points of a run of `steps` steps: one per step (a step evaluated again after a resume keeps
/// its last value), in step order, none past `steps`.
pub fn settle(points: Vec<CurvePoint>, steps: usize) -> Vec<CurvePoint> {
    let mut settled: Vec<CurvePoint> = Vec::new();
    for point in points.into_iter().filter(|p| p.step <= steps) {
        match settled.iter_mut().find(|p| p.step == point.step) {
            Some(existing) => *existing = point,
            None => settled.push(point),
        }
    }
    settled.sort_by_key(|p| p.step);
    settled
}

/// Reads `path`, settles it for a run of `steps` steps and rewrites it atomically.
///
/// # Errors
/// As [`read_curve`]; the file cannot be written.
pub fn settle_file(path: &Path, steps: usize) -> Result<Vec<CurvePoint>, CgtRunError> {
    let points = settle(read_curve(path)?, steps);
    if path.exists() {
        let mut text = String::new();
        for point in &points {
            text.push_str(&serde_json::to_string(point).expect("a curve point serialises"));
            text.push('\n');
        }
        write_atomic(path, text.as_bytes())?;
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(step: usize, dynamic: f64) -> CurvePoint {
        CurvePoint {
            step,
            dynamic_accuracy: dynamic,
            no_example_accuracy: 0.25,
        }
    }

    #[test]
    fn settling_keeps_the_last_value_of_a_step_in_step_order() {
        let points = vec![
            point(20, 0.5),
            point(10, 0.4),
            point(20, 0.6),
            point(30, 0.7),
        ];
        assert_eq!(settle(points, 25), [point(10, 0.4), point(20, 0.6)]);
    }

    #[test]
    fn a_curve_file_round_trips_and_a_bad_line_names_file_and_line() {
        let dir = std::env::temp_dir().join(format!("tint-eval-curve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("run").join("curve.jsonl");
        assert!(read_curve(&path).unwrap().is_empty());
        for p in [point(10, 0.4), point(20, 0.5), point(10, 0.45)] {
            append_point(&path, &p).unwrap();
        }
        assert_eq!(
            settle_file(&path, 100).unwrap(),
            [point(10, 0.45), point(20, 0.5)]
        );
        assert_eq!(
            read_curve(&path).unwrap(),
            [point(10, 0.45), point(20, 0.5)]
        );
        std::fs::write(&path, "{\"step\": 3}\n").unwrap();
        let error = read_curve(&path).unwrap_err().to_string();
        assert!(error.contains("curve.jsonl line 1"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_gain_is_dynamic_minus_no_example() {
        // 0.625 - 0.25: exact in binary.
        assert_eq!(point(1, 0.625).gain(), 0.375);
    }
}
