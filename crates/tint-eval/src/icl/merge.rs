//! One report from the pieces of an in-context classification protocol run one task, or one set of
//! seeds, at a time (`scripts/table1_paper.sh task T` on several machines or sessions, `eval icl
//! --task T --seeds S` each, e.g. a job array with one seed per job): the pieces must share every
//! setting but the task, its data file and the seeds, and the checkpoint (SHA-256). A cell found in
//! several pieces (one task, other seeds) becomes one cell whose seed runs are those of the pieces,
//! in the order the pieces are given: the seeds must not repeat, and its settings must agree but
//! for the seeds and each seed's tuned step (`--tune-per-seed`, which seed pieces need: a step
//! tuned on all of a piece's seeds would differ between pieces, and its record would be in two of
//! them). A zero-shot cell runs once, with the first seed's step: it comes from the first piece
//! that has it. No tuning record may come from two pieces. Each piece's code version, tasks, seeds
//! and data digest are kept in the merged report, whose paired differences are recomputed over the
//! merged cells (the table then has the paper's layout: tasks as columns and their average).
//!
//! A merged report is not resumable: its fingerprint lists its pieces instead of one run's settings,
//! so `eval icl --resume` refuses it; resume the pieces and merge again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::calibration::mean_std;
use super::report::IclReport;
use super::result::CellResult;
use crate::EvalError;
use tint_lab::paired::PairedSettings;

/// Fields of a piece's recorded settings that may differ between the pieces of one protocol.
pub const PART_FIELDS: [&str; 3] = ["task", "data", "seeds"];

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
    differing_fields(a, b, &PART_FIELDS)
}

/// What differs between a report's recorded fingerprint (`stored`; `None` for a report without
/// one) and this run's (`now`), each named with its two values: the settings fields
/// (every field, as `differing_settings` names them), the checkpoint's and the data's SHA-256 (first 12 hex
/// digits) and the code version. Empty when they are equal.
pub fn fingerprint_differences(
    stored: Option<&serde_json::Value>,
    now: &serde_json::Value,
) -> Vec<String> {
    let Some(stored) = stored else {
        return vec!["no fingerprint (a report of an older version)".into()];
    };
    let text = |v: &serde_json::Value, key: &str| match &v[key] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "absent".into(),
        other => other.to_string(),
    };
    let short = |s: String| s.chars().take(12).collect::<String>();
    let mut differences = differing_fields(&text(stored, "settings"), &text(now, "settings"), &[]);
    if stored["checkpoint_sha256"] != now["checkpoint_sha256"] {
        differences.push(format!(
            "checkpoint content (SHA-256 {}… → {}…)",
            short(text(stored, "checkpoint_sha256")),
            short(text(now, "checkpoint_sha256"))
        ));
    }
    if stored["data_sha256"] != now["data_sha256"] {
        differences.push(format!(
            "data ({} → {})",
            text(stored, "data_sha256"),
            text(now, "data_sha256")
        ));
    }
    if stored["code_version"] != now["code_version"] {
        differences.push(format!(
            "code version ({} → {})",
            text(stored, "code_version"),
            text(now, "code_version")
        ));
    }
    differences
}

/// The fields but `skip` whose values differ between two recorded settings texts, as
/// `name (a → b)`; the whole text when either does not parse.
fn differing_fields(a: &str, b: &str, skip: &[&str]) -> Vec<String> {
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
        .filter(|n| !skip.contains(&n.as_str()))
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
            rule: "give at least one report to merge".into(),
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
    // Each merged cell, with the piece that gave each of its seed runs.
    let mut cells: Vec<(CellResult, Vec<PathBuf>)> = Vec::new();
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
                     in their task, data file and seeds",
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
            match cells.iter_mut().find(|(c, _)| c.key == cell.key) {
                None => cells.push((cell.clone(), vec![path.clone(); cell.runs.len()])),
                // Zero-shot: the first piece's runs (a run with every seed uses its first seed's
                // step), recorded with every piece's steps, as that run records them.
                Some((into, _)) if cell.key.k == 0 => {
                    join_step_settings(&mut into.settings.method_settings, cell);
                }
                Some((into, from)) => add_seed_runs(into, from, cell, path, &name)?,
            }
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
    merged.cells = cells.into_iter().map(|(cell, _)| cell).collect();
    merged.compute_paired(&PairedSettings::default());
    merged.fingerprint = Some(serde_json::json!({ "merged_from": sources }));
    Ok(merged)
}

/// Adds the seed runs of `cell` (from the piece at `path`) to `into`, the same cell of earlier
/// pieces (`from`: the piece of each of its runs): the settings must agree but for the seeds and
/// the per-seed steps, and no seed may repeat. The means and spreads are recomputed; the merged
/// cell has no input digest (a merged report is not resumed).
fn add_seed_runs(
    into: &mut CellResult,
    from: &mut Vec<PathBuf>,
    cell: &CellResult,
    path: &Path,
    name: &str,
) -> Result<(), EvalError> {
    let refuse = |reason: String| EvalError::Report {
        path: path.to_path_buf(),
        reason,
    };
    if let Some(run) = cell
        .runs
        .iter()
        .find(|r| into.settings.seeds.contains(&r.seed))
    {
        let other = &from[into
            .runs
            .iter()
            .position(|r| r.seed == run.seed)
            .unwrap_or(0)];
        return Err(refuse(format!(
            "its {name} has seed {} also in {}: each seed run must come from one piece",
            run.seed,
            other.display()
        )));
    }
    let (a, b) = (&into.settings, &cell.settings);
    let per_seed = |s: &str| s.is_empty() || s.starts_with("seed ");
    let mut differences = Vec::new();
    for (field, same) in [
        ("balanced", a.balanced == b.balanced),
        ("demos_in_context", a.demos_in_context == b.demos_in_context),
        ("n_test", a.n_test == b.n_test),
        ("max_input_tokens", a.max_input_tokens == b.max_input_tokens),
        ("calibration", a.calibration == b.calibration),
        (
            "method_settings",
            a.method_settings == b.method_settings
                || (per_seed(&a.method_settings) && per_seed(&b.method_settings)),
        ),
    ] {
        if !same {
            differences.push(field);
        }
    }
    if !differences.is_empty() {
        return Err(refuse(format!(
            "its {name} differs from the same cell of {} in {}: the seed runs of one cell must \
             share every setting but the seeds (and each seed's tuned step)",
            from[0].display(),
            differences.join(", ")
        )));
    }
    join_step_settings(&mut into.settings.method_settings, cell);
    into.settings.seeds.extend(&cell.settings.seeds);
    into.runs.extend(cell.runs.iter().cloned());
    from.extend(std::iter::repeat_n(path.to_path_buf(), cell.runs.len()));
    let plain: Vec<f64> = into.runs.iter().map(|r| r.accuracy).collect();
    let calibrated: Vec<f64> = into.runs.iter().map(|r| r.accuracy_calibrated).collect();
    (into.accuracy_mean, into.accuracy_std) = mean_std(&plain);
    (into.calibrated_mean, into.calibrated_std) = mean_std(&calibrated);
    into.inputs_sha256.clear();
    into.validate().map_err(|why| {
        refuse(format!(
            "its {name} merged with earlier pieces does not recount: {why}"
        ))
    })
}

/// Appends the per-seed steps of `cell`'s settings (`seed 1: …; seed 2: …`) to `settings`, those
/// of the same row in earlier pieces, unless they are the same.
fn join_step_settings(settings: &mut String, cell: &CellResult) {
    let more = &cell.settings.method_settings;
    if more.is_empty() || settings == more {
        return;
    }
    if !settings.is_empty() {
        settings.push_str("; ");
    }
    settings.push_str(more);
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
        seed_piece(task, settings, &[0, 1], &[right, right], "icl", 4, "")
    }

    /// A one-cell report on `task`: `method` at `k` shots, one run per seed of `seeds` with 3
    /// queries, `right[i]` of them right in seed `i`'s run; the recorded settings' seeds are
    /// `seeds`.
    fn seed_piece(
        task: TaskKind,
        settings: &str,
        seeds: &[u64],
        right: &[usize],
        method: &str,
        k: usize,
        method_settings: &str,
    ) -> IclReport {
        let runs: Vec<SeedRun> = seeds
            .iter()
            .zip(right)
            .map(|(&seed, &right)| SeedRun {
                seed,
                demos_used: k,
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
        let accuracies: Vec<f64> = runs.iter().map(|r| r.accuracy).collect();
        let (mean, std) = mean_std(&accuracies);
        let mut report = IclReport::new("m", "flex");
        report.cells.push(CellResult {
            key: CellKey {
                task,
                method: method.into(),
                k,
                format: None,
                loss: None,
            },
            settings: CellSettings {
                seeds: seeds.to_vec(),
                balanced: false,
                demos_in_context: true,
                n_test: 3,
                max_input_tokens: 64,
                method_settings: method_settings.into(),
                calibration: "prompt".into(),
            },
            runs,
            accuracy_mean: mean,
            accuracy_std: std,
            calibrated_mean: mean,
            calibrated_std: std,
            inputs_sha256: String::new(),
        });
        let seeds_text = format!("seeds: {seeds:?}");
        report.fingerprint = Some(serde_json::json!({
            "settings": settings
                .replace("mr-snippets", &task.to_string())
                .replace("seeds: [0, 1]", &seeds_text),
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
        // Task, data and seeds may differ; anything else is named with its two values.
        let other = SETTINGS
            .replace("mr-snippets", "cr-snippets")
            .replace("seeds: [0, 1]", "seeds: [2]")
            .replace("shots: [0, 32]", "shots: [0, 4]");
        assert_eq!(
            differing_settings(SETTINGS, &other),
            ["shots ([0, 32] → [0, 4])".to_string()]
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

    /// Seed pieces of one task (`--seeds 0`, `--seeds 1`) merge into one cell per row whose seed
    /// runs are the pieces', in the order given, with the means and spreads of all of them and
    /// each seed's step in the settings; the zero-shot cell's run comes from the first piece. A seed in
    /// two pieces, or a cell whose settings differ but for the seeds, is refused.
    #[test]
    fn seed_pieces_of_one_task_merge_into_cells_of_every_seed() {
        let dir = scratch("seeds");
        let row = "dyn-eval(lr=per-seed,steps=1)";
        let piece_of = |seeds: &[u64], right: &[usize], settings: &str| {
            let mut report = seed_piece(
                TaskKind::MrSnippets,
                SETTINGS,
                seeds,
                right,
                row,
                4,
                settings,
            );
            // The zero-shot cell: run once, with the piece's first seed's step.
            let zero = seed_piece(
                TaskKind::MrSnippets,
                SETTINGS,
                &[0],
                &[right[0]],
                row,
                0,
                settings,
            );
            report.cells.push(zero.cells[0].clone());
            report
        };
        let a = write(&dir, "s0.json", &piece_of(&[0], &[1], "seed 0: lr 1e-3"));
        let b = write(
            &dir,
            "s12.json",
            &piece_of(&[1, 2], &[3, 2], "seed 1: lr 3e-4; seed 2: lr 1e-3"),
        );
        let merged = merge_icl_reports(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(merged.cells.len(), 2);
        let cell = merged.cells.iter().find(|c| c.key.k == 4).unwrap();
        let whole = seed_piece(
            TaskKind::MrSnippets,
            SETTINGS,
            &[0, 1, 2],
            &[1, 3, 2],
            row,
            4,
            "seed 0: lr 1e-3; seed 1: lr 3e-4; seed 2: lr 1e-3",
        );
        assert_eq!(
            *cell, whole.cells[0],
            "the cell a run with every seed writes"
        );
        let zero = merged.cells.iter().find(|c| c.key.k == 0).unwrap();
        // The first piece's run, with every seed's step recorded (as a run with every seed).
        assert_eq!(zero.runs[0].seed, 0);
        assert_eq!(
            zero.settings.method_settings,
            whole.cells[0].settings.method_settings
        );
        // Seed 1 again, and a cell of another size.
        let again = write(&dir, "s1.json", &piece_of(&[1], &[0], "seed 1: lr 3e-4"));
        let error = merge_icl_reports(&[a.clone(), b.clone(), again])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("has seed 1 also in") && error.contains("s12.json"),
            "{error}"
        );
        let mut other = piece_of(&[3], &[2], "seed 3: lr 1e-3");
        other.cells[0].settings.max_input_tokens = 32;
        let other = write(&dir, "s3.json", &other);
        let error = merge_icl_reports(&[a, b, other]).unwrap_err().to_string();
        assert!(error.contains("in max_input_tokens"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A refused `--resume` names what differs: each settings field (the task and seeds too),
    /// the checkpoint, the data and the code, with both values; a report without a fingerprint
    /// says so.
    #[test]
    fn fingerprint_differences_name_each_part_with_both_values() {
        let now = serde_json::json!({
            "settings": SETTINGS,
            "checkpoint_sha256": "aaaaaaaaaaaaaaaa",
            "data_sha256": ["mr-snippets: d"],
            "code_version": "v1",
        });
        assert!(fingerprint_differences(Some(&now), &now).is_empty());
        let stored = serde_json::json!({
            "settings": SETTINGS.replace("seeds: [0, 1]", "seeds: [0]"),
            "checkpoint_sha256": "bbbbbbbbbbbbbbbb",
            "data_sha256": ["mr-snippets: e"],
            "code_version": "v0",
        });
        assert_eq!(
            fingerprint_differences(Some(&stored), &now),
            [
                "seeds ([0] → [0, 1])",
                "checkpoint content (SHA-256 bbbbbbbbbbbb… → aaaaaaaaaaaa…)",
                "data ([\"mr-snippets: e\"] → [\"mr-snippets: d\"])",
                "code version (v0 → v1)",
            ]
        );
        assert_eq!(
            fingerprint_differences(None, &now),
            ["no fingerprint (a report of an older version)"]
        );
    }
}
