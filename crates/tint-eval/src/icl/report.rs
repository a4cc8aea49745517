//! The in-context classification report: a JSON file of every cell (settings, seeds, per-example
//! predictions) that `--resume` reads back, and a markdown table in the layout of the paper's
//! Table 1 (rows: method × shots; columns: tasks and their average; "mean (std)" over seeds).

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::IclError;
use super::result::{CellKey, CellResult};
use super::task::TaskKind;

/// Every finished cell of a run, with what produced it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IclReport {
    /// The auxiliary model (path or asset name).
    pub model: String,
    /// The burn backend.
    pub backend: String,
    /// Finished cells, in the order they finished.
    pub cells: Vec<CellResult>,
}

impl IclReport {
    /// An empty report.
    pub fn new(model: impl Into<String>, backend: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            backend: backend.into(),
            cells: Vec::new(),
        }
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
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(|e| IclError::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| IclError::io(path, e))
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
