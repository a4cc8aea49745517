//! `eval lm --cells-from`: finished cells and tunings of another language-modelling report, taken
//! instead of computed. A run that repeats a row of a larger run beside new rows (the
//! approximation pieces of Table 2 repeat shard 1's `dyn-eval-matched` at 50 % beside a changed
//! `tint-ref`) then computes only the new rows. A report gives its cells only where it was made
//! from the same checkpoint, text and backend with the same bootstrap settings (else an error) by
//! the same code (else a note, and nothing is taken); a cell itself is taken only where it has
//! this run's method name, train fraction and digest of its inputs and its numbers validate (the
//! checks `--resume` makes of its own cells: [`crate::lm::run_lm_eval`]), a tuning only where its
//! digest ([`crate::lm_grid::tuning_inputs_sha256`]) is this run's and its numbers say its choice.

use std::path::{Path, PathBuf};

use crate::lm::LmEvalConfig;
use crate::report::{LmReport, MethodResult};
use crate::resume::Fingerprint;
use crate::tune_record::TuneRecord;
use crate::EvalError;

/// A report whose cells and tunings a run may take, and where it was read.
#[derive(Debug, Clone)]
pub struct LmDonor {
    /// The report's file.
    pub path: PathBuf,
    /// The report.
    pub report: LmReport,
}

/// What a donor must share with the run that takes its cells (besides the code).
pub struct DonorRules<'a> {
    /// This run's output (never its own donor: `--resume` keeps its cells).
    pub out: &'a Path,
    /// This run's fingerprint: the checkpoint and text digests and the code version.
    pub fingerprint: &'a Fingerprint,
    /// This run's backend, as reports record it (`settings.run.backend`).
    pub backend: &'a str,
    /// This run's evaluation settings: the block size and the bootstrap of every cell's interval.
    pub eval: &'a LmEvalConfig,
}

/// The evaluation settings a taken cell must have been computed with, by name.
fn eval_keys(eval: &LmEvalConfig) -> [(&'static str, serde_json::Value); 4] {
    [
        ("block_size", eval.block_size.into()),
        ("ci_level", eval.ci_level.into()),
        ("bootstrap_resamples", eval.bootstrap_resamples.into()),
        ("seed", eval.seed.into()),
    ]
}

/// Reads the reports of `paths` as donors under `rules`. A report made by other code is left out
/// with a note through `note` (its cells would be this run's only if the change did not touch
/// them).
///
/// # Errors
///
/// [`EvalError::Report`] naming the file, the rule and both values for this run's own output, a
/// report without a fingerprint, or one made from another checkpoint or text, on another backend
/// or with another block size or bootstrap; the errors of reading a report.
pub fn read_lm_donors(
    paths: &[PathBuf],
    rules: &DonorRules<'_>,
    note: &mut dyn FnMut(String),
) -> Result<Vec<LmDonor>, EvalError> {
    let short = |h: &str| h.chars().take(12).collect::<String>();
    let mut donors = Vec::with_capacity(paths.len());
    for path in paths {
        let refuse = |reason: String| EvalError::Report {
            path: path.clone(),
            reason: format!("--cells-from: {reason}"),
        };
        if path == rules.out {
            return Err(refuse(
                "is this run's own --out (use --resume to keep its cells)".into(),
            ));
        }
        let report = LmReport::read_json(path)?;
        let theirs: Fingerprint = serde_json::from_value(report.settings["fingerprint"].clone())
            .map_err(|_| {
                refuse(
                    "the report has no fingerprint (written before fingerprints), so what it \
                     was made from is unknown"
                        .into(),
                )
            })?;
        let ours = rules.fingerprint;
        for (what, a, b) in [
            (
                "another checkpoint (SHA-256",
                &theirs.checkpoint_sha256,
                &ours.checkpoint_sha256,
            ),
            (
                "another text (SHA-256",
                &theirs.text_sha256,
                &ours.text_sha256,
            ),
        ] {
            if a != b {
                return Err(refuse(format!(
                    "made from {what} {}… in the report, {}… in this run)",
                    short(a),
                    short(b)
                )));
            }
        }
        let backend = &report.settings["run"]["backend"];
        if backend.as_str() != Some(rules.backend) {
            return Err(refuse(format!(
                "made on backend {backend}, this run on backend {}",
                rules.backend
            )));
        }
        for (key, ours) in eval_keys(rules.eval) {
            let theirs = &report.settings["eval"][key];
            if *theirs != ours {
                return Err(refuse(format!(
                    "made with {key} {theirs}, this run with {ours} (its cells' blocks or \
                     intervals would not be this run's)"
                )));
            }
        }
        if theirs.code_version != ours.code_version {
            note(format!(
                "--cells-from {}: made by other code ({} in the report, {} in this run): its \
                 cells and tunings are computed again",
                path.display(),
                theirs.code_version,
                ours.code_version
            ));
            continue;
        }
        donors.push(LmDonor {
            path: path.clone(),
            report,
        });
    }
    Ok(donors)
}

/// The cells of `donors` a run may take, in order: those whose method name, train fraction and
/// digest of inputs are one of the run's own cells, `wanted` (the digests
/// [`crate::lm::run_lm_eval`] computes), so that a donor's cell of another computation under the
/// same name (another `tint-ref`) is left out rather than reported as a stored cell not reused.
pub fn donated_cells(donors: &[LmDonor], wanted: &[(String, f64, String)]) -> Vec<MethodResult> {
    donors
        .iter()
        .flat_map(|d| d.report.results.iter())
        .filter(|c| {
            wanted.iter().any(|(method, fraction, digest)| {
                c.method == *method
                    && (c.train_fraction - fraction).abs() < 1e-12
                    && c.inputs_sha256 == *digest
            })
        })
        .cloned()
        .collect()
}

/// The first tuning of `donors` computed from the inputs `digest` names (a record without a
/// digest is never taken) whose numbers say its choice ([`TuneRecord::check`]), and its file.
pub fn donated_tuning<'a>(
    donors: &'a [LmDonor],
    digest: &str,
) -> Option<(&'a Path, &'a TuneRecord)> {
    donors.iter().find_map(|d| {
        d.report
            .tuning
            .iter()
            .find(|t| t.tuned && t.inputs_sha256.as_deref() == Some(digest) && t.check().is_ok())
            .map(|t| (d.path.as_path(), t))
    })
}

/// Whether `cell` is `donor`'s cell as stored (the same method, fraction, digest and time: a cell
/// computed again never has the donor's time to the bit).
pub fn is_donated(cell: &MethodResult, donor: &MethodResult) -> bool {
    cell.method == donor.method
        && cell.train_fraction.to_bits() == donor.train_fraction.to_bits()
        && cell.inputs_sha256 == donor.inputs_sha256
        && cell.seconds.to_bits() == donor.seconds.to_bits()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fingerprint(checkpoint: &str, text: &str, code: &str) -> Fingerprint {
        Fingerprint::new(&json!({ "args": {} }), checkpoint, text, code)
    }

    fn report(fp: &Fingerprint, backend: &str, eval: &LmEvalConfig) -> LmReport {
        LmReport {
            settings: json!({ "eval": eval, "run": { "backend": backend }, "fingerprint": fp }),
            results: Vec::new(),
            paired: Vec::new(),
            tuning: Vec::new(),
        }
    }

    fn written(dir: &Path, name: &str, r: &LmReport) -> PathBuf {
        let path = dir.join(name);
        r.write_json(&path).unwrap();
        path
    }

    #[test]
    fn donors_of_other_checkpoints_texts_backends_or_bootstraps_are_refused_and_other_code_left_out(
    ) {
        let dir = std::env::temp_dir().join(format!("tint-lm-donors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let eval = LmEvalConfig::default();
        let ours = fingerprint("c1", "t1", "v1");
        let out = dir.join("out.json");
        let rules = DonorRules {
            out: &out,
            fingerprint: &ours,
            backend: "flex",
            eval: &eval,
        };
        let same = written(&dir, "same.json", &report(&ours, "flex", &eval));
        let mut notes = Vec::new();
        let donors =
            read_lm_donors(std::slice::from_ref(&same), &rules, &mut |n| notes.push(n)).unwrap();
        assert_eq!(donors.len(), 1);
        assert!(notes.is_empty(), "{notes:?}");

        let other_code = fingerprint("c1", "t1", "v2");
        let code = written(&dir, "code.json", &report(&other_code, "flex", &eval));
        let donors = read_lm_donors(&[code], &rules, &mut |n| notes.push(n)).unwrap();
        assert!(donors.is_empty());
        assert!(
            notes[0].contains("other code") && notes[0].contains("v2") && notes[0].contains("v1"),
            "{notes:?}"
        );

        let resampled = LmEvalConfig {
            bootstrap_resamples: 50,
            ..LmEvalConfig::default()
        };
        for (name, other, rule) in [
            (
                "checkpoint.json",
                report(&fingerprint("c2", "t1", "v1"), "flex", &eval),
                "another checkpoint",
            ),
            (
                "text.json",
                report(&fingerprint("c1", "t2", "v1"), "flex", &eval),
                "another text",
            ),
            (
                "backend.json",
                report(&ours, "wgpu", &eval),
                "backend \"wgpu\", this run on backend flex",
            ),
            (
                "bootstrap.json",
                report(&ours, "flex", &resampled),
                "bootstrap_resamples 50, this run with 1000",
            ),
        ] {
            let path = written(&dir, name, &other);
            let text = read_lm_donors(&[path], &rules, &mut |_| {})
                .unwrap_err()
                .to_string();
            assert!(
                text.contains(name) && text.contains("--cells-from") && text.contains(rule),
                "{text}"
            );
        }
        let mut unprinted = report(&ours, "flex", &eval);
        unprinted.settings = json!({ "eval": eval, "run": { "backend": "flex" } });
        let path = written(&dir, "unprinted.json", &unprinted);
        let text = read_lm_donors(&[path], &rules, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("unprinted.json") && text.contains("no fingerprint"),
            "{text}"
        );
        let text = read_lm_donors(std::slice::from_ref(&out), &rules, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(text.contains("own --out"), "{text}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn only_a_tuning_with_this_digest_whose_numbers_check_is_taken() {
        let record = |digest: Option<&str>, choice: f64| TuneRecord {
            method: "dyn-eval-matched".into(),
            parameter: "eta".into(),
            grid: vec![1e-4, 1e-3, 1e-2],
            scores: vec![3.0, 2.0, 2.5],
            objective: "mean NLL".into(),
            choice,
            source: "1 tuning block".into(),
            tuned: true,
            train_fraction: Some(0.5),
            extended: Vec::new(),
            interior: true,
            inputs_sha256: digest.map(str::to_string),
        };
        let mut report = report(
            &fingerprint("c", "t", "v"),
            "flex",
            &LmEvalConfig::default(),
        );
        report.tuning = vec![
            record(None, 1e-3),
            record(Some("d1"), 1e-2),
            record(Some("d1"), 1e-3),
        ];
        let donors = [LmDonor {
            path: PathBuf::from("a.json"),
            report,
        }];
        let (path, taken) = donated_tuning(&donors, "d1").unwrap();
        assert_eq!(path, Path::new("a.json"));
        assert_eq!(
            taken.choice, 1e-3,
            "the record whose choice is not its best is passed over"
        );
        assert!(donated_tuning(&donors, "d2").is_none());
    }
}
