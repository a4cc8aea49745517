//! The in-context classification report: a JSON file of every cell (settings, seeds, per-example
//! predictions) that `--resume` reads back, and a markdown table in the layout of the paper's
//! Table 1 (rows: method × shots; columns: tasks and their average; "mean (std)" over seeds).

use std::collections::BTreeSet;
use std::path::Path;
use tint_lab::table::{Align, Table};

use serde::{Deserialize, Serialize};

use super::result::{CellKey, CellResult};
use super::task::TaskKind;
use crate::tune_record::TuneRecord;
use crate::EvalError;
use tint_lab::paired::{paired_diff_clustered, Better, PairedDiff, PairedSettings};

/// [`PairedDiff::resampled`] of the ICL paired differences: the bootstrap draws test queries, and
/// a drawn query brings the units of all its seeds.
pub const QUERIES_RESAMPLED: &str = "queries (each keeps its seeds together)";

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
    /// The interval resamples test queries, each with all of its seeds ([`QUERIES_RESAMPLED`]):
    /// the same queries are scored under every seed, so its (seed, example) units are not
    /// independent.
    pub diff: PairedDiff,
    /// The mean difference under each seed alone (`row − baseline` accuracy of that seed's
    /// demonstrations), in the cells' seed order; empty in reports written before it was kept.
    #[serde(default)]
    pub per_seed: Vec<f64>,
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

/// The test query of every unit of [`correctness`], in the same (seed, example) order: the
/// prediction's index in the evaluation set, which every seed scores once. The cluster of the
/// paired bootstrap.
fn queries(cell: &CellResult) -> Vec<usize> {
    cell.runs
        .iter()
        .flat_map(|r| &r.predictions)
        .map(|p| p.index)
        .collect()
}

/// Mean of `row − baseline` over the units of each seed (runs paired by position: the callers
/// check that both cells ran the same seeds on the same queries).
fn per_seed_differences(row: &CellResult, base: &CellResult, calibrated: bool) -> Vec<f64> {
    let (r, b) = (correctness(row, calibrated), correctness(base, calibrated));
    let mut start = 0;
    row.runs
        .iter()
        .map(|run| {
            let end = start + run.predictions.len();
            let n = run.predictions.len().max(1) as f64;
            let d = (start..end).map(|i| r[i] - b[i]).sum::<f64>() / n;
            start = end;
            d
        })
        .collect()
}

/// The rows every other row is compared with, in the order of the tables: in-context learning,
/// dynamic evaluation on every parameter, and on exactly TinT's parameters.
const BASELINES: [&str; 3] = ["icl", "dyn-eval", "dyn-eval-matched"];

/// Whether a row label is the baseline `name` (`icl`, or `dyn-eval(…)` with any settings; not
/// `dyn-eval-matched(…)` for `dyn-eval`).
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
    /// same seeds on the same examples as its baseline (units: (seed, example) pairs; the bootstrap
    /// resamples the test queries, each keeping the units of all its seeds, since every seed
    /// scores the same queries: [`paired_diff_clustered`] with the query as the cluster):
    /// * against the `icl` row of the same task and shot count;
    /// * against a `dyn-eval` row, and a `dyn-eval-matched` row, of the same task and shot count
    ///   ([`Self::trained_baseline`]): the one trained in the row's own format and loss where it
    ///   ran, else the first.
    pub fn compute_paired(&mut self, settings: &PairedSettings) {
        let mut paired = Vec::new();
        for baseline in BASELINES {
            for cell in &self.cells {
                if baseline != "icl" && cell.key.method == "icl" {
                    continue;
                }
                let base = if baseline == "icl" {
                    self.cells.iter().find(|c| {
                        c.key.task == cell.key.task
                            && c.key.k == cell.key.k
                            && is_baseline(&c.key.method, "icl")
                    })
                } else {
                    self.trained_baseline(&cell.key, baseline)
                };
                let Some(base) = base else { continue };
                let clusters = queries(cell);
                let same_units = cell.key != base.key
                    && cell.settings.seeds == base.settings.seeds
                    && cell.settings.n_test == base.settings.n_test
                    && cell.runs.len() == base.runs.len()
                    && clusters == queries(base);
                if !same_units {
                    continue;
                }
                for calibrated in [false, true] {
                    paired.push(IclPaired {
                        task: cell.key.task,
                        k: cell.key.k,
                        calibrated,
                        diff: paired_diff_clustered(
                            (&cell.key.row_label(), &correctness(cell, calibrated)),
                            (&base.key.row_label(), &correctness(base, calibrated)),
                            &clusters,
                            Better::Higher,
                            settings,
                        )
                        .resampled_as(QUERIES_RESAMPLED),
                        per_seed: per_seed_differences(cell, base, calibrated),
                    });
                }
            }
        }
        self.paired = paired;
    }

    /// The row of the trained baseline `name` (`dyn-eval` or `dyn-eval-matched`) a row is
    /// compared with, at its task and shot count: for a row of another method, the baseline's row
    /// trained in the same format with the same loss (TinT with the full-context loss against
    /// dyn-eval with the full-context loss) where it ran; otherwise, and for the baseline's rows
    /// themselves (so its other formats and losses are compared with its first), its first row.
    pub fn trained_baseline(&self, key: &CellKey, name: &str) -> Option<&CellResult> {
        let mut candidates = self.cells.iter().filter(|c| {
            c.key.task == key.task && c.key.k == key.k && is_baseline(&c.key.method, name)
        });
        let first = candidates.next()?;
        if is_baseline(&key.method, name) {
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
    /// pairs with its 95 % paired bootstrap interval, which resamples test queries, each keeping
    /// its seeds together; wins/pairs; with several seeds the range of the per-seed differences),
    /// one per baseline and calibration, rows = method × shots, columns = tasks.
    pub fn paired_markdown(&self) -> String {
        let tasks = self.tasks();
        let mut out = String::new();
        for baseline in BASELINES {
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
                    "\n*Paired difference from {baseline}, {}* (Δ accuracy points, mean over \
                     (seed, example) pairs [95 % paired bootstrap interval that resamples test \
                     queries, each keeping its seeds together], wins/pairs; seeds: lowest..highest \
                     Δ of a single seed{})\n\n",
                    if calibrated {
                        "with calibration"
                    } else {
                        "without calibration"
                    },
                    if baseline == "icl" {
                        String::new()
                    } else {
                        format!(
                            "; each row against the {baseline} row of its own format and loss \
                             where one ran, else the first {baseline} row, which the other \
                             {baseline} rows are also compared with"
                        )
                    }
                );
                let mut table = Table::new(
                    ["Method", "Shots"]
                        .map(String::from)
                        .into_iter()
                        .chain(tasks.iter().map(|task| task.display_name().to_string())),
                );
                table = table
                    .aligned_from(1, Align::Right)
                    .aligned_from(2, Align::Left);
                let mut rows: Vec<(String, usize)> = Vec::new();
                for e in &entries {
                    let row = (e.diff.method.clone(), e.k);
                    if !rows.contains(&row) {
                        rows.push(row);
                    }
                }
                rows.sort_by_key(|r| r.1);
                for (label, k) in rows {
                    let cells = tasks.iter().map(|&task| {
                        entries
                            .iter()
                            .find(|e| e.task == task && e.k == k && e.diff.method == label)
                            .map_or("–".to_string(), |e| {
                                let d = &e.diff;
                                format!(
                                    "{:+.1} [{:+.1}, {:+.1}], {}/{}{}",
                                    100.0 * d.mean,
                                    100.0 * d.ci_low,
                                    100.0 * d.ci_high,
                                    d.wins,
                                    d.n,
                                    seed_range(&e.per_seed)
                                )
                            })
                    });
                    table.push_row([label.clone(), k.to_string()].into_iter().chain(cells));
                }
                out += &table.to_markdown();
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

    /// Puts the cells with `keys` in that order, where the first of them stands (every other
    /// cell keeps its place; a key without a cell is passed over): a run that computes cells
    /// in another order than its report lists them.
    pub fn order_cells(&mut self, keys: &[CellKey]) {
        let rank = |c: &CellResult| keys.iter().position(|k| *k == c.key);
        let Some(first) = self.cells.iter().position(|c| rank(c).is_some()) else {
            return;
        };
        let (mut listed, others): (Vec<CellResult>, Vec<CellResult>) =
            std::mem::take(&mut self.cells)
                .into_iter()
                .partition(|c| rank(c).is_some());
        listed.sort_by_key(|c| rank(c));
        let mut others = others.into_iter();
        self.cells.extend(others.by_ref().take(first));
        self.cells.extend(listed);
        self.cells.extend(others);
    }

    /// Reads a report written by [`IclReport::write_json`].
    ///
    /// # Errors
    ///
    /// I/O and JSON errors.
    pub fn read_json(path: &Path) -> Result<Self, EvalError> {
        let text = std::fs::read_to_string(path).map_err(|e| EvalError::access(path, e))?;
        serde_json::from_str(&text).map_err(|source| EvalError::Json {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Writes the report as JSON (through a temporary file, so an interrupted write never leaves
    /// a truncated report for `--resume`): pretty, but each cell on one line of its own (a cell
    /// holds every query's scores; at 32 shots, 3 seeds and 100 queries the pretty form of one
    /// task's report passed the project's 1 MB for a committed file).
    ///
    /// # Errors
    ///
    /// I/O and JSON errors.
    pub fn write_json(&self, path: &Path) -> Result<(), EvalError> {
        let json_error = |source| EvalError::Json {
            path: path.to_path_buf(),
            source,
        };
        let value = serde_json::to_value(self).map_err(json_error)?;
        let text = cells_one_per_line(&value).map_err(json_error)?;
        crate::atomic_write::write_atomic(path, text.as_bytes())
            .map_err(|e| EvalError::access(path, e.into()))
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
    /// per method and shot count, one column per task, then the average over the tasks (`–` for a
    /// row that lacks a task: an average over fewer tasks would not compare with the other rows').
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
            let mut table = Table::new(
                ["Method", "Shots"]
                    .map(String::from)
                    .into_iter()
                    .chain(tasks.iter().map(|task| task.display_name().to_string()))
                    .chain(["Avg.".to_string()]),
            )
            .aligned_from(1, Align::Right);
            for row in self.rows() {
                let mut cells = vec![row.0.to_string(), row.1.to_string()];
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
                            cells.push(percent(mean, std, row.1 > 0));
                        }
                        None => cells.push("–".into()),
                    }
                }
                cells.push(match means.len() < tasks.len() || means.is_empty() {
                    true => "–".into(),
                    false => {
                        let avg = means.iter().sum::<f64>() / means.len() as f64;
                        format!("{:.1}", 100.0 * avg)
                    }
                });
                table.push_row(cells);
            }
            out.push_str(&table.to_markdown());
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

/// `; seeds +1.0..+3.0` (accuracy points) for two or more seeds, else nothing.
fn seed_range(per_seed: &[f64]) -> String {
    if per_seed.len() < 2 {
        return String::new();
    }
    let low = per_seed.iter().copied().fold(f64::INFINITY, f64::min);
    let high = per_seed.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("; seeds {:+.1}..{:+.1}", 100.0 * low, 100.0 * high)
}

fn percent(mean: f64, std: f64, with_std: bool) -> String {
    if with_std {
        format!("{:.1} ({:.1})", 100.0 * mean, 100.0 * std)
    } else {
        format!("{:.1}", 100.0 * mean)
    }
}

/// `report` (a JSON object) as pretty JSON whose `cells` array has one compact cell per line.
fn cells_one_per_line(report: &serde_json::Value) -> Result<String, serde_json::Error> {
    let Some(fields) = report.as_object() else {
        return serde_json::to_string_pretty(report);
    };
    let mut parts = Vec::with_capacity(fields.len());
    for (key, value) in fields {
        let value = match (key.as_str(), value.as_array()) {
            ("cells", Some(cells)) if !cells.is_empty() => {
                let lines = cells
                    .iter()
                    .map(|cell| serde_json::to_string(cell).map(|c| format!("    {c}")))
                    .collect::<Result<Vec<_>, _>>()?;
                format!("[\n{}\n  ]", lines.join(",\n"))
            }
            _ => serde_json::to_string_pretty(value)?.replace('\n', "\n  "),
        };
        parts.push(format!("  {}: {value}", serde_json::to_string(key)?));
    }
    Ok(format!("{{\n{}\n}}\n", parts.join(",\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icl::result::{CellSettings, Prediction, SeedRun};
    use tint_lab::paired::paired_diff;

    /// A cell of `seeds.len()` seeds × `n_test` queries (in the runner's order: per seed, then
    /// per query) whose query `q` under the seed at position `s` is right iff `right(s, q)`;
    /// calibration changes nothing.
    fn cell(
        method: &str,
        seeds: &[u64],
        n_test: usize,
        right: impl Fn(usize, usize) -> bool,
    ) -> CellResult {
        let runs: Vec<SeedRun> = seeds
            .iter()
            .enumerate()
            .map(|(s, &seed)| {
                let predictions: Vec<Prediction> = (0..n_test)
                    .map(|q| {
                        let predicted = usize::from(right(s, q));
                        Prediction {
                            index: q,
                            label: 1,
                            scores: vec![0.0, 0.0],
                            prior: vec![0.0, 0.0],
                            predicted,
                            predicted_calibrated: predicted,
                        }
                    })
                    .collect();
                let accuracy = (0..n_test).filter(|&q| right(s, q)).count() as f64 / n_test as f64;
                SeedRun {
                    seed,
                    demos_used: 4,
                    accuracy,
                    accuracy_calibrated: accuracy,
                    train_losses: Vec::new(),
                    predictions,
                    seconds: 0.0,
                }
            })
            .collect();
        let accuracies: Vec<f64> = runs.iter().map(|r| r.accuracy).collect();
        let (mean, std) = super::super::calibration::mean_std(&accuracies);
        CellResult {
            key: CellKey {
                task: TaskKind::Sst2,
                method: method.into(),
                k: 4,
                format: None,
                loss: None,
            },
            settings: CellSettings {
                seeds: seeds.to_vec(),
                balanced: false,
                demos_in_context: true,
                n_test,
                max_input_tokens: 64,
                method_settings: String::new(),
                calibration: "prompt".into(),
            },
            runs,
            accuracy_mean: mean,
            accuracy_std: std,
            calibrated_mean: mean,
            calibrated_std: std,
            inputs_sha256: String::new(),
        }
    }

    #[test]
    fn cells_computed_in_another_order_are_listed_in_the_given_one() {
        let names = |r: &IclReport| {
            r.cells
                .iter()
                .map(|c| c.key.method.clone())
                .collect::<Vec<_>>()
        };
        let mut r = report(
            ["icl", "b", "c", "a", "other"]
                .iter()
                .map(|m| cell(m, &[0], 2, |_, _| true))
                .collect(),
        );
        let key = |m: &str| cell(m, &[0], 2, |_, _| true).key;
        // "a", "b", "c" in that order where "b" (the first of them) stood; a missing key is
        // passed over; the others keep their places.
        r.order_cells(&[key("a"), key("missing"), key("b"), key("c")]);
        assert_eq!(names(&r), ["icl", "a", "b", "c", "other"]);
        // Listed cells apart from each other come together where the first stood.
        r.order_cells(&[key("other"), key("icl")]);
        assert_eq!(names(&r), ["other", "icl", "a", "b", "c"]);
        r.order_cells(&[]);
        assert_eq!(names(&r), ["other", "icl", "a", "b", "c"]);
    }

    fn report(cells: Vec<CellResult>) -> IclReport {
        let mut report = IclReport::new("m", "flex");
        for c in cells {
            report.upsert(c);
        }
        report.compute_paired(&PairedSettings::default());
        report
    }

    #[test]
    fn the_matched_baseline_has_its_own_rows_and_comparisons() {
        let report = report(vec![
            cell("icl", &[0, 1], 5, |_, q| q < 1),
            cell("dyn-eval(lr=per-seed,steps=1)", &[0, 1], 5, |_, q| q < 4),
            cell(
                "dyn-eval-matched(lr=per-seed,steps=1)",
                &[0, 1],
                5,
                |_, q| q < 2,
            ),
            cell("tint-ref(eta=per-seed,steps=1)", &[0, 1], 5, |_, q| q < 2),
        ]);
        let against = |method: &str, baseline: &str| {
            report
                .paired
                .iter()
                .find(|p| {
                    !p.calibrated
                        && p.diff.method.starts_with(method)
                        && p.diff.baseline.starts_with(baseline)
                })
                .map(|p| p.diff.mean)
        };
        assert_eq!(against("tint-ref", "dyn-eval("), Some(-0.4));
        assert_eq!(against("tint-ref", "dyn-eval-matched("), Some(0.0));
        // The matched row is not a dyn-eval row: it is compared with dyn-eval like TinT.
        assert_eq!(against("dyn-eval-matched", "dyn-eval("), Some(-0.4));
        assert_eq!(against("dyn-eval(", "dyn-eval-matched("), Some(0.4));
        let markdown = report.paired_markdown();
        assert!(markdown.contains("*Paired difference from dyn-eval-matched, without calibration*"));
    }

    #[test]
    fn the_average_column_needs_every_task_of_the_table() {
        let mut other_task = cell("icl", &[0], 2, |_, q| q < 2);
        other_task.key.task = TaskKind::MrSnippets;
        let report = report(vec![
            cell("icl", &[0], 2, |_, q| q < 1),
            other_task,
            cell("dyn-eval(lr=1e-3,steps=1)", &[0], 2, |_, _| true),
        ]);
        let markdown = report.markdown();
        // icl has both tasks: (50 + 100) / 2; dyn-eval only one, so no average.
        assert!(
            markdown.contains("| icl | 4 | 50.0 (0.0) | 100.0 (0.0) | 75.0 |"),
            "{markdown}"
        );
        assert!(
            markdown.contains("| dyn-eval(lr=1e-3,steps=1) | 4 | 100.0 (0.0) | – | – |"),
            "{markdown}"
        );
    }

    #[test]
    fn a_written_report_reads_back_with_one_line_per_cell() {
        let report = report(vec![
            cell("icl", &[0, 1], 5, |s, q| (s + q) % 2 == 0),
            cell("dyn-eval", &[0, 1], 5, |_, q| q < 3),
        ]);
        let path = std::env::temp_dir().join(format!("icl-report-{}.json", std::process::id()));
        report.write_json(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let back = IclReport::read_json(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&report).unwrap()
        );
        let cell_lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("    {\"") && l.contains("\"key\":"))
            .collect();
        assert_eq!(cell_lines.len(), 2, "{text}");
        assert!(cell_lines[0].contains("\"predictions\""));
    }

    #[test]
    fn the_bootstrap_resamples_queries_with_their_seeds() {
        const SEEDS: [u64; 3] = [0, 1, 2];
        const N_TEST: usize = 12;
        // Row and baseline are right on the same queries under every seed: a query's three units
        // carry one value.
        let row = cell("tint", &SEEDS, N_TEST, |_, q| q % 3 != 0);
        let base = cell("icl", &SEEDS, N_TEST, |_, q| q % 4 == 0);
        let (r, b) = (correctness(&row, false), correctness(&base, false));
        let report = report(vec![base, row]);
        let pair = report
            .paired
            .iter()
            .find(|p| !p.calibrated && p.diff.method == "tint")
            .expect("tint against icl");
        assert_eq!(pair.diff.resampled, QUERIES_RESAMPLED);
        assert_eq!(
            (pair.diff.n, pair.diff.clusters),
            (SEEDS.len() * N_TEST, N_TEST)
        );
        // Seed-major units: unit `s · N_TEST + q` is query `q`.
        let by_query: Vec<usize> = (0..SEEDS.len()).flat_map(|_| 0..N_TEST).collect();
        assert_eq!(queries(&report.cells[1]), by_query);
        let settings = PairedSettings::default();
        let expected = paired_diff_clustered(
            ("tint", &r),
            ("icl", &b),
            &by_query,
            Better::Higher,
            &settings,
        );
        assert_eq!(
            (pair.diff.ci_low, pair.diff.ci_high),
            (expected.ci_low, expected.ci_high)
        );
        let naive = paired_diff(("tint", &r), ("icl", &b), Better::Higher, &settings);
        assert!(
            pair.diff.ci_high - pair.diff.ci_low > naive.ci_high - naive.ci_low,
            "repeated queries must widen the interval: {pair:?} {naive:?}"
        );
        // Every seed scores the same queries here, so each seed has the mean difference.
        assert_eq!(pair.per_seed, vec![pair.diff.mean; 3]);
    }

    #[test]
    fn seeds_are_spread_and_the_caption_names_the_resampled_unit() {
        const SEEDS: [u64; 2] = [5, 9];
        const N_TEST: usize = 8;
        // Under seed 5 the row is right on every query, under seed 9 on half; the baseline on none.
        let row = cell("tint", &SEEDS, N_TEST, |s, q| s == 0 || q % 2 == 0);
        let base = cell("icl", &SEEDS, N_TEST, |_, _| false);
        let report = report(vec![base, row]);
        let pair = &report.paired[0];
        assert_eq!(pair.per_seed, vec![1.0, 0.5]);
        let md = report.paired_markdown();
        assert!(
            md.contains("resamples test queries, each keeping its seeds together"),
            "{md}"
        );
        assert!(md.contains("; seeds +50.0..+100.0 |"), "{md}");
        // Reports written before the resampled unit and the seeds were kept still read.
        let mut json = serde_json::to_value(pair).unwrap();
        json.as_object_mut().unwrap().remove("per_seed");
        json["diff"].as_object_mut().unwrap().remove("resampled");
        let old: IclPaired = serde_json::from_value(json).unwrap();
        assert!(old.per_seed.is_empty());
        assert_eq!(old.diff.resampled, tint_lab::paired::UNITS_RESAMPLED);
    }

    #[test]
    fn rows_scored_on_other_queries_are_not_paired() {
        let row = cell("tint", &[0, 1], 4, |_, q| q == 0);
        let mut base = cell("icl", &[0, 1], 4, |_, _| true);
        assert_eq!(report(vec![base.clone(), row.clone()]).paired.len(), 2);
        base.runs[1].predictions[3].index = 7;
        assert!(report(vec![base, row]).paired.is_empty());
    }
}
