//! Reports of a language-modelling evaluation: the exact settings, per-block losses, perplexities with
//! confidence intervals, as JSON (machine-readable) and as a markdown table in the paper's layout
//! (rows = methods, columns = train fractions).

use std::path::Path;

use crate::perplexity::{BlockNll, Perplexity};
use crate::EvalError;

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
}

/// A whole language-modelling report.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LmReport {
    /// Every setting that produced the numbers, as given on the command line or defaulted.
    pub settings: serde_json::Value,
    /// One entry per (method, train fraction).
    pub results: Vec<MethodResult>,
}

impl LmReport {
    /// Writes the report as pretty JSON.
    pub fn write_json(&self, path: &Path) -> Result<(), EvalError> {
        let io = |source| EvalError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let text = serde_json::to_string_pretty(self).expect("a report always serialises");
        std::fs::write(path, text).map_err(io)
    }

    /// Markdown table: one row per method, one column per train fraction, cells `ppl [low, high]`.
    pub fn markdown_table(&self) -> String {
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
        let mut out = String::from("| method |");
        for f in &fractions {
            out += &format!(" {:.0}% |", f * 100.0);
        }
        out += "\n|---|";
        out += &"---|".repeat(fractions.len());
        out += "\n";
        for m in methods {
            out += &format!("| {m} |");
            for f in &fractions {
                let cell = self
                    .results
                    .iter()
                    .find(|r| r.method == m && (r.train_fraction - f).abs() < 1e-12)
                    .map(|r| {
                        let p = &r.perplexity;
                        format!(" {:.2} [{:.2}, {:.2}] |", p.value, p.ci_low, p.ci_high)
                    })
                    .unwrap_or_else(|| " – |".into());
                out += &cell;
            }
            out += "\n";
        }
        out
    }
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
        };
        let report = LmReport {
            settings: serde_json::json!({"block_size": 4}),
            results: vec![
                result("vanilla", 0.5),
                result("dyn-eval", 0.5),
                result("vanilla", 0.9),
            ],
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
}
