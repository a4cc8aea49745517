//! The default suite (`cargo xtask eval`) in one of two protocols ([`SuiteProtocol`]):
//!
//! * **reduced** (CPU builds; designed for ≤ 20 minutes on an idle 2-core CPU): paper Table 2 at
//!   the paper's budget at one train fraction: SmolLM2-135M-Instruct (Q4_1 GGUF dequantised to
//!   float32) on SOTU blocks at 50 %, every layer updated for one step, `vanilla` vs dynamic
//!   evaluation vs TinT's functional reference with step sizes tuned (and bracketed) on held-out
//!   documents and paired differences; then the constructed network beside the reference on a few
//!   of those settings' blocks at the reference's tuned step; then in-context classification on
//!   the offline movie-review snippets. Writes the `lm:default`, `lm:default-constructed` and
//!   `icl:default` sections.
//! * **full** (GPU builds): the papers' protocols on the same model: Table 2 (four train fractions,
//!   [`crate::lm_settings::FULL_PROTOCOL_BLOCKS`] blocks, the matched dynamic evaluation too, steps
//!   tuned per fraction) with the constructed network on
//!   [`crate::lm_settings::FULL_PROTOCOL_CONSTRUCTED_BLOCKS`] blocks, and Table 1 (every offline
//!   task, 0 and 32 shots, both formats and losses, TinT constructed and structured). Rewrites the
//!   `lm:full`, `lm:full-constructed` and `icl:full` sections, so a GPU run never overwrites the
//!   CPU's.
//!
//! Both write their sections into `OUT/README.md` beside their JSON and SVG charts
//! ([`SuiteDocs::in_out`]); with `--update-docs` into `experiments/default-suite/README.md`
//! ([`SUITE_DOC`]), the JSON and charts copied to `docs/data/` ([`SuiteDocs::repository`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::backend::AutodiffBackend;

use crate::icl::run::{accuracy_svg_path, run_icl};
use crate::icl::run_settings::IclRunSettings;
use crate::lm_run::{lm_description, paired_svg_path, run_lm};
use crate::lm_settings::{
    LmRunSettings, DEFAULT_SUITE_CONSTRUCTED_BLOCKS, FULL_PROTOCOL_CONSTRUCTED_BLOCKS,
};
use crate::results_doc::{copy_into, today, write_marked_section, RESULTS_HEADER};
use crate::run_env::RunEnv;
use crate::EvalError;
use tint_lab::event::{OnEvent, RunEvent};

/// The experiment folder's README the suite rewrites its sections in with `--update-docs`
/// (relative to the root); its sections link the charts in `docs/data/` from there. docs/results.md
/// keeps only the headline tables.
pub const SUITE_DOC: &str = "experiments/default-suite/README.md";

/// Where the suite writes its report sections and the files they link.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteDocs {
    /// The markdown file whose marked sections the suite rewrites.
    pub doc: PathBuf,
    /// The directory the reports' JSON and charts are copied into.
    pub data_dir: PathBuf,
    /// That directory as the sections link it (relative to `doc`'s directory).
    pub data_link: String,
}

impl SuiteDocs {
    /// The run's own report (the default): `out/README.md`, its JSON and charts beside it; nothing
    /// outside `out` is written.
    pub fn in_out(out: &Path) -> Self {
        Self {
            doc: out.join("README.md"),
            data_dir: out.to_path_buf(),
            data_link: ".".into(),
        }
    }

    /// The repository's pages (`cargo xtask eval --update-docs`): the sections of `root/`[`SUITE_DOC`],
    /// the JSON and charts copied to `root/docs/data/`.
    pub fn repository(root: &Path) -> Self {
        Self {
            doc: root.join(SUITE_DOC),
            data_dir: root.join("docs/data"),
            data_link: "../../docs/data".into(),
        }
    }
}

/// The parts of the suite, in order, by the name their progress is shown under.
pub const SUITE_PARTS: [&str; 3] = [
    "suite 1/3: lm, all layers x 1 step",
    "suite 2/3: lm, the constructed tint beside tint-ref",
    "suite 3/3: icl",
];

/// Which protocol the suite runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SuiteProtocol {
    // Plain text: these lines are the `--protocol` help (`LmRunSettings::default_suite`,
    // `IclRunSettings::default_suite`, `LmRunSettings::full_protocol`,
    // `IclRunSettings::full_protocol` build them).
    /// The reduced protocol sized for a 2-core CPU: paper Table 2 at the paper's budget at 50 %
    /// on 32 blocks, then the movie-review classification.
    Reduced,
    /// The papers' protocols: Table 2 at four train fractions on 128 blocks, Table 1 on the four
    /// offline tasks.
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

    /// The constructed-network run beside `first` (this protocol's LM run) at the step `eta` its
    /// `tint-ref` was tuned to, with the marker of its section.
    pub fn constructed_lm(self, first: &LmRunSettings, eta: f64) -> (LmRunSettings, &'static str) {
        match self {
            SuiteProtocol::Reduced => (
                LmRunSettings::constructed_beside(first, DEFAULT_SUITE_CONSTRUCTED_BLOCKS, eta),
                "lm:default-constructed",
            ),
            SuiteProtocol::Full => (
                LmRunSettings::constructed_beside(first, FULL_PROTOCOL_CONSTRUCTED_BLOCKS, eta),
                "lm:full-constructed",
            ),
        }
    }

    /// The markers of the [`SUITE_DOC`] sections the protocol rewrites (LM, ICL).
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
                "Language modelling at the paper's budget (all 30 layers × 1 step), 50 %: \
                 SmolLM2-135M-Instruct (Q4_1 GGUF dequantised to float32) on State-of-the-Union \
                 blocks",
                "In-context classification (4 shots; `icl` and `dyn-eval`, one step on every \
                 parameter): SmolLM2-135M-Instruct (Q4_1 GGUF dequantised to float32) on movie-review \
                 snippets",
            ),
            SuiteProtocol::Full => (
                "Language modelling, full protocol (paper Table 2, all 30 layers × 1 step): \
                 SmolLM2-135M-Instruct (Q4_1 GGUF dequantised to float32) on State-of-the-Union \
                 blocks",
                "In-context classification, full protocol (paper Table 1): \
                 SmolLM2-135M-Instruct (Q4_1 GGUF dequantised to float32) on the offline tasks",
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

/// Heading of the constructed-network section.
const CONSTRUCTED_HEADING: &str = "The constructed TinT network at full depth beside its \
     reference (all 30 layers × 1 step; SmolLM2-135M-Instruct, Q4_1 GGUF dequantised to float32)";

/// What the constructed-network section says before the generic description.
const CONSTRUCTED_PREFACE: &str = "Why: the section above evaluates TinT by its functional \
     reference `tint-ref` (plain tensor maths of the same simulated step); this part runs the \
     constructed network itself (`tint`: every module from its own stored weights, docs/\
     construction.md §15) on a few blocks at the step tuned for `tint-ref` above, one block at a \
     time, so its per-block difference from the reference (float32: within the tolerance of \
     docs/tint-llama.md, \"Float32 numerics\") and its wall time are measured on real data at \
     full depth. ";

/// Runs an LM part of the suite and rewrites its section.
struct LmPart<'a, 'e, AB: AutodiffBackend> {
    protocol: SuiteProtocol,
    docs: &'a SuiteDocs,
    env: &'a RunEnv<'e, AB>,
}

impl<AB: AutodiffBackend> LmPart<'_, '_, AB> {
    /// Runs `lm`, copies its JSON and charts to the data directory and rewrites the section
    /// `marker`; returns the report and the section.
    fn run(
        &self,
        lm: &LmRunSettings,
        heading: &str,
        preface: &str,
        marker: &str,
        on_event: OnEvent<'_>,
    ) -> Result<(crate::LmReport, String), EvalError> {
        let start = Instant::now();
        let report = run_lm(lm, self.env, on_event)?.report;
        let seconds = start.elapsed().as_secs_f64();
        let (data_dir, link) = (&self.docs.data_dir, &self.docs.data_link);
        let json = copy_into(&lm.out, data_dir)?;
        let ppl_svg = copy_into(&lm.out.with_extension("svg"), data_dir)?;
        // A run without `vanilla` (the constructed part) has no chart of differences from it.
        let chart = if report.paired.iter().any(|p| p.diff.baseline == "vanilla") {
            let svg = copy_into(&paired_svg_path(&lm.out), data_dir)?;
            format!("![paired differences from vanilla]({link}/{svg})")
        } else {
            format!("![perplexity]({link}/{ppl_svg})")
        };
        let section = format!(
            "## {heading}\n\n\
             Command: `{command}` (backend {backend}; {seconds:.0} s for this part, \
             date {date}). {preface}{}\n\n{}\n{chart}\n",
            lm_description(lm, &report, &json),
            report.markdown_table() + &report.paired_markdown(),
            command = self.protocol.command(),
            backend = self.env.backend,
            date = today(),
        );
        write_marked_section(&self.docs.doc, marker, &section, RESULTS_HEADER)?;
        Ok((report, section))
    }
}

/// What the suite wrote.
#[derive(Debug, Clone)]
pub struct SuiteOutcome {
    /// The rewritten results document ([`SuiteDocs::doc`]).
    pub doc: PathBuf,
    /// The sections written, in order (language modelling, the constructed network, in-context
    /// classification): the tables a caller prints at the end.
    pub sections: Vec<String>,
    /// Seconds for the whole suite.
    pub seconds: f64,
}

/// Runs the default suite in `protocol` with its reports under `out_dir` (`resume`: keep their
/// finished cells), then rewrites the protocol's sections of `docs.doc` and copies the JSON and
/// charts to `docs.data_dir` ([`SuiteDocs::in_out`] by default, [`SuiteDocs::repository`] to
/// update the repository's pages). `on_event` receives each part's events, after a
/// [`RunEvent::Stage`] with the part's name ([`SUITE_PARTS`]).
///
/// # Errors
///
/// The errors of [`run_lm`] and [`run_icl`], and failed copies or writes.
pub fn run_default_suite<AB: AutodiffBackend>(
    protocol: SuiteProtocol,
    out_dir: &Path,
    resume: bool,
    docs: &SuiteDocs,
    env: &RunEnv<'_, AB>,
    on_event: OnEvent<'_>,
) -> Result<SuiteOutcome, EvalError> {
    let suite_start = Instant::now();
    let (lm, icl) = protocol.settings(out_dir, resume);
    let (lm_marker, icl_marker) = protocol.section_markers();
    let (lm_heading, icl_heading) = protocol.headings();
    let data_dir = &docs.data_dir;
    std::fs::create_dir_all(data_dir).map_err(|source| EvalError::Io {
        operation: "create the directory",
        path: data_dir.to_path_buf(),
        source,
    })?;
    let lm_part = LmPart {
        protocol,
        docs,
        env,
    };
    on_event(RunEvent::Stage(SUITE_PARTS[0].into()));
    let (report, lm_section) = lm_part.run(&lm, lm_heading, "", lm_marker, on_event)?;
    let eta = report
        .tuning
        .iter()
        .find(|t| t.method == "tint-ref")
        .map(|t| t.choice)
        .ok_or_else(|| EvalError::InvalidSetting {
            name: "--methods",
            value: "the suite's LM run".into(),
            rule: "the suite's LM run must tune tint-ref (the constructed part takes its step)"
                .into(),
        })?;
    let (constructed, marker) = protocol.constructed_lm(&lm, eta);
    on_event(RunEvent::Stage(SUITE_PARTS[1].into()));
    let (_, constructed_section) = lm_part.run(
        &constructed,
        CONSTRUCTED_HEADING,
        CONSTRUCTED_PREFACE,
        marker,
        on_event,
    )?;

    let start = Instant::now();
    on_event(RunEvent::Stage(SUITE_PARTS[2].into()));
    let icl_report = run_icl(&icl, env, on_event)?;
    let icl_seconds = start.elapsed().as_secs_f64();
    let icl_json = copy_into(&icl.out, data_dir)?;
    let bars = copy_into(&accuracy_svg_path(&icl.out, "accuracy"), data_dir)?;
    let section = format!(
        "## {icl_heading}\n\n\
         Command: `{suite_command}` (backend {backend}; {icl_seconds:.0} s for this part, \
         date {date}); the same cells as `{command}`. {}\n\n{}\n\
         ![accuracy]({link}/{bars})\n",
        icl.describe(&icl_json),
        icl_report.markdown(),
        suite_command = protocol.command(),
        backend = env.backend,
        command = icl.command_line(),
        date = today(),
        link = docs.data_link,
    );
    write_marked_section(&docs.doc, icl_marker, &section, RESULTS_HEADER)?;
    Ok(SuiteOutcome {
        doc: docs.doc.clone(),
        sections: vec![lm_section, constructed_section, section],
        seconds: suite_start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::Method;
    use tint_sim::Engine;

    /// `path` with its `.` and `..` components resolved by name (no file system).
    fn lexical(path: &Path) -> PathBuf {
        let mut out = PathBuf::new();
        for part in path.components() {
            match part {
                std::path::Component::CurDir => {}
                std::path::Component::ParentDir => {
                    out.pop();
                }
                other => out.push(other),
            }
        }
        out
    }

    /// The sections' chart links resolve, from the document's folder, to where the charts are
    /// copied; by default nothing is written outside `--out`.
    #[test]
    fn suite_sections_link_the_folder_their_charts_are_copied_to() {
        let root = Path::new("/repo");
        let out = Path::new("/runs/r1");
        for docs in [SuiteDocs::in_out(out), SuiteDocs::repository(root)] {
            let folder = docs.doc.parent().unwrap();
            assert_eq!(
                lexical(&folder.join(&docs.data_link)),
                lexical(&docs.data_dir),
                "{docs:?}"
            );
        }
        let default = SuiteDocs::in_out(out);
        assert!(default.doc.starts_with(out) && default.data_dir.starts_with(out));
        let repository = SuiteDocs::repository(root);
        assert_eq!(repository.doc, root.join(SUITE_DOC));
        assert_eq!(repository.data_dir, root.join("docs/data"));
    }

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

    /// The reduced protocol: paper Table 2 at the paper's budget at 50 % (every layer, one step,
    /// steps tuned and bracketed on 8 held-out blocks), then the constructed network beside the
    /// reference on a few blocks at the reference's tuned step, with its own files and section.
    #[test]
    fn the_reduced_protocol_runs_the_paper_budget_and_the_constructed_network() {
        let out = Path::new("r");
        let (first, _) = SuiteProtocol::Reduced.settings(out, false);
        assert_eq!(first.tint.sim_layers, "all");
        assert_eq!(first.steps, 1);
        assert_eq!(
            first.methods,
            [
                Method::Vanilla,
                Method::DynEval,
                Method::Tint(Engine::Reference)
            ]
        );
        assert!(first.vanilla_from_ref && first.inner_lr.is_none());
        assert!(first.tune_blocks >= 8);
        assert!(first.tune_extend >= 1, "an edge choice is extended");
        let (constructed, marker) = SuiteProtocol::Reduced.constructed_lm(&first, 1e-4);
        assert_eq!(marker, "lm:default-constructed");
        assert_eq!(
            constructed.methods,
            [
                Method::Tint(Engine::CONSTRUCTED),
                Method::Tint(Engine::Reference)
            ]
        );
        assert_eq!(constructed.inner_lr, Some(vec![1e-4]));
        assert_eq!(constructed.max_blocks, DEFAULT_SUITE_CONSTRUCTED_BLOCKS);
        assert_eq!(constructed.tint.sim_layers, "all");
        assert_eq!(constructed.train_fraction, first.train_fraction);
        assert_eq!(
            constructed.workers,
            Some(1),
            "one block at a time: its wall time"
        );
        assert_eq!(
            constructed.out,
            Path::new("r/lm-smollm2-sotu-constructed.json")
        );
        let (full, _) = SuiteProtocol::Full.settings(out, false);
        let (full_constructed, full_marker) = SuiteProtocol::Full.constructed_lm(&full, 1e-4);
        assert_eq!(full_marker, "lm:full-constructed");
        assert!(full_constructed.max_blocks >= 16);
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
        assert!(lm.max_blocks >= 128, "{}", lm.max_blocks);
        assert_eq!(
            lm.methods,
            [
                Method::Vanilla,
                Method::DynEval,
                Method::DynEvalMatched,
                Method::Tint(Engine::Reference)
            ]
        );
        assert!(lm.inner_lr.is_none() && lm.lr.is_none(), "steps are tuned");
        assert!(lm.tune_per_fraction && lm.tune_blocks >= 8);
        assert_eq!(lm.grid("eta"), lm_reduced.grid("eta"));
        assert_eq!(lm.tune_every, lm_reduced.tune_every);
        assert_eq!(lm.tint.sim_layers, "all");

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
                Method::Tint(Engine::Reference),
            ]
        );
        assert!(
            icl.lr.is_none() && icl.inner_lr.is_none(),
            "steps are tuned"
        );
        assert_eq!(icl.grid("lr").len(), 4);
        assert_eq!(icl.grid("eta").len(), 4);
        assert_eq!(icl.tint.sim_layers, "all");
        assert!(icl.tune_per_seed && icl.balanced_test);
        assert!(icl.n_test >= 100 && icl.n_test > icl_reduced.n_test);
        assert!(icl.n_dev >= icl_reduced.n_dev);

        assert_eq!(
            SuiteProtocol::Full.section_markers(),
            ("lm:full", "icl:full")
        );
        assert_ne!(lm.out, lm_reduced.out);
        assert_ne!(icl.out, icl_reduced.out);
        assert!(icl.command_line().contains("--formats single,multi"));
    }
}
