//! The default suite (`cargo xtask eval`) in one of two protocols ([`SuiteProtocol`]):
//!
//! * **reduced** (CPU builds; designed for ≤ 20 minutes on an idle 2-core CPU): SmolLM2-135M on
//!   SOTU blocks, vanilla vs dynamic evaluation vs TinT (constructed, structured, reference; top
//!   layers) with step sizes tuned on held-out addresses and paired differences; then `tint-ref`
//!   against `vanilla` alone on 128 blocks, the number that resolves their paired difference at
//!   50 %; then in-context classification on the offline movie-review snippets. Rewrites the
//!   `lm:default`, `lm:default-128` and `icl:default` sections of `docs/results.md`.
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

/// The parts of the suite, in order, by the name their progress is shown under (the full protocol
/// has no second part: its LM run already evaluates 128 blocks with every method).
pub const SUITE_PARTS: [&str; 3] = [
    "suite 1/3: lm",
    "suite 2/3: lm, tint-ref vs vanilla on 128 blocks",
    "suite 3/3: icl",
];

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
            "cuda" | "cuda-fused" | "wgpu" => SuiteProtocol::Full,
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

    /// The second LM run ([`LmRunSettings::default_suite_paired`]) of the reduced protocol, with
    /// the marker of its section; none in the full protocol.
    pub fn paired_lm(self, out_dir: &Path, resume: bool) -> Option<(LmRunSettings, &'static str)> {
        match self {
            SuiteProtocol::Reduced => Some((
                LmRunSettings::default_suite_paired(out_dir, resume),
                "lm:default-128",
            )),
            SuiteProtocol::Full => None,
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

/// Heading of the reduced protocol's second LM section.
const PAIRED_HEADING: &str =
    "Language modelling at 50 %: TinT − vanilla on 128 blocks (default suite, part 2)";

/// What the second LM section says before the generic description.
const PAIRED_PREFACE: &str = "Why: the 8 blocks above leave the paired difference TinT − vanilla \
     unresolved; 128 blocks resolved its mean on 2026-11-26 (section `lm:smollm2-64-blocks` \
     below), so the suite evaluates that many with the two methods it needs. `tint-ref` stands \
     for TinT (the constructed and structured executions compute the same update; they agree \
     with it within 1.7e-6 nats per token on the 8 blocks above), and `vanilla` is read from \
     `tint-ref`'s first pass on each block (the unadapted model, `--vanilla-from-ref`), so both \
     rows come from one code and each block costs one step. Same split rule, tuning documents \
     and grid as the section above; `tint-ref`'s step tuned again on them. ";

/// Runs an LM part of the suite and rewrites its section.
struct LmPart<'a, 'e, AB: AutodiffBackend> {
    protocol: SuiteProtocol,
    data_dir: &'a Path,
    doc: &'a Path,
    env: &'a RunEnv<'e, AB>,
}

impl<AB: AutodiffBackend> LmPart<'_, '_, AB> {
    /// Runs `lm`, copies its JSON and charts to `docs/data/` and rewrites the section `marker`.
    fn run(
        &self,
        lm: &LmRunSettings,
        heading: &str,
        preface: &str,
        marker: &str,
        on_event: &mut dyn FnMut(RunEvent),
    ) -> Result<(), EvalError> {
        let start = Instant::now();
        let report = run_lm(lm, self.env, on_event)?.report;
        let seconds = start.elapsed().as_secs_f64();
        let json = copy_into(&lm.out, self.data_dir)?;
        let svg = copy_into(&paired_svg_path(&lm.out), self.data_dir)?;
        copy_into(&lm.out.with_extension("svg"), self.data_dir)?;
        let section = format!(
            "## {heading}\n\n\
             Command: `{command}` (backend {backend}; {seconds:.0} s for this part, \
             date {date}). {preface}{}\n\n{}\n![paired differences from vanilla](data/{svg})\n",
            lm_description(lm, &report, &json),
            report.markdown_table() + &report.paired_markdown(),
            command = self.protocol.command(),
            backend = self.env.backend,
            date = today(),
        );
        write_marked_section(self.doc, marker, &section, RESULTS_HEADER)
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
    let doc = root.join("docs/results.md");
    let data_dir = root.join("docs/data");
    std::fs::create_dir_all(&data_dir).map_err(|source| EvalError::Io {
        operation: "create the directory",
        path: data_dir.clone(),
        source,
    })?;
    let lm_part = LmPart {
        protocol,
        data_dir: &data_dir,
        doc: &doc,
        env,
    };
    lm_part.run(&lm, lm_heading, "", lm_marker, &mut |e| {
        on_event(SUITE_PARTS[0], e)
    })?;
    if let Some((paired, marker)) = protocol.paired_lm(out_dir, resume) {
        lm_part.run(&paired, PAIRED_HEADING, PAIRED_PREFACE, marker, &mut |e| {
            on_event(SUITE_PARTS[1], e)
        })?;
    }

    let start = Instant::now();
    let icl_report = run_icl(&icl, env, &mut |e| on_event(SUITE_PARTS[2], e))?;
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

    /// The reduced protocol's second LM run: the two methods of the paired difference on 128
    /// blocks, vanilla from tint-ref's first pass, the first run's split and grid, its own files
    /// and section; the full protocol has none (its LM run evaluates 128 blocks already).
    #[test]
    fn the_reduced_protocol_resolves_tint_minus_vanilla_on_128_blocks() {
        let out = Path::new("r");
        let (first, _) = SuiteProtocol::Reduced.settings(out, false);
        let (paired, marker) = SuiteProtocol::Reduced.paired_lm(out, false).unwrap();
        assert_eq!(marker, "lm:default-128");
        assert_eq!(
            paired.methods,
            [Method::Vanilla, Method::Tint(TintMethod::Reference)]
        );
        assert_eq!(paired.max_blocks, 128);
        assert!(paired.vanilla_from_ref && !first.vanilla_from_ref);
        assert!(paired.inner_lr.is_none(), "tint-ref's step is tuned");
        assert_eq!(paired.grid("eta"), first.grid("eta"));
        assert_eq!(
            (paired.tune_blocks, paired.tune_every, paired.tune_fraction),
            (first.tune_blocks, first.tune_every, first.tune_fraction)
        );
        assert_eq!(paired.train_fraction, first.train_fraction);
        assert_eq!(paired.tint.sim_layers, first.tint.sim_layers);
        assert_ne!(paired.out, first.out);
        assert!(SuiteProtocol::Full.paired_lm(out, false).is_none());
        let (full, _) = SuiteProtocol::Full.settings(out, false);
        assert!(full.max_blocks >= paired.max_blocks);
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
