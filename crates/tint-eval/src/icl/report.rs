//! The in-context classification report: a JSON file of every cell (settings, seeds, per-example
//! predictions) that `--resume` reads back, and a markdown table in the layout of the paper's
//! Table 1 (rows: method × shots; columns: tasks and their average; "mean (std)" over seeds).

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::IclError;
use super::result::{CellKey, CellResult};
use super::task::TaskKind;
use crate::lm_tune::TuneRecord;
use crate::paired::{paired_diff, Better, PairedDiff, PairedSettings};

/// Every finished cell of a run, with what produced it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IclReport {
    /// The auxiliary model (path or asset name).
    pub model: String,
    /// The burn backend.
    pub backend: String,
    /// Finished cells, in the order they finished.
    pub cells: Vec<CellResult>,
    /// Paired per-example differences of every row from `icl` and from `dyn-eval` at the same task
    /// and shot count ([`IclReport::compute_paired`]).
    #[serde(default)]
    pub paired: Vec<IclPaired>,
    /// How each method's step size was chosen (dev split, grid, choice) or that it was given.
    #[serde(default)]
    pub tuning: Vec<TuneRecord>,
    /// What must agree for `--resume` to reuse cells (settings, checkpoint and data hashes, code
    /// version); `None` in reports written before it existed (never resumed from).
    #[serde(default)]
    pub fingerprint: Option<serde_json::Value>,
}

/// A paired difference of one row from a baseline row on one task and shot count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IclPaired {
    /// The task.
    pub task: TaskKind,
    /// Shots.
    pub k: usize,
    /// Whether the predictions are calibrated.
    pub calibrated: bool,
    /// `row − baseline` of correctness (1 correct, 0 wrong) per (seed, example); a win is higher.
    pub diff: PairedDiff,
}

/// `1.0` for every correct prediction of a cell, in (seed, example) order.
fn correctness(cell: &CellResult, calibrated: bool) -> Vec<f64> {
    cell.runs
        .iter()
        .flat_map(|r| &r.predictions)
        .map(|p| {
            let predicted = if calibrated {
                p.predicted_calibrated
            } else {
                p.predicted
            };
            f64::from(u8::from(predicted == p.label))
        })
        .collect()
}

/// Whether a row label is the baseline `name` (`icl`, or `dyn-eval(…)` with any settings).
fn is_baseline(label: &str, name: &str) -> bool {
    label == name || label.starts_with(&format!("{name}("))
}

impl IclReport {
    /// An empty report.
    pub fn new(model: impl Into<String>, backend: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            backend: backend.into(),
            cells: Vec::new(),
            paired: Vec::new(),
            tuning: Vec::new(),
            fingerprint: None,
        }
    }

    /// Recomputes [`IclReport::paired`], without and with calibration, for every row that ran the
    /// same seeds on the same examples as its baseline (units: (seed, example) pairs):
    /// * against the `icl` row of the same task and shot count;
    /// * against a `dyn-eval` row of the same task and shot count ([`Self::dyn_eval_baseline`]):
    ///   the one trained in the row's own format and loss where it ran, else the first.
    pub fn compute_paired(&mut self, settings: &PairedSettings) {
        let mut paired = Vec::new();
        for baseline in ["icl", "dyn-eval"] {
            for cell in &self.cells {
                if baseline == "dyn-eval" && cell.key.method == "icl" {
                    continue;
                }
                let base = if baseline == "icl" {
                    self.cells.iter().find(|c| {
                        c.key.task == cell.key.task
                            && c.key.k == cell.key.k
                            && is_baseline(&c.key.method, "icl")
                    })
                } else {
                    self.dyn_eval_baseline(&cell.key)
                };
                let Some(base) = base else { continue };
                let same_units = cell.key != base.key
                    && cell.settings.seeds == base.settings.seeds
                    && cell.settings.n_test == base.settings.n_test;
                if !same_units {
                    continue;
                }
                for calibrated in [false, true] {
                    paired.push(IclPaired {
                        task: cell.key.task,
                        k: cell.key.k,
                        calibrated,
                        diff: paired_diff(
                            (&cell.key.row_label(), &correctness(cell, calibrated)),
                            (&base.key.row_label(), &correctness(base, calibrated)),
                            Better::Higher,
                            settings,
                        ),
                    });
                }
            }
        }
        self.paired = paired;
    }

    /// The `dyn-eval` row a row is compared with, at its task and shot count: for a row of another
    /// method, the `dyn-eval` row trained in the same format with the same loss (TinT with the
    /// full-context loss against dyn-eval with the full-context loss) where it ran; otherwise, and
    /// for `dyn-eval` rows themselves (so its other formats and losses are compared with its
    /// first), the first `dyn-eval` row.
    pub fn dyn_eval_baseline(&self, key: &CellKey) -> Option<&CellResult> {
        let mut candidates = self.cells.iter().filter(|c| {
            c.key.task == key.task && c.key.k == key.k && is_baseline(&c.key.method, "dyn-eval")
        });
        let first = candidates.next()?;
        if is_baseline(&key.method, "dyn-eval") {
            return Some(first);
        }
        let matches = |c: &&CellResult| c.key.format == key.format && c.key.loss == key.loss;
        Some(
            std::iter::once(first)
                .chain(candidates)
                .find(matches)
                .unwrap_or(first),
        )
    }

    /// Markdown tables of the paired differences (accuracy points, mean over (seed, example)
    /// pairs with its 95 % paired bootstrap interval, and wins/pairs), one per baseline and
    /// calibration, rows = method × shots, columns = tasks.
    pub fn paired_markdown(&self) -> String {
        let tasks = self.tasks();
        let mut out = String::new();
        for baseline in ["icl", "dyn-eval"] {
            for calibrated in [false, true] {
                let entries: Vec<&IclPaired> = self
                    .paired
                    .iter()
                    .filter(|p| {
                        p.calibrated == calibrated && is_baseline(&p.diff.baseline, baseline)
                    })
                    .collect();
                if entries.is_empty() {
                    continue;
                }
                out += &format!(
                    "\n*Paired difference from {baseline}, {}* (Δ accuracy points per (seed, \
                     example) pair [95 % paired bootstrap interval], wins/pairs{})\n\n| Method | Shots |",
                    if calibrated { "with calibration" } else { "without calibration" },
                    if baseline == "dyn-eval" {
                        "; each row against the dyn-eval row of its own format and loss where one \
                         ran, else the first dyn-eval row, which the other dyn-eval rows are also \
                         compared with"
                    } else {
                        ""
                    }
                );
                for task in &tasks {
                    out += &format!(" {} |", task.display_name());
                }
                out += "\n|---|---:|";
                out += &"---|".repeat(tasks.len());
                out += "\n";
                let mut rows: Vec<(String, usize)> = Vec::new();
                for e in &entries {
                    let row = (e.diff.method.clone(), e.k);
                    if !rows.contains(&row) {
                        rows.push(row);
                    }
                }
                rows.sort_by_key(|r| r.1);
                for (label, k) in rows {
                    out += &format!("| {label} | {k} |");
                    for &task in &tasks {
                        match entries
                            .iter()
                            .find(|e| e.task == task && e.k == k && e.diff.method == label)
                        {
                            Some(e) => {
                                let d = &e.diff;
                                out += &format!(
                                    " {:+.1} [{:+.1}, {:+.1}], {}/{} |",
                                    100.0 * d.mean,
                                    100.0 * d.ci_low,
                                    100.0 * d.ci_high,
                                    d.wins,
                                    d.n
                                );
                            }
                            None => out += " – |",
                        }
                    }
                    out += "\n";
                }
            }
        }
        out
    }

    /// The finished cell with this key.
    pub fn cell(&self, key: &CellKey) -> Option<&CellResult> {
        self.cells.iter().find(|c| &c.key == key)
    }

    /// Adds `cell`, replacing a finished cell with the same key.
    pub fn upsert(&mut self, cell: CellResult) {
        match self.cells.iter_mut().find(|c| c.key == cell.key) {
            Some(existing) => *existing = cell,
            None => self.cells.push(cell),
        }
    }

    /// Reads a report written by [`IclReport::write_json`].
    ///
    /// # Errors
    ///
    /// I/O and JSON errors.
    pub fn read_json(path: &Path) -> Result<Self, IclError> {
        let text = std::fs::read_to_string(path).map_err(|e| IclError::io(path, e))?;
        serde_json::from_str(&text).map_err(|source| IclError::Json {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Writes the report as pretty JSON (through a temporary file, so an interrupted write never
    /// leaves a truncated report for `--resume`).
    ///
    /// # Errors
    ///
    /// I/O and JSON errors.
    pub fn write_json(&self, path: &Path) -> Result<(), IclError> {
        let text = serde_json::to_string_pretty(self).map_err(|source| IclError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        crate::atomic_write::write_atomic(path, text.as_bytes())
            .map_err(|e| IclError::io(path, e.into()))
    }

    /// Tasks present, in the paper's column order.
    pub fn tasks(&self) -> Vec<TaskKind> {
        let present: BTreeSet<TaskKind> = self.cells.iter().map(|c| c.key.task).collect();
        TaskKind::ALL
            .into_iter()
            .filter(|t| present.contains(t))
            .collect()
    }

    /// Table rows `(row label, k)` in first-finished order.
    pub fn rows(&self) -> Vec<(String, usize)> {
        let mut rows: Vec<(String, usize)> = Vec::new();
        for cell in &self.cells {
            let row = (cell.key.row_label(), cell.key.k);
            if !rows.contains(&row) {
                rows.push(row);
            }
        }
        rows.sort_by_key(|(_, k)| *k);
        rows
    }

    /// The cell of a row and task.
    pub fn lookup(&self, row: &(String, usize), task: TaskKind) -> Option<&CellResult> {
        self.cells
            .iter()
            .find(|c| c.key.task == task && c.key.k == row.1 && c.key.row_label() == row.0)
    }

    /// Markdown tables "Without Calibration" and "With Calibration" in the paper's layout: one row
    /// per method and shot count, one column per task, then the average over the row's tasks.
    /// Accuracies in percent, "mean (std)" over seeds for k-shot rows.
    pub fn markdown(&self) -> String {
        let tasks = self.tasks();
        let mut out = format!(
            "In-context classification, model `{}`, backend `{}`; accuracy (%), few-shot rows: mean (std) over seeds.\n",
            self.model, self.backend
        );
        for calibrated in [false, true] {
            out.push_str(if calibrated {
                "\n*With Calibration*\n\n"
            } else {
                "\n*Without Calibration*\n\n"
            });
            out.push_str("| Method | Shots |");
            for task in &tasks {
                out.push_str(&format!(" {} |", task.display_name()));
            }
            out.push_str(" Avg. |\n|---|---:|");
            out.push_str(&"---:|".repeat(tasks.len() + 1));
            out.push('\n');
            for row in self.rows() {
                out.push_str(&format!("| {} | {} |", row.0, row.1));
                let mut means = Vec::new();
                for &task in &tasks {
                    match self.lookup(&row, task) {
                        Some(cell) => {
                            let (mean, std) = if calibrated {
                                (cell.calibrated_mean, cell.calibrated_std)
                            } else {
                                (cell.accuracy_mean, cell.accuracy_std)
                            };
                            means.push(mean);
                            out.push_str(&format!(" {} |", percent(mean, std, row.1 > 0)));
                        }
                        None => out.push_str(" – |"),
                    }
                }
                match means.is_empty() {
                    true => out.push_str(" – |\n"),
                    false => {
                        let avg = means.iter().sum::<f64>() / means.len() as f64;
                        out.push_str(&format!(" {:.1} |\n", 100.0 * avg));
                    }
                }
            }
        }
        out.push_str(&self.paired_markdown());
        if !self.tuning.is_empty() {
            out.push_str("\nStep sizes:\n\n");
            for t in &self.tuning {
                out.push_str(&format!("- {}\n", t.summary()));
            }
        }
        out
    }
}

fn percent(mean: f64, std: f64, with_std: bool) -> String {
    if with_std {
        format!("{:.1} ({:.1})", 100.0 * mean, 100.0 * std)
    } else {
        format!("{:.1}", 100.0 * mean)
    }
}
