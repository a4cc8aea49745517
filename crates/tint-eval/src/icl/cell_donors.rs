//! `--cells-from`: finished cells another report holds, taken instead of computed. A control run
//! that repeats rows of a larger run beside a new row (Table 1's matched control repeats `icl`,
//! `dyn-eval` and `tint-ref` in the Single format with the label loss, which the task run has
//! computed) then computes only the new row. A cell is taken only where the donor was made from
//! the same checkpoint, task data, backend and code as this run, and the cell itself has this
//! run's seeds, examples, method settings and digest of its inputs (the checks `--resume` makes
//! of its own cells: `TaskRun::run_cells`).

use std::path::{Path, PathBuf};

use super::IclReport;
use crate::EvalError;

/// A report whose cells a run may take, and where it was read.
#[derive(Debug, Clone)]
pub struct CellDonor {
    /// The report's file.
    pub path: PathBuf,
    /// The report.
    pub report: IclReport,
}

/// A fingerprint field as the messages show it.
fn shown(value: Option<&serde_json::Value>) -> String {
    value.map_or("none".into(), |v| v.to_string())
}

/// The `"task: sha256"` entries of a fingerprint's `data_sha256`, as `(task, sha256)`.
fn task_digests(fingerprint: &serde_json::Value) -> Vec<(String, String)> {
    fingerprint
        .get("data_sha256")
        .and_then(|v| v.as_array())
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| e.as_str()?.split_once(": "))
                .map(|(t, sha)| (t.to_string(), sha.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the reports of `paths` as donors for a run whose report is `run` (its backend and resume
/// fingerprint set; the checkpoint's digest in the fingerprint says which model made it). A report made by other code is left out with a note through
/// `note` (its cells would be this run's only if the code change did not touch them).
///
/// # Errors
///
/// [`EvalError::Report`] naming the file for a report that has no fingerprint or was made from
/// another checkpoint, on another backend or from other data of a task this run evaluates (the
/// rule and both values), and for this run's own output; the errors of reading a report.
pub fn read_cell_donors(
    paths: &[PathBuf],
    out: &Path,
    run: &IclReport,
    note: &mut dyn FnMut(String),
) -> Result<Vec<CellDonor>, EvalError> {
    let ours = run.fingerprint.clone().unwrap_or(serde_json::Value::Null);
    let mut donors = Vec::with_capacity(paths.len());
    for path in paths {
        let refuse = |reason: String| EvalError::Report {
            path: path.clone(),
            reason: format!("--cells-from: {reason}"),
        };
        if path == out {
            return Err(refuse(
                "is this run's own --out (use --resume to keep its cells)".into(),
            ));
        }
        let report = IclReport::read_json(path)?;
        let theirs = report.fingerprint.clone().ok_or_else(|| {
            refuse("the report has no fingerprint (written before fingerprints), so what it was made from is unknown".into())
        })?;
        let name = "checkpoint_sha256";
        let (a, b) = (theirs.get(name), ours.get(name));
        if a != b {
            return Err(refuse(format!(
                "made from another checkpoint ({name} {} in the report, {} in this run)",
                shown(a),
                shown(b)
            )));
        }
        if report.backend != run.backend {
            return Err(refuse(format!(
                "made on backend {}, this run on backend {}",
                report.backend, run.backend
            )));
        }
        let their_tasks = task_digests(&theirs);
        for (task, sha) in task_digests(&ours) {
            if let Some((_, other)) = their_tasks.iter().find(|(t, _)| *t == task) {
                if *other != sha {
                    return Err(refuse(format!(
                        "made from other data of task {task} (sha256 {other} in the report, \
                         {sha} in this run)"
                    )));
                }
            }
        }
        let (a, b) = (theirs.get("code_version"), ours.get("code_version"));
        if a != b {
            note(format!(
                "--cells-from {}: made by other code ({} in the report, {} in this run): its \
                 cells are computed again",
                path.display(),
                shown(a),
                shown(b)
            ));
            continue;
        }
        donors.push(CellDonor {
            path: path.clone(),
            report,
        });
    }
    Ok(donors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(checkpoint: &str, data: &str, code: &str) -> IclReport {
        let mut r = IclReport::new("SmolLM2", "flex");
        r.fingerprint = Some(json!({
            "settings": "s",
            "checkpoint_sha256": checkpoint,
            "data_sha256": [format!("mr-snippets: {data}")],
            "code_version": code,
        }));
        r
    }

    fn written(dir: &Path, name: &str, r: &IclReport) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, serde_json::to_string(r).unwrap()).unwrap();
        path
    }

    #[test]
    fn donors_of_other_checkpoints_data_or_backends_are_refused_and_other_code_is_left_out() {
        let dir = std::env::temp_dir().join(format!("tint-cell-donors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let run = report("c1", "d1", "v1");
        let out = dir.join("out.json");
        let same = written(&dir, "same.json", &report("c1", "d1", "v1"));
        let mut notes = Vec::new();
        let donors = read_cell_donors(std::slice::from_ref(&same), &out, &run, &mut |n| {
            notes.push(n)
        })
        .unwrap();
        assert_eq!(donors.len(), 1);
        assert!(notes.is_empty(), "{notes:?}");

        let code = written(&dir, "code.json", &report("c1", "d1", "v2"));
        let donors = read_cell_donors(&[code], &out, &run, &mut |n| notes.push(n)).unwrap();
        assert!(donors.is_empty());
        assert!(
            notes[0].contains("other code") && notes[0].contains("\"v2\""),
            "{notes:?}"
        );

        for (name, other, rule) in [
            (
                "checkpoint.json",
                report("c2", "d1", "v1"),
                "another checkpoint",
            ),
            (
                "data.json",
                report("c1", "d2", "v1"),
                "other data of task mr-snippets",
            ),
            (
                "backend.json",
                IclReport {
                    backend: "wgpu".into(),
                    ..report("c1", "d1", "v1")
                },
                "backend wgpu",
            ),
        ] {
            let path = written(&dir, name, &other);
            let err = read_cell_donors(&[path], &out, &run, &mut |_| {}).unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains(name) && text.contains("--cells-from") && text.contains(rule),
                "{text}"
            );
        }
        let unprinted = written(&dir, "unprinted.json", &IclReport::new("SmolLM2", "flex"));
        let err = read_cell_donors(&[unprinted], &out, &run, &mut |_| {}).unwrap_err();
        assert!(
            err.to_string().contains("unprinted.json")
                && err.to_string().contains("no fingerprint"),
            "{err}"
        );
        let own =
            read_cell_donors(std::slice::from_ref(&out), &out, &run, &mut |_| {}).unwrap_err();
        assert!(own.to_string().contains("own --out"), "{own}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
