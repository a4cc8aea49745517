//! `--resume` for language-modelling reports: which earlier cells may be reused, and how a resumed
//! report keeps the cells of methods this run did not ask for.
//!
//! - A report records a [`Fingerprint`]: every setting except the method list, the output path and
//!   `--resume` itself, plus the SHA-256 of the checkpoint file and of the text, and the code version.
//!   A report whose fingerprint differs is refused (another model, other weights under the same path,
//!   another text, other settings, other code).
//! - A stored cell is reused only if its numbers pass [`validate_cell`]; otherwise it is recomputed
//!   (a hand-edited perplexity of −5 is never shown).
//! - [`merge`] puts the cells of methods not run this time back into the report, so
//!   `--resume --methods vanilla` on an 8-cell report still holds 8 cells.

use serde::{Deserialize, Serialize};

use crate::perplexity::perplexity_of;
use crate::report::MethodResult;

/// What must agree between a stored report and this run for its cells to be reused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// The run's settings without the method list, output path and `--resume`.
    pub settings: serde_json::Value,
    /// SHA-256 (hex) of the checkpoint file(s).
    pub checkpoint_sha256: String,
    /// SHA-256 (hex) of the evaluated text.
    pub text_sha256: String,
    /// Version of the code that computed the cells (crate version and git commit).
    pub code_version: String,
}

impl Fingerprint {
    /// The fingerprint of `settings` (the keys `methods`, `out`, `resume`, `cells_from` and
    /// `allow_non_finite` of `settings.args` are dropped: cells are keyed by method name, where
    /// they are written or taken from does not change them, and a cell holding a non-finite value
    /// never validates, so it is recomputed).
    pub fn new(
        settings: &serde_json::Value,
        checkpoint_sha256: impl Into<String>,
        text_sha256: impl Into<String>,
        code_version: impl Into<String>,
    ) -> Self {
        let mut settings = settings.clone();
        if let Some(args) = settings
            .get_mut("args")
            .and_then(serde_json::Value::as_object_mut)
        {
            for key in ["methods", "out", "resume", "cells_from", "allow_non_finite"] {
                args.remove(key);
            }
        }
        Self {
            settings,
            checkpoint_sha256: checkpoint_sha256.into(),
            text_sha256: text_sha256.into(),
            code_version: code_version.into(),
        }
    }

    /// The parts that differ from `other`, by name (empty when they agree).
    pub fn differences(&self, other: &Fingerprint) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.settings != other.settings {
            out.push("settings");
        }
        if self.checkpoint_sha256 != other.checkpoint_sha256 {
            out.push("checkpoint content (SHA-256)");
        }
        if self.text_sha256 != other.text_sha256 {
            out.push("text (SHA-256)");
        }
        if self.code_version != other.code_version {
            out.push("code version");
        }
        out
    }
}

/// The keys of two settings objects whose values differ, dotted into nested objects
/// (`args.steps`).
pub(crate) fn differing_keys(a: &serde_json::Value, b: &serde_json::Value) -> Vec<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return vec!["settings".into()];
    };
    let mut keys: Vec<String> = Vec::new();
    for key in a.keys().chain(b.keys()) {
        if a.get(key) == b.get(key)
            || keys
                .iter()
                .any(|k| k == key || k.starts_with(&format!("{key}.")))
        {
            continue;
        }
        match (a.get(key), b.get(key)) {
            (Some(x @ serde_json::Value::Object(_)), Some(y @ serde_json::Value::Object(_))) => {
                keys.extend(
                    differing_keys(x, y)
                        .into_iter()
                        .map(|k| format!("{key}.{k}")),
                )
            }
            _ => keys.push(key.clone()),
        }
    }
    keys
}

/// The value at a dotted key (`args.steps`), as short text (`absent` when missing).
fn value_at(settings: &serde_json::Value, dotted: &str) -> String {
    let value = dotted
        .split('.')
        .try_fold(settings, |v, k| v.get(k))
        .map_or_else(|| "absent".to_string(), |v| v.to_string());
    if value.chars().count() > 80 {
        format!("{}…", value.chars().take(80).collect::<String>())
    } else {
        value
    }
}

impl Fingerprint {
    /// What differs from `other` (a stored report's fingerprint), in words a user can act on: each
    /// differing setting by its key with the stored value and this run's, the checkpoint or text
    /// by their SHA-256, the code by its two versions.
    pub fn describe_differences(&self, stored: &Fingerprint) -> Vec<String> {
        let mut out: Vec<String> = differing_keys(&stored.settings, &self.settings)
            .into_iter()
            .filter(|_| stored.settings != self.settings)
            .map(|key| {
                format!(
                    "setting {key}: {} in the report, {} in this run",
                    value_at(&stored.settings, &key),
                    value_at(&self.settings, &key)
                )
            })
            .collect();
        let short = |h: &str| h.chars().take(12).collect::<String>();
        if stored.checkpoint_sha256 != self.checkpoint_sha256 {
            out.push(format!(
                "checkpoint SHA-256 {}… in the report, {}… now",
                short(&stored.checkpoint_sha256),
                short(&self.checkpoint_sha256)
            ));
        }
        if stored.text_sha256 != self.text_sha256 {
            out.push(format!(
                "text SHA-256 {}… in the report, {}… now",
                short(&stored.text_sha256),
                short(&self.text_sha256)
            ));
        }
        if stored.code_version != self.code_version {
            out.push(format!(
                "code version {} in the report, {} now",
                stored.code_version, self.code_version
            ));
        }
        out
    }
}

/// Checks that a stored cell's numbers are self-consistent for `n_blocks` blocks of `block_size`
/// tokens: every block has `block_size − floor(block_size · f)` targets and a finite, non-negative
/// summed NLL; the perplexity is `exp(Σ nll / Σ count)` of those blocks (relative 1e-9: it was
/// computed from them in f64), at least 1, inside its finite interval; `tokens` is the target count.
///
/// # Errors
///
/// The first rule broken, in words.
pub fn validate_cell(
    cell: &MethodResult,
    n_blocks: usize,
    block_size: usize,
) -> Result<(), String> {
    let f = cell.train_fraction;
    if !(f > 0.0 && f < 1.0) {
        return Err(format!("train fraction {f} outside (0, 1)"));
    }
    if cell.blocks.len() != n_blocks {
        return Err(format!(
            "{} blocks stored, this run evaluates {n_blocks}",
            cell.blocks.len()
        ));
    }
    let targets = block_size - (block_size as f64 * f).floor() as usize;
    for (b, block) in cell.blocks.iter().enumerate() {
        if block.count != targets {
            return Err(format!(
                "block {b} has {} targets, expected {targets}",
                block.count
            ));
        }
        if !block.sum_nll.is_finite() || block.sum_nll < 0.0 {
            return Err(format!("block {b} has summed NLL {}", block.sum_nll));
        }
    }
    let p = &cell.perplexity;
    if !(p.value.is_finite() && p.value >= 1.0) {
        return Err(format!("perplexity {} is not a finite value >= 1", p.value));
    }
    let expected = perplexity_of(&cell.blocks);
    if (p.value - expected).abs() > 1e-9 * expected {
        return Err(format!(
            "perplexity {} disagrees with its blocks ({expected})",
            p.value
        ));
    }
    if !(p.ci_low.is_finite() && p.ci_high.is_finite())
        || p.ci_low > p.value * (1.0 + 1e-12)
        || p.ci_high < p.value * (1.0 - 1e-12)
    {
        return Err(format!(
            "interval [{}, {}] does not contain the perplexity {}",
            p.ci_low, p.ci_high, p.value
        ));
    }
    if p.tokens != n_blocks * targets {
        return Err(format!(
            "{} tokens recorded, the blocks hold {}",
            p.tokens,
            n_blocks * targets
        ));
    }
    if !(cell.seconds.is_finite() && cell.seconds >= 0.0) {
        return Err(format!("run time {} s", cell.seconds));
    }
    Ok(())
}

/// Checks that a stored cell was computed from the inputs this run would give it: its
/// [`MethodResult::inputs_sha256`] equals `expected` ([`crate::lm::cell_inputs_sha256`]).
///
/// # Errors
///
/// The rule broken, with both digests' first 12 hex digits.
pub fn check_inputs(cell: &MethodResult, expected: &str) -> Result<(), String> {
    if cell.inputs_sha256 == expected {
        return Ok(());
    }
    let short = |d: &str| d.chars().take(12).collect::<String>();
    if cell.inputs_sha256.is_empty() {
        return Err("no digest of its inputs (a report written before them)".into());
    }
    Err(format!(
        "its inputs (method settings, train fraction, blocks) differ: SHA-256 {}… stored, {}… in \
         this run",
        short(&cell.inputs_sha256),
        short(expected)
    ))
}

/// The cells of this run, then the stored cells of (method, train fraction) pairs this run did not
/// produce, in their stored order.
pub fn merge(computed: Vec<MethodResult>, stored: &[MethodResult]) -> Vec<MethodResult> {
    let mut out = computed;
    for cell in stored {
        let present = out.iter().any(|c| {
            c.method == cell.method && (c.train_fraction - cell.train_fraction).abs() < 1e-12
        });
        if !present {
            out.push(cell.clone());
        }
    }
    out
}

/// Cells with made-up losses for the tests of this module and of `lm_merge`.
#[cfg(test)]
pub(crate) mod test_cells {
    use crate::perplexity::{bootstrap, BlockNll};
    use crate::MethodResult;

    /// `n_blocks` blocks of 10 tokens at train fraction `f` (floor(10 f) training tokens, the
    /// rest targets), block `b` with NLL `1 + 0.1 b + shift` per target.
    pub(crate) fn cell(method: &str, f: f64, n_blocks: usize, shift: f64) -> MethodResult {
        let targets = 10 - (10.0 * f).floor() as usize;
        let blocks: Vec<BlockNll> = (0..n_blocks)
            .map(|b| BlockNll {
                sum_nll: targets as f64 * (1.0 + 0.1 * b as f64 + shift),
                count: targets,
            })
            .collect();
        MethodResult {
            method: method.into(),
            train_fraction: f,
            perplexity: bootstrap(&blocks, 0.95, 50, 0),
            blocks,
            seconds: 1.0,
            inputs_sha256: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(method: &str, f: f64) -> MethodResult {
        test_cells::cell(method, f, 3, 0.0)
    }

    #[test]
    fn valid_cells_pass_and_every_tampering_is_caught() {
        let good = cell("tint", 0.5);
        assert_eq!(validate_cell(&good, 3, 10), Ok(()));
        type Tamper = Box<dyn Fn(&mut MethodResult)>;
        let cases: Vec<(&str, Tamper)> = vec![
            (
                "negative perplexity",
                Box::new(|c| c.perplexity.value = -5.0),
            ),
            (
                "perplexity off its blocks",
                Box::new(|c| c.perplexity.value *= 1.01),
            ),
            ("NaN interval", Box::new(|c| c.perplexity.ci_low = f64::NAN)),
            ("negative NLL", Box::new(|c| c.blocks[1].sum_nll = -1.0)),
            ("wrong count", Box::new(|c| c.blocks[0].count += 1)),
            (
                "missing block",
                Box::new(|c| {
                    c.blocks.pop();
                }),
            ),
            ("tokens", Box::new(|c| c.perplexity.tokens += 1)),
            ("fraction", Box::new(|c| c.train_fraction = 1.5)),
            ("seconds", Box::new(|c| c.seconds = f64::INFINITY)),
        ];
        for (what, tamper) in cases {
            let mut bad = good.clone();
            tamper(&mut bad);
            assert!(validate_cell(&bad, 3, 10).is_err(), "{what} must be caught");
        }
        assert!(validate_cell(&good, 4, 10).is_err(), "other block count");
        assert!(validate_cell(&good, 3, 12).is_err(), "other block size");
    }

    #[test]
    fn merge_keeps_cells_of_methods_not_run() {
        let stored: Vec<MethodResult> = ["vanilla", "dyn-eval", "tint", "tint-ref"]
            .iter()
            .flat_map(|m| [cell(m, 0.3), cell(m, 0.5)])
            .collect();
        let mut fresh = cell("vanilla", 0.5);
        fresh.seconds = 7.0;
        let merged = merge(vec![fresh], &stored);
        assert_eq!(merged.len(), 8, "no cell dropped");
        let vanilla_half: Vec<_> = merged
            .iter()
            .filter(|c| c.method == "vanilla" && c.train_fraction == 0.5)
            .collect();
        assert_eq!(vanilla_half.len(), 1);
        assert_eq!(vanilla_half[0].seconds, 7.0, "the fresh cell wins");
    }

    #[test]
    fn fingerprints_ignore_methods_and_output_but_not_content() {
        let settings = |methods: &str, out: &str, blocks: usize| {
            serde_json::json!({
                "args": { "methods": [methods], "out": out, "resume": false, "max_blocks": blocks },
            })
        };
        let fp = |s: &serde_json::Value, model: &str| Fingerprint::new(s, model, "t", "v1");
        let a = fp(&settings("vanilla", "a.json", 8), "m");
        assert!(a
            .differences(&fp(&settings("tint", "b.json", 8), "m"))
            .is_empty());
        assert_eq!(
            a.differences(&fp(&settings("vanilla", "a.json", 4), "m")),
            vec!["settings"]
        );
        assert_eq!(
            a.differences(&fp(&settings("vanilla", "a.json", 8), "other weights")),
            vec!["checkpoint content (SHA-256)"]
        );
        let mut newer = a.clone();
        newer.code_version = "v2".into();
        newer.text_sha256 = "u".into();
        assert_eq!(
            a.differences(&newer),
            vec!["text (SHA-256)", "code version"]
        );
    }
}
