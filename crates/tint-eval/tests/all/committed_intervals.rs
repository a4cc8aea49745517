//! The committed LM reports' intervals recompute to the bit from their own blocks: the perplexity
//! bootstrap and the paired differences (both `tint_lab::bootstrap::percentile_interval` since
//! 2026-12-04, two hand-written loops before), with the settings each report records. A change to the
//! resampling that moved a committed number fails here, without rerunning the experiments.

use std::path::{Path, PathBuf};

use tint_eval::perplexity::bootstrap;
use tint_eval::LmReport;
use tint_lab::paired::PairedSettings;

/// The committed `eval lm` reports that record their evaluation settings.
fn committed_reports() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["docs/data", "experiments/table2-paper"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            let lm = name.starts_with("lm-")
                || name.starts_with("table2")
                || name.starts_with("shard-")
                || name.starts_with("constructed-")
                || name.starts_with("approx-")
                || name.starts_with("ablation-");
            if lm && name.ends_with(".json") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn committed_perplexity_and_paired_intervals_recompute_to_the_bit() {
    let mut checked = (0, 0);
    for path in committed_reports() {
        let report = LmReport::read_json(&path).unwrap();
        let eval = &report.settings["eval"];
        let (Some(level), Some(resamples), Some(seed)) = (
            eval["ci_level"].as_f64(),
            eval["bootstrap_resamples"].as_u64(),
            eval["seed"].as_u64(),
        ) else {
            continue;
        };
        for result in &report.results {
            let again = bootstrap(&result.blocks, level, resamples as usize, seed);
            assert_eq!(
                (again.ci_low.to_bits(), again.ci_high.to_bits()),
                (
                    result.perplexity.ci_low.to_bits(),
                    result.perplexity.ci_high.to_bits()
                ),
                "{} {} at {}",
                path.display(),
                result.method,
                result.train_fraction
            );
            checked.0 += 1;
        }
        if report.paired.is_empty() {
            continue;
        }
        let mut again = report.clone();
        again.compute_paired(&PairedSettings {
            level,
            seed,
            ..Default::default()
        });
        // The numbers (older files lack the later `resampled` and `clusters` fields).
        let numbers = |r: &LmReport| -> Vec<_> {
            r.paired
                .iter()
                .map(|p| {
                    let d = &p.diff;
                    let bits = (d.mean.to_bits(), d.ci_low.to_bits(), d.ci_high.to_bits());
                    (
                        d.method.clone(),
                        d.baseline.clone(),
                        bits,
                        (d.wins, d.ties, d.losses),
                    )
                })
                .collect()
        };
        assert_eq!(numbers(&again), numbers(&report), "{}", path.display());
        checked.1 += report.paired.len();
    }
    // Every table-2 piece and the docs/data reports with settings: hundreds of intervals.
    assert!(checked.0 >= 50 && checked.1 >= 20, "{checked:?}");
}
