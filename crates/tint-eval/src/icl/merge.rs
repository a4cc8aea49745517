//! One report from the pieces of an in-context classification protocol run one task at a time
//! (`scripts/table1_paper.sh task T` on several machines or sessions, `eval icl --task T` each): the
//! pieces must share every setting but the task and its data file, and the checkpoint (SHA-256); no
//! cell or tuning record may come from two pieces. Each piece's code version, tasks and data digest
//! are kept in the merged report, whose paired differences are recomputed over the merged cells
//! (the table then has the paper's layout: tasks as columns and their average).
//!
//! A merged report is not resumable: its fingerprint lists its pieces instead of one run's settings,
//! so `eval icl --resume` refuses it; resume the pieces and merge again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::report::IclReport;
use crate::paired::PairedSettings;
use crate::EvalError;

/// Fields of a piece's recorded settings that may differ between the pieces of one protocol.
pub const PART_FIELDS: [&str; 2] = ["task", "data"];

/// The top-level fields of a recorded settings text (`Name { a: 1, b: [2, 3], c: X { d: 4 } }`, the
/// `Debug` form of [`super::run_settings::IclRunSettings::fingerprint_text`]) as (name, value)
/// pairs in order; `None` when the text does not have that form.
fn top_level_fields(text: &str) -> Option<Vec<(String, String)>> {
    let open = text.find('{')?;
    let inner = text[open + 1..].trim_end().strip_suffix('}')?;
    let mut fields = Vec::new();
    let (mut depth, mut in_string, mut escaped, mut start) = (0i32, false, false, 0usize);
    let mut push = |piece: &str| -> Option<()> {
        let piece = piece.trim();
        if piece.is_empty() {
            return Some(());
        }
        let (name, value) = piece.split_once(": ")?;
        fields.push((name.trim().to_string(), value.trim().to_string()));
        Some(())
    };
    for (i, c) in inner.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' | '(' => depth += 1,
            ']' | '}' | ')' => depth -= 1,
            ',' if depth == 0 => {
                push(&inner[start..i])?;
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return None;
        }
    }
    if depth != 0 || in_string {
        return None;
    }
    push(&inner[start..])?;
    Some(fields)
}

/// The settings fields (other than [`PART_FIELDS`]) whose values differ between two recorded
/// settings texts, as `name (a → b)`; the whole text when either does not parse.
pub fn differing_settings(a: &str, b: &str) -> Vec<String> {
    let (Some(fa), Some(fb)) = (top_level_fields(a), top_level_fields(b)) else {
        return if a == b {
            Vec::new()
        } else {
            vec![format!("settings ({a} → {b})")]
        };
    };
    let (ma, mb): (BTreeMap<_, _>, BTreeMap<_, _>) =
        (fa.into_iter().collect(), fb.into_iter().collect());
    let mut names: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| !PART_FIELDS.contains(&n.as_str()))
        .filter_map(|n| {
            let (va, vb) = (ma.get(n), mb.get(n));
            (va != vb).then(|| {
                let show = |v: Option<&String>| v.map_or("absent".to_string(), Clone::clone);
                format!("{n} ({} → {})", show(va), show(vb))
            })
        })
        .collect()
}

/// A piece's fingerprint fields (`settings`, `checkpoint_sha256`, `code_version`, `data_sha256`).
struct PieceFingerprint {
    settings: String,
    checkpoint_sha256: String,
    code_version: String,
    data_sha256: serde_json::Value,
}

/// Reads one piece: an `eval icl` report with a run's fingerprint (not itself a merged report).
fn read_piece(path: &Path) -> Result<(IclReport, PieceFingerprint), EvalError> {
    let report_error = |reason: &str| EvalError::Report {
        path: path.to_path_buf(),
        reason: reason.into(),
    };
    let report = IclReport::read_json(path)?;
    let fingerprint = report.fingerprint.as_ref().ok_or_else(|| {
        report_error(
            "the report has no fingerprint (made by an older version): it cannot be merged",
        )
    })?;
    if fingerprint.get("merged_from").is_some() {
        return Err(report_error(
            "a merged report: merge the pieces it names (its fingerprint's merged_from) instead",
        ));
    }
    let text = |key: &str| {
        fingerprint
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| report_error("its fingerprint lacks a field a run records"))
    };
    let piece = PieceFingerprint {
        settings: text("settings")?,
        checkpoint_sha256: text("checkpoint_sha256")?,
        code_version: text("code_version")?,
        data_sha256: fingerprint
            .get("data_sha256")
            .cloned()
            .unwrap_or(serde_json::Value::Null),
    };
    if report.cells.is_empty() {
        return Err(report_error(
            "no finished cell: run the piece (eval icl --resume with its flags) before merging",
        ));
    }
    Ok((report, piece))
}

/// Merges the `eval icl` reports at `pieces` into one: every piece's cells and tuning records, the
/// paired differences recomputed over the merged cells, and a fingerprint `merged_from` naming each
/// piece's file, code version, tasks' data digests and number of cells.
///
/// # Errors
///
/// No piece; a piece that cannot be read, has no run fingerprint, is itself merged or has no cell;
/// pieces of another model, backend, checkpoint or settings but the task and data file (naming the
/// first piece that differs and each differing setting with its two values); a cell or tuning
/// record present in two pieces; a cell whose numbers do not recount from its predictions.
pub fn merge_icl_reports(pieces: &[PathBuf]) -> Result<IclReport, EvalError> {
    let Some(first_path) = pieces.first() else {
        return Err(EvalError::InvalidSetting {
            name: "pieces",
            value: "none".into(),
            rule: "give at least one report to merge",
        });
    };
    // Each piece is read once; the first is the one the others are compared with.
    let read: Vec<(IclReport, PieceFingerprint)> = pieces
        .iter()
        .map(|p| read_piece(p))
        .collect::<Result<_, _>>()?;
    let (first, first_fp) = &read[0];
    let mut merged = IclReport::new(first.model.clone(), first.backend.clone());
    let mut owners: Vec<(String, PathBuf)> = Vec::new();
    let mut sources = Vec::with_capacity(pieces.len());
    for (path, (piece, fp)) in pieces.iter().zip(&read) {
        let mut differences = differing_settings(&first_fp.settings, &fp.settings);
        if piece.model != first.model {
            differences.push(format!("model ({} → {})", first.model, piece.model));
        }
        if piece.backend != first.backend {
            differences.push(format!("backend ({} → {})", first.backend, piece.backend));
        }
        if fp.checkpoint_sha256 != first_fp.checkpoint_sha256 {
            differences.push("checkpoint content (SHA-256)".into());
        }
        if !differences.is_empty() {
            return Err(EvalError::Report {
                path: path.clone(),
                reason: format!(
                    "made with other settings than {}: {}; pieces of one report may differ only \
                     in their task and data file",
                    first_path.display(),
                    differences.join(", ")
                ),
            });
        }
        for cell in &piece.cells {
            let name = format!(
                "cell {} k={} on {}",
                cell.key.row_label(),
                cell.key.k,
                cell.key.task
            );
            cell.validate().map_err(|why| EvalError::Report {
                path: path.clone(),
                reason: format!("its {name} does not recount: {why}"),
            })?;
            claim(&mut owners, name, path)?;
            merged.cells.push(cell.clone());
        }
        for record in &piece.tuning {
            claim(
                &mut owners,
                format!("tuning record {}", record.method),
                path,
            )?;
            merged.tuning.push(record.clone());
        }
        sources.push(serde_json::json!({
            "file": path.display().to_string(),
            "code_version": fp.code_version,
            "data_sha256": fp.data_sha256,
            "cells": piece.cells.len(),
            "settings": fp.settings,
        }));
    }
    merged.compute_paired(&PairedSettings::default());
    merged.fingerprint = Some(serde_json::json!({ "merged_from": sources }));
    Ok(merged)
}

/// Records that `what` comes from `path`, refusing it when another piece already gave it.
fn claim(owners: &mut Vec<(String, PathBuf)>, what: String, path: &Path) -> Result<(), EvalError> {
    if let Some((_, other)) = owners.iter().find(|(w, _)| *w == what) {
        return Err(EvalError::Report {
            path: path.to_path_buf(),
            reason: format!(
                "its {what} is also in {}: each must come from one piece",
                other.display()
            ),
        });
    }
    owners.push((what, path.to_path_buf()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icl::result::{CellKey, CellResult, CellSettings, Prediction, SeedRun};
    use crate::icl::task::TaskKind;

    const SETTINGS: &str = "IclArgs { model: SmolLm2, task: [\"mr-snippets\"], data: [], \
        shots: [0, 32], seeds: [0, 1], tune: [TuneGrid { parameter: \"lr\", values: [0.1, 0.3] }], \
        out: \"\", tint: TintFlags { sim_layers: \"all\", no_reuse: false }, resume: false }";

    /// A one-cell report on `task`: `icl` at 4 shots, 2 seeds × 3 queries, `right` of them right.
    fn piece(task: TaskKind, settings: &str, right: usize) -> IclReport {
        let runs: Vec<SeedRun> = [0u64, 1]
            .iter()
            .map(|&seed| SeedRun {
                seed,
                demos_used: 4,
                accuracy: right as f64 / 3.0,
                accuracy_calibrated: right as f64 / 3.0,
                train_losses: Vec::new(),
                predictions: (0..3)
                    .map(|q| Prediction {
                        index: q,
                        label: 1,
                        scores: vec![0.0, 0.0],
                        prior: vec![0.0, 0.0],
                        predicted: usize::from(q < right),
                        predicted_calibrated: usize::from(q < right),
                    })
                    .collect(),
                seconds: 0.0,
            })
            .collect();
        let mut report = IclReport::new("m", "flex");
        report.cells.push(CellResult {
            key: CellKey {
                task,
                method: "icl".into(),
                k: 4,
                format: None,
                loss: None,
            },
            settings: CellSettings {
                seeds: vec![0, 1],
                balanced: false,
                demos_in_context: true,
                n_test: 3,
                max_input_tokens: 64,
                method_settings: String::new(),
                calibration: "prompt".into(),
            },
            runs,
            accuracy_mean: right as f64 / 3.0,
            accuracy_std: 0.0,
            calibrated_mean: right as f64 / 3.0,
            calibrated_std: 0.0,
            inputs_sha256: String::new(),
        });
        report.fingerprint = Some(serde_json::json!({
            "settings": settings.replace("mr-snippets", &task.to_string()),
            "checkpoint_sha256": "c",
            "code_version": format!("v-{task}"),
            "data_sha256": [format!("{task}: d")],
        }));
        report
    }

    fn write(dir: &Path, name: &str, report: &IclReport) -> PathBuf {
        let path = dir.join(name);
        report.write_json(&path).unwrap();
        path
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("tint-icl-merge-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn settings_fields_split_at_the_top_level_only() {
        let fields = top_level_fields(SETTINGS).unwrap();
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["model", "task", "data", "shots", "seeds", "tune", "out", "tint", "resume"]
        );
        assert_eq!(
            fields[5].1,
            "[TuneGrid { parameter: \"lr\", values: [0.1, 0.3] }]"
        );
        // Task and data may differ; anything else is named with its two values.
        let other = SETTINGS
            .replace("mr-snippets", "cr-snippets")
            .replace("[0, 1]", "[0, 2]");
        assert_eq!(
            differing_settings(SETTINGS, &other),
            ["seeds ([0, 1] → [0, 2])".to_string()]
        );
        assert!(top_level_fields("IclArgs { a: [1, }").is_none());
    }

    #[test]
    fn pieces_of_two_tasks_merge_into_one_table() {
        let dir = scratch("two-tasks");
        let mr = write(&dir, "mr.json", &piece(TaskKind::MrSnippets, SETTINGS, 2));
        let cr = write(&dir, "cr.json", &piece(TaskKind::CrSnippets, SETTINGS, 3));
        let merged = merge_icl_reports(&[mr.clone(), cr]).unwrap();
        assert_eq!(merged.cells.len(), 2);
        assert_eq!(merged.tasks(), [TaskKind::MrSnippets, TaskKind::CrSnippets]);
        let sources = &merged.fingerprint.as_ref().unwrap()["merged_from"];
        assert_eq!(sources[1]["code_version"], "v-cr-snippets");
        // A merged report is not a piece, and a piece merged twice gives its cells twice.
        let out = write(&dir, "merged.json", &merged);
        let again = merge_icl_reports(&[out]).unwrap_err().to_string();
        assert!(again.contains("a merged report"), "{again}");
        let twice = merge_icl_reports(&[mr.clone(), mr])
            .unwrap_err()
            .to_string();
        assert!(twice.contains("also in"), "{twice}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_piece_of_other_settings_or_with_a_miscounted_cell_is_refused() {
        let dir = scratch("refused");
        let mr = write(&dir, "mr.json", &piece(TaskKind::MrSnippets, SETTINGS, 2));
        let other = SETTINGS.replace("shots: [0, 32]", "shots: [0, 4]");
        let cr = write(&dir, "cr.json", &piece(TaskKind::CrSnippets, &other, 2));
        let error = merge_icl_reports(&[mr.clone(), cr.clone()])
            .unwrap_err()
            .to_string();
        assert!(error.contains("shots ([0, 32] → [0, 4])"), "{error}");
        assert!(error.contains("cr.json"), "{error}");
        let mut wrong = piece(TaskKind::CrSnippets, SETTINGS, 2);
        wrong.cells[0].accuracy_mean = 1.0;
        let wrong = write(&dir, "wrong.json", &wrong);
        let error = merge_icl_reports(&[mr, wrong]).unwrap_err().to_string();
        assert!(error.contains("does not recount"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
