//! Reports of a language-modelling evaluation: the exact settings, per-block losses, perplexities with
//! confidence intervals, as JSON (machine-readable) and as a markdown table in the paper's layout
//! (rows = methods, columns = train fractions).

use std::path::Path;
use tint_lab::table::Table;

use serde::{Deserialize, Serialize};

use crate::perplexity::{BlockNll, Perplexity};
use crate::tune_record::TuneRecord;
use crate::EvalError;
use tint_lab::paired::{paired_diff, Better, PairedDiff, PairedSettings};

/// Result of one method at one train fraction.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MethodResult {
    /// Method name (`vanilla`, `dyn-eval`, `tint`, `tint-ref`).
    pub method: String,
    /// Fraction of each block used for training.
    pub train_fraction: f64,
    /// Perplexity on the evaluated part of the blocks.
    pub perplexity: Perplexity,
    /// Per-block summed NLL, in block order, so others can recompute statistics.
    pub blocks: Vec<BlockNll>,
    /// Wall-clock seconds spent in this method (all blocks).
    pub seconds: f64,
    /// SHA-256 of the cell's inputs ([`crate::lm::cell_inputs_sha256`]: the method's settings,
    /// the train fraction, the blocks); `--resume` reuses the cell only when this run's digest is
    /// the same. Empty in reports written before it (such a cell is recomputed).
    #[serde(default)]
    pub inputs_sha256: String,
}

/// A whole language-modelling report.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LmReport {
    /// Every setting that produced the numbers, as given on the command line or defaulted.
    pub settings: serde_json::Value,
    /// One entry per (method, train fraction).
    pub results: Vec<MethodResult>,
    /// Paired differences (per block, nats per evaluated token) of every method from `vanilla` and
    /// from `dyn-eval`, per train fraction ([`LmReport::compute_paired`]).
    #[serde(default)]
    pub paired: Vec<LmPaired>,
    /// How each adaptive method's step size was chosen (tuning split, grid, choice), or that it was
    /// given on the command line.
    #[serde(default)]
    pub tuning: Vec<TuneRecord>,
}

/// A paired difference at one train fraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LmPaired {
    /// Fraction of each block used for training.
    pub train_fraction: f64,
    /// `method − baseline` of the per-block mean NLL (nats per evaluated token); a win is lower.
    pub diff: PairedDiff,
}

/// The baselines every method is compared with, when present in the report.
pub const BASELINES: [&str; 2] = ["vanilla", "dyn-eval"];

/// The matched baseline: dynamic evaluation on exactly the parameters, layers and steps a TinT row
/// updates. A row `dyn-eval-matched<suffix>` (`suffix` = its budget or step label, e.g. ` 15x2`)
/// is the baseline of the TinT rows with the same suffix.
pub const MATCHED_BASELINE: &str = "dyn-eval-matched";

/// Whether the paired difference `method − baseline` compares a TinT row with its matched
/// dynamic evaluation (same suffix).
fn is_matched_pair(method: &str, baseline: &str) -> bool {
    baseline
        .strip_prefix(MATCHED_BASELINE)
        .is_some_and(|suffix| {
            method.starts_with("tint")
                && method
                    .split_once(' ')
                    .map_or(suffix.is_empty(), |(_, rest)| suffix == format!(" {rest}"))
        })
}

/// Mean NLL per evaluated token of each block.
fn per_token(blocks: &[BlockNll]) -> Vec<f64> {
    blocks
        .iter()
        .map(|b| b.sum_nll / b.count.max(1) as f64)
        .collect()
}

impl LmReport {
    /// Reads the report at `path`.
    ///
    /// # Errors
    ///
    /// [`EvalError::Io`] for a file that cannot be read, [`EvalError::Report`] for one that is not
    /// an `eval lm` report.
    pub fn read_json(path: &Path) -> Result<Self, EvalError> {
        let text = std::fs::read_to_string(path).map_err(|source| EvalError::Io {
            operation: "read",
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| EvalError::Report {
            path: path.to_path_buf(),
            reason: format!("not an `eval lm` report ({e})"),
        })
    }

    /// Writes the report as pretty JSON, atomically ([`crate::atomic_write`]: a crash mid-write
    /// leaves the previous report, never a cut one).
    pub fn write_json(&self, path: &Path) -> Result<(), EvalError> {
        crate::results_doc::create_parent_dir(path)?;
        let text = serde_json::to_string_pretty(self).expect("a report always serialises");
        crate::results_doc::write_file(path, text.as_bytes())
    }

    /// Recomputes [`LmReport::paired`]: at every train fraction, each TinT row against its matched
    /// dynamic evaluation ([`MATCHED_BASELINE`]), and each method against each of [`BASELINES`]
    /// present at that fraction with the same number of blocks (blocks are paired by position:
    /// every method sees the same blocks in the same order).
    pub fn compute_paired(&mut self, settings: &PairedSettings) {
        let pair = |r: &MethodResult, base: &MethodResult| LmPaired {
            train_fraction: r.train_fraction,
            diff: paired_diff(
                (&r.method, &per_token(&r.blocks)),
                (&base.method, &per_token(&base.blocks)),
                Better::Lower,
                settings,
            )
            .resampled_as("blocks"),
        };
        let same_blocks = |r: &MethodResult, base: &MethodResult| {
            (r.train_fraction - base.train_fraction).abs() < 1e-12
                && r.blocks.len() == base.blocks.len()
        };
        let mut paired = Vec::new();
        for base in self
            .results
            .iter()
            .filter(|r| r.method.starts_with(MATCHED_BASELINE))
        {
            for r in self
                .results
                .iter()
                .filter(|r| is_matched_pair(&r.method, &base.method) && same_blocks(r, base))
            {
                paired.push(pair(r, base));
            }
        }
        for base_name in BASELINES {
            for base in self.results.iter().filter(|r| r.method == base_name) {
                for r in self.results.iter().filter(|r| {
                    r.method != base.method
                        && same_blocks(r, base)
                        && !(base_name == "dyn-eval" && r.method == "vanilla")
                }) {
                    paired.push(pair(r, base));
                }
            }
        }
        self.paired = paired;
    }

    /// The paired difference of `method` from `baseline` at `train_fraction`.
    pub fn paired_of(
        &self,
        method: &str,
        baseline: &str,
        train_fraction: f64,
    ) -> Option<&PairedDiff> {
        self.paired
            .iter()
            .find(|p| {
                p.diff.method == method
                    && p.diff.baseline == baseline
                    && (p.train_fraction - train_fraction).abs() < 1e-12
            })
            .map(|p| &p.diff)
    }

    /// Markdown tables of the paired differences from each baseline present: one row per method,
    /// one column per train fraction, cells `Δ nats [lo, hi], wins/n` (Δ = mean over blocks of the
    /// method's minus the baseline's NLL per evaluated token; negative = better).
    pub fn paired_markdown(&self) -> String {
        let (fractions, methods) = self.axes();
        let mut out = String::new();
        let matched = |m: &str, f: f64| {
            self.paired
                .iter()
                .find(|p| {
                    p.diff.method == m
                        && is_matched_pair(m, &p.diff.baseline)
                        && (p.train_fraction - f).abs() < 1e-12
                })
                .map(|p| &p.diff)
        };
        let exact = |m: &str, baseline: &str, f: f64| self.paired_of(m, baseline, f);
        for baseline in [MATCHED_BASELINE, BASELINES[0], BASELINES[1]] {
            let find = |m: &str, f: f64| {
                if baseline == MATCHED_BASELINE {
                    matched(m, f)
                } else {
                    exact(m, baseline, f)
                }
            };
            let rows: Vec<&str> = methods
                .iter()
                .copied()
                .filter(|m| fractions.iter().any(|&f| find(m, f).is_some()))
                .collect();
            if rows.is_empty() {
                continue;
            }
            let level = self
                .paired
                .first()
                .map(|p| p.diff.level * 100.0)
                .unwrap_or(95.0);
            let from = if baseline == MATCHED_BASELINE {
                "dyn-eval-matched (the same parameters, layers and steps as the TinT row)"
            } else {
                baseline
            };
            out += &format!(
                "\n*Paired difference from {from}* (Δ nats per evaluated token, mean over \
                 blocks [{level:.0} % paired bootstrap interval], wins/blocks)\n\n"
            );
            let mut table = Table::new(fraction_header(&fractions));
            for m in rows {
                let cells = fractions
                    .iter()
                    .map(|&f| find(m, f).map_or("–".to_string(), |d| d.cell(3)));
                table.push_row(std::iter::once(m.to_string()).chain(cells));
            }
            out += &table.to_markdown();
        }
        out
    }

    /// Markdown list of how each step size was chosen.
    pub fn tuning_markdown(&self) -> String {
        let mut out = String::new();
        for t in &self.tuning {
            out += &format!("- {}\n", t.summary());
        }
        out
    }

    /// Train fractions and method names in first-seen order.
    fn axes(&self) -> (Vec<f64>, Vec<&str>) {
        let mut fractions: Vec<f64> = Vec::new();
        let mut methods: Vec<&str> = Vec::new();
        for r in &self.results {
            if !fractions
                .iter()
                .any(|f| (f - r.train_fraction).abs() < 1e-12)
            {
                fractions.push(r.train_fraction);
            }
            if !methods.contains(&r.method.as_str()) {
                methods.push(&r.method);
            }
        }
        fractions.sort_by(f64::total_cmp);
        (fractions, methods)
    }

    /// Markdown table: one row per method, one column per train fraction, cells `ppl [low, high]`.
    pub fn markdown_table(&self) -> String {
        let (fractions, methods) = self.axes();
        let mut table = Table::new(fraction_header(&fractions));
        for m in methods {
            let cells = fractions.iter().map(|f| {
                self.results
                    .iter()
                    .find(|r| r.method == m && (r.train_fraction - f).abs() < 1e-12)
                    .map_or("–".to_string(), |r| {
                        let p = &r.perplexity;
                        format!("{:.2} [{:.2}, {:.2}]", p.value, p.ci_low, p.ci_high)
                    })
            });
            table.push_row(std::iter::once(m.to_string()).chain(cells));
        }
        table.to_markdown()
    }
}

/// The header of a table with a row per method and a column per train fraction.
fn fraction_header(fractions: &[f64]) -> Vec<String> {
    std::iter::once("method".to_string())
        .chain(fractions.iter().map(|f| format!("{:.0}%", f * 100.0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perplexity::bootstrap;

    #[test]
    fn table_has_one_row_per_method_and_one_column_per_fraction() {
        let blocks = vec![
            BlockNll {
                sum_nll: 4.0,
                count: 2,
            },
            BlockNll {
                sum_nll: 2.0,
                count: 2,
            },
        ];
        let result = |method: &str, f: f64| MethodResult {
            method: method.into(),
            train_fraction: f,
            perplexity: bootstrap(&blocks, 0.95, 100, 0),
            blocks: blocks.clone(),
            seconds: 0.0,
            inputs_sha256: String::new(),
        };
        let report = LmReport {
            settings: serde_json::json!({"block_size": 4}),
            results: vec![
                result("vanilla", 0.5),
                result("dyn-eval", 0.5),
                result("vanilla", 0.9),
            ],
            paired: Vec::new(),
            tuning: Vec::new(),
        };
        let table = report.markdown_table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "| method | 50% | 90% |");
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[3].starts_with("| dyn-eval | 4.48"), "{table}");
        assert!(
            lines[3].ends_with("– |"),
            "missing cells are marked: {table}"
        );

        let path =
            std::env::temp_dir().join(format!("tint-eval-report-{}.json", std::process::id()));
        report.write_json(&path).unwrap();
        let back: LmReport =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back.results.len(), 3);
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn paired_tables_show_differences_from_each_baseline() {
        let blocks = |shift: f64| -> Vec<BlockNll> {
            (0..4)
                .map(|b| BlockNll {
                    sum_nll: 2.0 * (3.0 + b as f64 + shift),
                    count: 2,
                })
                .collect()
        };
        let result = |method: &str, shift: f64| MethodResult {
            method: method.into(),
            train_fraction: 0.5,
            perplexity: bootstrap(&blocks(shift), 0.95, 100, 0),
            blocks: blocks(shift),
            seconds: 0.0,
            inputs_sha256: String::new(),
        };
        let mut report = LmReport {
            settings: serde_json::json!({}),
            results: vec![
                result("vanilla", 0.0),
                result("dyn-eval", -0.05),
                result("tint", -0.02),
            ],
            paired: Vec::new(),
            tuning: Vec::new(),
        };
        report.compute_paired(&PairedSettings::default());
        // vanilla: dyn-eval and tint; dyn-eval: tint only (vanilla is not compared with dyn-eval).
        assert_eq!(report.paired.len(), 3);
        let d = report.paired_of("tint", "vanilla", 0.5).unwrap();
        assert!(
            (d.mean + 0.02).abs() < 1e-12 && d.wins == 4 && d.n == 4,
            "{d:?}"
        );
        let d = report.paired_of("tint", "dyn-eval", 0.5).unwrap();
        assert!((d.mean - 0.03).abs() < 1e-12 && d.losses == 4, "{d:?}");
        let md = report.paired_markdown();
        assert!(
            md.contains("| tint | -0.020 [-0.020, -0.020], 4/4 |"),
            "{md}"
        );
        assert!(
            md.contains("| tint | +0.030 [+0.030, +0.030], 0/4 |"),
            "{md}"
        );
        assert!(
            md.contains("from vanilla") && md.contains("from dyn-eval"),
            "{md}"
        );
    }

    #[test]
    fn tint_rows_pair_with_the_matched_dyn_eval_of_their_own_budget() {
        assert!(is_matched_pair("tint-ref", "dyn-eval-matched"));
        assert!(is_matched_pair("tint-ref 15x2", "dyn-eval-matched 15x2"));
        assert!(is_matched_pair("tint 7x4", "dyn-eval-matched 7x4"));
        assert!(!is_matched_pair("tint-ref 15x2", "dyn-eval-matched 7x4"));
        assert!(!is_matched_pair("tint-ref 15x2", "dyn-eval-matched"));
        assert!(!is_matched_pair("tint-ref", "dyn-eval-matched allx1"));
        assert!(!is_matched_pair("vanilla", "dyn-eval-matched"));
        assert!(!is_matched_pair("dyn-eval", "dyn-eval-matched"));
        assert!(!is_matched_pair("tint-ref", "dyn-eval"));
    }
}
