//! The default suite (`cargo xtask eval`, designed for ≤ 20 minutes on an idle 2-core CPU):
//! SmolLM2-135M on SOTU blocks, vanilla vs dynamic evaluation vs TinT (constructed, structured,
//! reference; top layers) with step sizes tuned on held-out addresses and paired differences; then
//! in-context classification on the offline movie-review snippets. Rewrites the `lm:default` and
//! `icl:default` sections of `docs/results.md` and copies the JSON and SVG charts to `docs/data/`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::backend::AutodiffBackend;

use crate::icl::run::{accuracy_svg_path, run_icl};
use crate::icl::run_settings::IclRunSettings;
use crate::lm_run::{lm_description, paired_svg_path, run_lm};
use crate::lm_settings::LmRunSettings;
use crate::results_doc::{copy_into, today, write_marked_section, RESULTS_HEADER};
use crate::run_env::RunEnv;
use crate::run_event::RunEvent;
use crate::EvalError;

/// The parts of the suite, in order, by the name their progress is shown under.
pub const SUITE_PARTS: [&str; 2] = ["suite 1/2: lm", "suite 2/2: icl"];

/// What the suite wrote.
#[derive(Debug, Clone)]
pub struct SuiteOutcome {
    /// The rewritten results document (`docs/results.md`).
    pub doc: PathBuf,
    /// Seconds for the whole suite.
    pub seconds: f64,
}

/// Runs the default suite with its reports under `out_dir` (`resume`: keep their finished cells),
/// then rewrites the sections of `root/docs/results.md` and copies the JSON and charts to
/// `root/docs/data/`. `on_event` receives each part's events with the part's name
/// ([`SUITE_PARTS`]).
///
/// # Errors
///
/// The errors of [`run_lm`] and [`run_icl`], and failed copies or writes.
pub fn run_default_suite<AB: AutodiffBackend>(
    out_dir: &Path,
    resume: bool,
    root: &Path,
    env: &RunEnv<'_, AB>,
    on_event: &mut dyn FnMut(&'static str, RunEvent),
) -> Result<SuiteOutcome, EvalError> {
    let suite_start = Instant::now();
    let lm = LmRunSettings::default_suite(out_dir, resume);
    let start = Instant::now();
    let report = run_lm(&lm, env, &mut |e| on_event(SUITE_PARTS[0], e))?.report;
    let lm_seconds = start.elapsed().as_secs_f64();
    let data_dir = root.join("docs/data");
    std::fs::create_dir_all(&data_dir).map_err(|source| EvalError::Io {
        path: data_dir.clone(),
        source,
    })?;
    let lm_json = copy_into(&lm.out, &data_dir)?;
    let lm_svg = copy_into(&paired_svg_path(&lm.out), &data_dir)?;
    copy_into(&lm.out.with_extension("svg"), &data_dir)?;
    let section = format!(
        "## Language modelling: SmolLM2-135M on State-of-the-Union blocks\n\n\
         Command: `cargo xtask eval` (backend {backend}; {lm_seconds:.0} s for this part, \
         date {date}). {}\n\n{}\n![paired differences from vanilla](data/{lm_svg})\n",
        lm_description(&lm, &report, &lm_json),
        report.markdown_table() + &report.paired_markdown(),
        backend = env.backend,
        date = today(),
    );
    let doc = root.join("docs/results.md");
    write_marked_section(&doc, "lm:default", &section, RESULTS_HEADER)?;

    let icl = IclRunSettings::default_suite(out_dir, resume);
    let start = Instant::now();
    let icl_report = run_icl(&icl, env, &mut |e| on_event(SUITE_PARTS[1], e))?;
    let icl_seconds = start.elapsed().as_secs_f64();
    let icl_json = copy_into(&icl.out, &data_dir)?;
    let bars = copy_into(&accuracy_svg_path(&icl.out, "accuracy"), &data_dir)?;
    let section = format!(
        "## In-context classification: SmolLM2-135M on movie-review snippets\n\n\
         Command: `cargo xtask eval` (backend {backend}; {icl_seconds:.0} s for this part, \
         date {date}); the same cells as `{command}`. {}\n\n{}\n![accuracy](data/{bars})\n",
        icl.describe(&icl_json),
        icl_report.markdown(),
        backend = env.backend,
        command = icl.command_line(),
        date = today(),
    );
    write_marked_section(&doc, "icl:default", &section, RESULTS_HEADER)?;
    Ok(SuiteOutcome {
        doc,
        seconds: suite_start.elapsed().as_secs_f64(),
    })
}
