//! One report from the pieces of a language-modelling protocol run in parts (`eval lm --shard i/N`
//! on several machines or sessions, or runs of other methods on the same blocks): the parts must
//! share every setting but the train fractions, the shard and the method list, and the checkpoint
//! and text (SHA-256); no (method, train fraction) cell may come from two parts. The code version of
//! every part is kept in the merged report, beside the cells it computed.

use std::path::{Path, PathBuf};

use crate::report::{LmReport, MethodResult};
use crate::resume::{differing_keys, validate_cell, Fingerprint};
use crate::EvalError;
use tint_lab::paired::PairedSettings;

/// Keys of `settings.args` that may differ between the parts of one protocol.
const PART_KEYS: [&str; 2] = ["train_fraction", "shard"];

/// A part's fingerprint without what may differ between parts ([`PART_KEYS`]).
fn comparable(fingerprint: &Fingerprint) -> serde_json::Value {
    let mut settings = fingerprint.settings.clone();
    if let Some(args) = settings
        .get_mut("args")
        .and_then(serde_json::Value::as_object_mut)
    {
        for key in PART_KEYS {
            args.remove(key);
        }
    }
    settings
}

/// Reads one part: a finished `eval lm` report with a fingerprint.
fn read_part(path: &Path) -> Result<(LmReport, Fingerprint), EvalError> {
    let report_error = |reason: String| EvalError::Report {
        path: path.to_path_buf(),
        reason,
    };
    let report = LmReport::read_json(path)?;
    if report.settings.get("partial") == Some(&serde_json::Value::Bool(true)) {
        return Err(report_error(
            "a partial report (its run was interrupted): finish it with `eval lm --resume` and \
             the same flags before merging"
                .into(),
        ));
    }
    let fingerprint: Fingerprint = serde_json::from_value(report.settings["fingerprint"].clone())
        .map_err(|_| {
        report_error("the report has no fingerprint (made by an older version)".into())
    })?;
    Ok((report, fingerprint))
}

/// Merges the finished reports at `parts` into one: the cells of every part, their tuning
/// records, the paired differences recomputed over the merged cells, and `settings.parts` naming
/// each part's file, code version, train fractions and methods.
///
/// # Errors
///
/// Fewer than one part; a part that cannot be read, is not a report, is partial or has no
/// fingerprint; parts whose settings (but the train fractions, shard and methods), checkpoint or
/// text differ (naming the first part that differs and what); a cell present in two parts, or one
/// that fails [`validate_cell`].
pub fn merge_lm_reports(parts: &[PathBuf]) -> Result<LmReport, EvalError> {
    let Some((first_path, rest)) = parts.split_first() else {
        return Err(EvalError::InvalidSetting {
            name: "parts",
            value: "none".into(),
            rule: "give at least one report to merge".into(),
        });
    };
    let (first, first_fp) = read_part(first_path)?;
    let reference = comparable(&first_fp);
    let mut merged = first.clone();
    let mut sources = vec![part_summary(first_path, &first, &first_fp)];
    let mut owner: Vec<(String, f64, PathBuf)> = first
        .results
        .iter()
        .map(|c| (c.method.clone(), c.train_fraction, first_path.clone()))
        .collect();
    let blocks = first.settings["blocks"].as_u64().unwrap_or(0) as usize;
    let block_size = first.settings["run"]["args"]["block_size"]
        .as_u64()
        .unwrap_or(0) as usize;
    for path in rest {
        let (part, fp) = read_part(path)?;
        let mut differences = differing_keys(&reference, &comparable(&fp));
        if fp.checkpoint_sha256 != first_fp.checkpoint_sha256 {
            differences.push("checkpoint content (SHA-256)".into());
        }
        if fp.text_sha256 != first_fp.text_sha256 {
            differences.push("text (SHA-256)".into());
        }
        if !differences.is_empty() {
            return Err(EvalError::Report {
                path: path.clone(),
                reason: format!(
                    "made with other settings than {} ({}): parts of one report may differ only \
                     in their train fractions, shard and methods",
                    first_path.display(),
                    differences.join(", ")
                ),
            });
        }
        for cell in &part.results {
            if let Some((_, _, other)) = owner
                .iter()
                .find(|(m, f, _)| *m == cell.method && same_fraction(*f, cell.train_fraction))
            {
                return Err(EvalError::Report {
                    path: path.clone(),
                    reason: format!(
                        "its cell {} at train fraction {} is also in {}: a cell must come from one \
                         part",
                        cell.method,
                        cell.train_fraction,
                        other.display()
                    ),
                });
            }
            owner.push((cell.method.clone(), cell.train_fraction, path.clone()));
        }
        sources.push(part_summary(path, &part, &fp));
        merged.results.extend(part.results);
        for record in part.tuning {
            if !merged.tuning.contains(&record) {
                merged.tuning.push(record);
            }
        }
    }
    for cell in &merged.results {
        validate_cell(cell, blocks, block_size).map_err(|reason| EvalError::Report {
            path: owner
                .iter()
                .find(|(m, f, _)| *m == cell.method && same_fraction(*f, cell.train_fraction))
                .map_or_else(|| first_path.clone(), |(_, _, p)| p.clone()),
            reason: format!("cell {} f={}: {reason}", cell.method, cell.train_fraction),
        })?;
    }
    sort_cells(&mut merged.results);
    let mut fractions: Vec<f64> = Vec::new();
    for c in &merged.results {
        if !fractions
            .iter()
            .any(|&f| same_fraction(f, c.train_fraction))
        {
            fractions.push(c.train_fraction);
        }
    }
    merged.settings["run"]["args"]["train_fraction"] = serde_json::json!(fractions);
    merged.settings["eval"]["train_fractions"] = serde_json::json!(fractions);
    merged.settings["parts"] = serde_json::Value::Array(sources);
    let level = merged.settings["eval"]["ci_level"].as_f64().unwrap_or(0.95);
    let seed = merged.settings["eval"]["seed"].as_u64().unwrap_or(0);
    merged.compute_paired(&PairedSettings {
        level,
        seed,
        ..Default::default()
    });
    Ok(merged)
}

/// Cells by train fraction, then in the order of the settings' methods (unknown labels last, in
/// their order).
fn sort_cells(cells: &mut [MethodResult]) {
    let rank = |m: &str| {
        [
            "vanilla",
            "dyn-eval",
            "dyn-eval-matched",
            "tint",
            "tint-structured",
            "tint-ref",
        ]
        .iter()
        .position(|k| m == *k || m.starts_with(&format!("{k} ")))
        .unwrap_or(usize::MAX)
    };
    cells.sort_by(|a, b| {
        a.train_fraction
            .total_cmp(&b.train_fraction)
            .then(rank(&a.method).cmp(&rank(&b.method)))
    });
}

/// What the merged report says of one part.
fn part_summary(path: &Path, report: &LmReport, fp: &Fingerprint) -> serde_json::Value {
    let mut fractions: Vec<f64> = report.results.iter().map(|c| c.train_fraction).collect();
    fractions.dedup_by(|a, b| same_fraction(*a, *b));
    let mut methods: Vec<&str> = Vec::new();
    for c in &report.results {
        if !methods.contains(&c.method.as_str()) {
            methods.push(&c.method);
        }
    }
    serde_json::json!({
        "file": path,
        "code_version": fp.code_version,
        "train_fractions": fractions,
        "methods": methods,
        "shard": report.settings["run"]["args"]["shard"],
    })
}

/// Two train fractions are the same cell's when they agree to 1e-12 (they are parsed from the same
/// decimal text; the tolerance only absorbs a round trip through JSON).
fn same_fraction(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(method: &str, f: f64, shift: f64) -> MethodResult {
        crate::resume::test_cells::cell(method, f, 4, shift)
    }

    fn part(dir: &Path, name: &str, fraction: f64, settings_tweak: f64, code: &str) -> PathBuf {
        let args = serde_json::json!({
            "block_size": 10, "train_fraction": [fraction], "tune_blocks": 8,
            "shard": format!("{name}"), "grid": settings_tweak,
        });
        let run = serde_json::json!({ "args": args, "backend": "flex" });
        let fp = Fingerprint::new(&run, "ckpt", "text", code);
        let report = LmReport {
            settings: serde_json::json!({
                "eval": {"ci_level": 0.95, "seed": 0, "train_fractions": [fraction]},
                "blocks": 4, "run": run, "fingerprint": fp,
            }),
            results: vec![
                cell("vanilla", fraction, 0.0),
                cell("tint-ref", fraction, -0.01),
                cell("dyn-eval-matched", fraction, -0.02),
            ],
            paired: Vec::new(),
            tuning: Vec::new(),
        };
        let path = dir.join(format!("{name}.json"));
        report.write_json(&path).unwrap();
        path
    }

    #[test]
    fn parts_of_one_protocol_merge_and_others_are_refused() {
        let dir = std::env::temp_dir().join(format!("tint-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = part(&dir, "a", 0.3, 1.0, "0.1 git aaa");
        let b = part(&dir, "b", 0.5, 1.0, "0.1 git bbb");
        let merged = merge_lm_reports(&[b.clone(), a.clone()]).unwrap();
        assert_eq!(merged.results.len(), 6);
        assert_eq!(merged.results[0].train_fraction, 0.3, "sorted by fraction");
        assert_eq!(
            merged.settings["run"]["args"]["train_fraction"],
            serde_json::json!([0.3, 0.5])
        );
        let parts = merged.settings["parts"].as_array().unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0]["code_version"], "0.1 git bbb");
        assert!(merged
            .paired
            .iter()
            .any(|p| p.diff.method == "tint-ref" && p.diff.baseline == "dyn-eval-matched"));
        // Another setting: refused, naming it.
        let other = part(&dir, "c", 0.7, 2.0, "0.1 git aaa");
        let err = merge_lm_reports(&[a.clone(), other])
            .unwrap_err()
            .to_string();
        assert!(err.contains("args.grid") && err.contains("c.json"), "{err}");
        // The same cell twice: refused.
        let again = part(&dir, "d", 0.3, 1.0, "0.1 git aaa");
        let err = merge_lm_reports(&[a.clone(), again])
            .unwrap_err()
            .to_string();
        assert!(err.contains("also in") && err.contains("a.json"), "{err}");
        // A partial part: refused.
        let mut partial: LmReport =
            serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
        partial.settings["partial"] = true.into();
        let p = dir.join("partial.json");
        partial.write_json(&p).unwrap();
        let err = merge_lm_reports(&[a, p]).unwrap_err().to_string();
        assert!(err.contains("partial"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
