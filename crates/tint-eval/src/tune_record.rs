//! The record of how a step size was set, which every report carries (LM and ICL alike): the grid,
//! the score of each grid value on the tuning split, the choice and whether it is interior — or that
//! the value was given on the command line and nothing was tuned. The tuning itself is in
//! [`crate::lm_tune`] (LM) and [`crate::icl::tune`] (ICL).

use serde::{Deserialize, Serialize};

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
    #[serde(deserialize_with = "tint_lab::json_nan::nans_if_null")]
    pub scores: Vec<f64>,
    /// What the score is (e.g. "mean NLL per token, lower is better").
    pub objective: String,
    /// The value used for evaluation.
    pub choice: f64,
    /// The tuning split in words, or the flag that gave the value.
    pub source: String,
    /// Whether `choice` was tuned (false: given on the command line).
    pub tuned: bool,
    /// The train fraction of the tuning blocks (`None`: not tuned, or an ICL dev set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_fraction: Option<f64>,
    /// Grid values added beyond the given grid because the best value was on its edge
    /// ([`bracket`](crate::lm_tune::bracket)); they are in `grid` too.
    #[serde(default)]
    pub extended: Vec<f64>,
    /// Whether the choice has a scored value on both sides in `grid` (a bracketed optimum; a
    /// diverged value counts as a worse one), or is 0 (no step, the end of the step's domain)
    /// with a worse positive value above. Always true for a tuned record written since
    /// bracketing exists ([`bracket`](crate::lm_tune::bracket) refuses an edge choice); false for a given value.
    #[serde(default)]
    pub interior: bool,
    /// The digest of what the tuning was computed from (ICL: the dev examples, template, tuning
    /// settings, method and grid: `crate::icl::cell_digest::tuning_inputs_sha256`; LM: the row,
    /// grid, tuning blocks and fraction: `crate::lm_grid::tuning_inputs_sha256`), so that
    /// another report's record is reused only for the same computation (`--cells-from`); `None`
    /// where not recorded (given values, reports written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs_sha256: Option<String>,
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
            train_fraction: None,
            extended: Vec::new(),
            interior: false,
            inputs_sha256: None,
        }
    }

    /// Whether the choice has a grid value on each side: from the grid itself, so that records
    /// written before `interior` was (whose field reads as false) are described truly.
    pub fn is_interior(&self) -> bool {
        let below = self.grid.iter().any(|g| *g < self.choice) || self.is_no_step();
        let above = self.grid.iter().any(|g| *g > self.choice);
        self.tuned && below && above
    }

    /// Whether the tuning chose no step (0): every positive step scored worse.
    pub fn is_no_step(&self) -> bool {
        self.tuned && self.choice == 0.0 && self.grid.first() == Some(&0.0)
    }

    /// Checks that a stored tuned record says what its own numbers say (before `--resume` reuses
    /// it): one score per grid value, an increasing grid holding the added values, the choice the
    /// best finite score's value, and `interior` as the grid makes it. A hand-edited choice or
    /// score fails.
    ///
    /// # Errors
    ///
    /// The first rule broken, in words.
    pub fn check(&self) -> Result<(), String> {
        if self.grid.len() != self.scores.len() {
            return Err(format!(
                "{} grid values but {} scores",
                self.grid.len(),
                self.scores.len()
            ));
        }
        if !self.grid.windows(2).all(|w| w[0] < w[1]) {
            return Err(format!("grid {:?} is not increasing", self.grid));
        }
        if let Some(v) = self.extended.iter().find(|v| !self.grid.contains(v)) {
            return Err(format!("extension {v:e} is not in the grid"));
        }
        let best = best_index(&self.scores, true).map_err(|e| e.to_string())?;
        if self.grid[best] != self.choice {
            return Err(format!(
                "choice {:e} is not the best score's value {:e}",
                self.choice, self.grid[best]
            ));
        }
        if self.interior != self.is_interior() {
            return Err(format!(
                "`interior` = {} disagrees with the grid",
                self.interior
            ));
        }
        Ok(())
    }

    /// The grid the settings gave: `grid` without the values [`bracket`](crate::lm_tune::bracket) added.
    pub fn given_grid(&self) -> Vec<f64> {
        self.grid
            .iter()
            .copied()
            .filter(|g| !self.extended.contains(g))
            .collect()
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
        let extended = if self.extended.is_empty() {
            String::new()
        } else {
            let added: Vec<String> = self.extended.iter().map(|g| format!("{g:e}")).collect();
            format!(
                "; grid extended by {} to bracket the best",
                added.join(", ")
            )
        };
        let bracketed = if self.is_no_step() {
            "no step: every step tried scored worse"
        } else if self.is_interior() {
            "interior"
        } else {
            "on the grid's edge"
        };
        format!(
            "`{}`: {} = {:e} ({bracketed}) chosen from {{{}}} ({}) on {}{extended}",
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
        name: "--tune",
        value: format!("{scores:?}"),
        rule: "no grid value gave a finite score on the tuning split".into(),
    })
}
