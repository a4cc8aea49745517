//! The default suite (`cargo xtask eval`) in one of two protocols ([`SuiteProtocol`]):
//!
//! * **reduced** (CPU builds; designed for ≤ 20 minutes on an idle 2-core CPU): SmolLM2-135M on
//!   SOTU blocks, vanilla vs dynamic evaluation vs TinT (constructed, structured, reference; top
//!   layers) with step sizes tuned on held-out addresses and paired differences; then in-context
//!   classification on the offline movie-review snippets. Rewrites the `lm:default` and
//!   `icl:default` sections of `docs/results.md`.
//! * **full** (GPU builds): the papers' protocols on the same model: Table 2 (four train fractions,
//!   [`crate::lm_settings::FULL_PROTOCOL_BLOCKS`] blocks) and Table 1 (every offline task, 0 and 32
//!   shots, both formats and losses, TinT constructed and structured). Rewrites the `lm:full` and
//!   `icl:full` sections, so a GPU run never overwrites the CPU's.
//!
//! Both copy the JSON and SVG charts to `docs/data/`.

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

/// Which protocol the suite runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SuiteProtocol {
    /// The reduced protocol sized for a 2-core CPU ([`LmRunSettings::default_suite`],
    /// [`IclRunSettings::default_suite`]).
    Reduced,
    /// The papers' protocols ([`LmRunSettings::full_protocol`], [`IclRunSettings::full_protocol`]).
    Full,
}

impl SuiteProtocol {
    /// The protocol a build runs when none is named: the full one on a GPU backend, the reduced one
    /// on the CPU backend `flex` (the reduced one also for a backend name not known here).
    pub fn for_backend(backend: &str) -> Self {
        match backend {
            "cuda" | "wgpu" => SuiteProtocol::Full,
            _ => SuiteProtocol::Reduced,
        }
    }

    /// The protocol's name (`reduced`, `full`).
    pub fn name(self) -> &'static str {
        match self {
            SuiteProtocol::Reduced => "reduced",
            SuiteProtocol::Full => "full",
        }
    }

    /// The run settings of the two parts, with their reports under `out_dir`.
    pub fn settings(self, out_dir: &Path, resume: bool) -> (LmRunSettings, IclRunSettings) {
        match self {
            SuiteProtocol::Reduced => (
                LmRunSettings::default_suite(out_dir, resume),
                IclRunSettings::default_suite(out_dir, resume),
            ),
            SuiteProtocol::Full => (
                LmRunSettings::full_protocol(out_dir, resume),
                IclRunSettings::full_protocol(out_dir, resume),
            ),
        }
    }

    /// The markers of the `docs/results.md` sections the protocol rewrites (LM, ICL).
    pub fn section_markers(self) -> (&'static str, &'static str) {
        match self {
            SuiteProtocol::Reduced => ("lm:default", "icl:default"),
            SuiteProtocol::Full => ("lm:full", "icl:full"),
        }
    }

    /// The headings of those sections (LM, ICL).
    fn headings(self) -> (&'static str, &'static str) {
        match self {
            SuiteProtocol::Reduced => (
                "Language modelling: SmolLM2-135M on State-of-the-Union blocks",
                "In-context classification: SmolLM2-135M on movie-review snippets",
            ),
            SuiteProtocol::Full => (
                "Language modelling, full protocol (paper Table 2): SmolLM2-135M on \
                 State-of-the-Union blocks",
                "In-context classification, full protocol (paper Table 1): SmolLM2-135M on the \
                 offline tasks",
            ),
        }
    }

    /// How the section names the command that made it.
    fn command(self) -> &'static str {
        match self {
            SuiteProtocol::Reduced => "cargo xtask eval",
            SuiteProtocol::Full => "cargo xtask eval --protocol full",
        }
    }
}

/// What the suite wrote.
#[derive(Debug, Clone)]
pub struct SuiteOutcome {
    /// The rewritten results document (`docs/results.md`).
    pub doc: PathBuf,
    /// Seconds for the whole suite.
    pub seconds: f64,
}

/// Runs the default suite in `protocol` with its reports under `out_dir` (`resume`: keep their
/// finished cells), then rewrites the protocol's sections of `root/docs/results.md` and copies the
/// JSON and charts to `root/docs/data/`. `on_event` receives each part's events with the part's
/// name ([`SUITE_PARTS`]).
///
/// # Errors
///
/// The errors of [`run_lm`] and [`run_icl`], and failed copies or writes.
pub fn run_default_suite<AB: AutodiffBackend>(
    protocol: SuiteProtocol,
    out_dir: &Path,
    resume: bool,
    root: &Path,
    env: &RunEnv<'_, AB>,
    on_event: &mut dyn FnMut(&'static str, RunEvent),
) -> Result<SuiteOutcome, EvalError> {
    let suite_start = Instant::now();
    let (lm, icl) = protocol.settings(out_dir, resume);
    let (lm_marker, icl_marker) = protocol.section_markers();
    let (lm_heading, icl_heading) = protocol.headings();
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
        "## {lm_heading}\n\n\
         Command: `{command}` (backend {backend}; {lm_seconds:.0} s for this part, \
         date {date}). {}\n\n{}\n![paired differences from vanilla](data/{lm_svg})\n",
        lm_description(&lm, &report, &lm_json),
        report.markdown_table() + &report.paired_markdown(),
        command = protocol.command(),
        backend = env.backend,
        date = today(),
    );
    let doc = root.join("docs/results.md");
    write_marked_section(&doc, lm_marker, &section, RESULTS_HEADER)?;

    let start = Instant::now();
    let icl_report = run_icl(&icl, env, &mut |e| on_event(SUITE_PARTS[1], e))?;
    let icl_seconds = start.elapsed().as_secs_f64();
    let icl_json = copy_into(&icl.out, &data_dir)?;
    let bars = copy_into(&accuracy_svg_path(&icl.out, "accuracy"), &data_dir)?;
    let section = format!(
        "## {icl_heading}\n\n\
         Command: `{suite_command}` (backend {backend}; {icl_seconds:.0} s for this part, \
         date {date}); the same cells as `{command}`. {}\n\n{}\n![accuracy](data/{bars})\n",
        icl.describe(&icl_json),
        icl_report.markdown(),
        suite_command = protocol.command(),
        backend = env.backend,
        command = icl.command_line(),
        date = today(),
    );
    write_marked_section(&doc, icl_marker, &section, RESULTS_HEADER)?;
    Ok(SuiteOutcome {
        doc,
        seconds: suite_start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::Method;
    use crate::methods::TintMethod;

    #[test]
    fn gpu_builds_run_the_full_protocol_and_cpu_builds_the_reduced_one() {
        assert_eq!(SuiteProtocol::for_backend("cuda"), SuiteProtocol::Full);
        assert_eq!(SuiteProtocol::for_backend("wgpu"), SuiteProtocol::Full);
        assert_eq!(SuiteProtocol::for_backend("flex"), SuiteProtocol::Reduced);
        assert_eq!(SuiteProtocol::for_backend("other"), SuiteProtocol::Reduced);
    }

    #[test]
    fn the_reduced_protocol_is_the_default_suite() {
        let out = Path::new("r");
        let (lm, icl) = SuiteProtocol::Reduced.settings(out, true);
        let lm_default = LmRunSettings::default_suite(out, true);
        assert_eq!(
            serde_json::to_value(&lm).unwrap(),
            serde_json::to_value(&lm_default).unwrap()
        );
        assert_eq!(icl, IclRunSettings::default_suite(out, true));
        assert_eq!(
            SuiteProtocol::Reduced.section_markers(),
            ("lm:default", "icl:default")
        );
    }

    /// The full protocol holds every cell of the papers' Table 2 and Table 1 that issue 16 lists,
    /// writes its own files and sections (a GPU run never overwrites the CPU's), and keeps the
    /// tuning splits of the reduced suite.
    #[test]
    fn the_full_protocol_covers_the_papers_grids() {
        let out = Path::new("r");
        let (lm, icl) = SuiteProtocol::Full.settings(out, false);
        let (lm_reduced, icl_reduced) = SuiteProtocol::Reduced.settings(out, false);

        assert_eq!(lm.train_fraction, vec![0.3, 0.5, 0.7, 0.9]);
        assert!(lm.max_blocks > 100, "{}", lm.max_blocks);
        assert_eq!(lm.methods, Method::ALL.to_vec());
        assert!(lm.inner_lr.is_none() && lm.lr.is_none(), "steps are tuned");
        assert_eq!(lm.grid("eta").unwrap(), vec![1e-5, 3e-5, 1e-4, 3e-4, 1e-3]);
        assert_eq!(lm.tune_every, lm_reduced.tune_every);
        assert_eq!(lm.tune_fraction, lm_reduced.tune_fraction);
        assert_eq!(lm.tint.sim_layers, lm_reduced.tint.sim_layers);

        assert_eq!(
            icl.task,
            [
                "mr-snippets",
                "cr-snippets",
                "bbc-topics",
                "amazon-fine-food"
            ]
        );
        assert_eq!(icl.shots, vec![0, 32]);
        assert_eq!(icl.seeds, vec![0, 1, 2]);
        assert_eq!(icl.formats, ["single", "multi"]);
        assert_eq!(icl.losses, ["label", "full-context"]);
        assert_eq!(icl.calibration, "prompt");
        assert_eq!(
            icl.methods,
            [
                Method::Vanilla,
                Method::DynEval,
                Method::Tint(TintMethod::Constructed),
                Method::Tint(TintMethod::Structured),
            ]
        );
        assert!(
            icl.lr.is_none() && icl.inner_lr.is_none(),
            "steps are tuned"
        );
        assert_eq!(icl.grid("lr").len(), 4);
        assert_eq!(icl.grid("eta").len(), 4);
        assert_eq!(icl.tint.sim_layers, "2");
        assert!(icl.n_test > icl_reduced.n_test && icl.n_dev > icl_reduced.n_dev);

        assert_eq!(
            SuiteProtocol::Full.section_markers(),
            ("lm:full", "icl:full")
        );
        assert_ne!(lm.out, lm_reduced.out);
        assert_ne!(icl.out, icl_reduced.out);
        assert!(icl.command_line().contains("--formats single,multi"));
    }
}
