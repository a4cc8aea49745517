//! The benchmark run: validated settings, then the measurements in order (each in a child process
//! the caller starts), each report section handed to the caller as soon as its measurements are
//! done.

use std::path::Path;

use tint_lab::event::{Reporter, RunEvent};
use tint_sim::llama::param_count::LlamaSizes;

use super::checkpoint::{checkpoint_dir, write_checkpoint};
use super::config::{scaling_points, BenchConfig, ChildShape, SMOLLM2_SEQ_LENGTH};
use super::error::BenchError;
use super::machine::ReportContext;
use super::measure::{min, ChildRequest, Measurement};
use super::mode::{mode_flops, SCALING_MODES, SMOLLM2_MODES, TINY_MODES};
use super::report::{render_report, render_smollm2};
use super::scaling::{render_scaling, SectionChart};

/// What `cargo xtask bench` measures (its flags, without the output file).
#[derive(Debug, Clone, PartialEq)]
pub struct BenchSettings {
    /// The micro config instead of the tiny one.
    pub quick: bool,
    /// Timed runs per measurement (after one warm-up run); at least 1.
    pub repeat: usize,
    /// Batch sizes of the tiny/micro measurements; each at least 1.
    pub batch_sizes: Vec<usize>,
    /// Tiny/micro measurements, each one of [`TINY_MODES`].
    pub modes: Vec<String>,
    /// Also the scaling table.
    pub scaling: bool,
    /// Measurements of the scaling table, each one of [`SCALING_MODES`].
    pub scaling_modes: Vec<String>,
    /// Also the SmolLM2 section.
    pub smollm2: bool,
    /// Only the SmolLM2 section (and the sgemm bound when `modes` names it).
    pub smollm2_only: bool,
    /// Top layers the SmolLM2 measurements update: `1..=30`.
    pub smollm2_layers: usize,
    /// Batch sizes of the SmolLM2 measurements; each at least 1.
    pub smollm2_batch_sizes: Vec<usize>,
    /// SmolLM2 measurements, each one of [`SMOLLM2_MODES`].
    pub smollm2_modes: Vec<String>,
    /// The burn backend the children run on (`flex`, `wgpu`, `cuda`).
    pub backend: String,
    /// Side of the sgemm ([`super::SGEMM_SIZE_CPU`] or [`super::SGEMM_SIZE_GPU`]).
    pub sgemm_size: usize,
}

/// A finished report section: its marker key and its markdown.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportSection {
    /// `bench-<config>`, `bench-<config>-scaling`, `bench-smollm2` (with `-<backend>` on a GPU).
    pub key: String,
    /// The markdown between the markers.
    pub markdown: String,
    /// Its charts (file name, SVG), which the host writes into a folder `bench/` beside the
    /// report: the markdown links them there.
    pub charts: Vec<SectionChart>,
}

/// The caller's side of a benchmark run: it receives the run's progress ([`Reporter`]: a stage,
/// a progress event before each measurement, a note with each measured time) and runs the
/// measurements.
pub trait BenchHost: Reporter {
    /// Runs `request` in a fresh child process on the checkpoint in `model_dir` (for example this
    /// binary with [`ChildRequest::child_args`], parsed by [`Measurement::from_child_stdout`]).
    ///
    /// # Errors
    /// The child could not run or failed.
    fn measure(
        &mut self,
        request: &ChildRequest,
        model_dir: &Path,
    ) -> Result<Measurement, BenchError>;

    /// Stores a finished section (xtask rewrites its marked section of the report file).
    ///
    /// # Errors
    /// The section could not be stored.
    fn section(&mut self, section: &ReportSection) -> Result<(), BenchError>;
}

/// The measurements of a run in order, counted for its progress; each runs on the checkpoint of
/// its request's configuration ([`checkpoint_dir`]).
struct Measurements<'h> {
    host: &'h mut dyn BenchHost,
    done: usize,
    total: usize,
}

impl Measurements<'_> {
    /// Runs `requests` in order through the host, reporting each.
    fn run(&mut self, requests: &[ChildRequest]) -> Result<Vec<Measurement>, BenchError> {
        let mut measured = Vec::with_capacity(requests.len());
        for request in requests {
            let what = request.describe();
            self.host.event(RunEvent::Progress {
                done: self.done,
                total: self.total,
                message: what.clone(),
            });
            let measurement = self
                .host
                .measure(request, &checkpoint_dir(&request.config))?;
            self.done += 1;
            self.host.event(RunEvent::Note(format!(
                "{what}: min {:.4} s (cpu {:.2} s), peak RSS {:.0} MB",
                measurement.min_seconds(),
                min(&measurement.cpu_seconds),
                measurement.peak_rss_kb as f64 / 1024.0
            )));
            measured.push(measurement);
        }
        if self.done == self.total {
            self.host.event(RunEvent::Progress {
                done: self.done,
                total: self.total,
                message: "measured".into(),
            });
        }
        Ok(measured)
    }
}

fn check_modes(
    name: &'static str,
    modes: &[String],
    known: &[&str],
    rule: &'static str,
) -> Result<(), BenchError> {
    match modes.iter().find(|m| !known.contains(&m.as_str())) {
        Some(mode) => Err(BenchError::InvalidSetting {
            name,
            value: mode.clone(),
            rule,
        }),
        None => Ok(()),
    }
}

impl BenchSettings {
    /// The GPT-2 configuration measured.
    pub fn config(&self) -> BenchConfig {
        BenchConfig::for_quick(self.quick)
    }

    /// Whether the SmolLM2 section is measured.
    pub fn measures_smollm2(&self) -> bool {
        self.smollm2 || self.smollm2_only
    }

    /// Checks every setting before any measurement runs.
    ///
    /// # Errors
    /// [`BenchError::InvalidSetting`] naming the flag, the value and the rule.
    pub fn validate(&self) -> Result<(), BenchError> {
        let invalid =
            |name, value: String, rule| Err(BenchError::InvalidSetting { name, value, rule });
        if self.repeat == 0 {
            return invalid("--repeat", "0".into(), "at least 1");
        }
        for (name, sizes) in [
            ("--batch-sizes", &self.batch_sizes),
            ("--smollm2-batch-sizes", &self.smollm2_batch_sizes),
        ] {
            if sizes.contains(&0) {
                return invalid(name, "0".into(), "every batch size is at least 1");
            }
        }
        check_modes(
            "--modes",
            &self.modes,
            &TINY_MODES,
            "one of structured, constructed, ref, dyn, aux, sgemm",
        )?;
        check_modes(
            "--scaling-modes",
            &self.scaling_modes,
            &SCALING_MODES,
            "one of structured, constructed, ref",
        )?;
        if self.measures_smollm2() {
            check_modes(
                "--smollm2-modes",
                &self.smollm2_modes,
                &SMOLLM2_MODES,
                "one of sim, ref, dyn, aux",
            )?;
            let layers = LlamaSizes::smollm2_135m().n_layers;
            if self.smollm2_layers == 0 || self.smollm2_layers > layers {
                return invalid(
                    "--smollm2-layers",
                    self.smollm2_layers.to_string(),
                    "between 1 and SmolLM2-135M's 30 layers",
                );
            }
        }
        Ok(())
    }

    /// The measurements of a run, in order: the configuration's (tiny or micro; only the sgemm
    /// with `smollm2_only`), the scaling table's (when asked), SmolLM2's (when asked).
    fn requests(&self) -> (Vec<ChildRequest>, Vec<ChildRequest>, Vec<ChildRequest>) {
        let config = self.config();
        let full = ChildShape {
            seq_length: config.seq_length,
            sim_layers: None,
        };
        let mut tiny = Vec::new();
        for mode in &self.modes {
            let batches: Vec<usize> = if mode == "sgemm" {
                vec![1]
            } else if self.smollm2_only {
                continue;
            } else {
                self.batch_sizes.clone()
            };
            for batch_size in batches {
                tiny.push(self.request(mode, batch_size, full));
            }
        }
        let mut scaling = Vec::new();
        if self.scaling && !self.smollm2_only {
            for point in scaling_points(&config) {
                for mode in &self.scaling_modes {
                    scaling.push(ChildRequest {
                        config: config.with_positions(point.positions),
                        ..self.request(mode, point.batch_size, point.shape)
                    });
                }
            }
        }
        let mut smollm2 = Vec::new();
        if self.measures_smollm2() {
            let shape = ChildShape {
                seq_length: SMOLLM2_SEQ_LENGTH,
                sim_layers: Some(self.smollm2_layers),
            };
            for mode in &self.smollm2_modes {
                for &batch_size in &self.smollm2_batch_sizes {
                    smollm2.push(self.request(&format!("smollm2-{mode}"), batch_size, shape));
                }
            }
        }
        (tiny, scaling, smollm2)
    }

    fn request(&self, mode: &str, batch_size: usize, shape: ChildShape) -> ChildRequest {
        ChildRequest {
            config: self.config(),
            mode: mode.to_string(),
            batch_size,
            shape,
            repeat: self.repeat,
            smollm2_layers: self.smollm2_layers,
            sgemm_size: self.sgemm_size,
            query_gpu_memory: self.backend != "flex",
        }
    }
}

/// Runs the benchmark: validates `settings`, writes the seeded checkpoint
/// ([`write_checkpoint`]), runs every measurement through `host`, and hands `host` each section
/// (the configuration's, then the scaling table's, then SmolLM2's) as soon as it is complete.
///
/// # Errors
/// An invalid setting (before anything runs), the checkpoint cannot be written, or the host fails.
pub fn run_bench(settings: &BenchSettings, host: &mut dyn BenchHost) -> Result<(), BenchError> {
    settings.validate()?;
    let config = settings.config();
    let (tiny, scaling, smollm2) = settings.requests();
    // Every checkpoint a request runs on (the config's, and the scaling table's long one).
    let mut configs = vec![config];
    for request in tiny.iter().chain(&scaling) {
        if !configs.contains(&request.config) {
            configs.push(request.config);
        }
    }
    for checkpoint in &configs {
        write_checkpoint(checkpoint, &checkpoint_dir(checkpoint))?;
    }
    let stage = if settings.smollm2_only {
        "smollm2"
    } else {
        config.name
    };
    host.event(RunEvent::Stage(format!("bench {stage}")));
    let context = || ReportContext::probe(&settings.backend, settings.sgemm_size);
    let mut run = Measurements {
        total: tiny.len() + scaling.len() + smollm2.len(),
        host,
        done: 0,
    };
    let measurements = run.run(&tiny)?;
    let sgemm_gflops = measurements
        .iter()
        .find(|m| m.mode == "sgemm")
        .map(|m| mode_flops(&config, "sgemm", 1, settings.sgemm_size) / min(&m.seconds) / 1e9);
    if !settings.smollm2_only {
        let ctx = context();
        run.host.section(&ReportSection {
            key: ctx.section_key(config.name),
            markdown: render_report(&config, &measurements, settings.repeat, &ctx),
            charts: Vec::new(),
        })?;
        if settings.scaling {
            let rows = run.run(&scaling)?;
            let ctx = context();
            let (markdown, charts) =
                render_scaling(&config, &rows, settings.repeat, &ctx, sgemm_gflops);
            run.host.section(&ReportSection {
                key: format!("{}-scaling", ctx.section_key(config.name)),
                markdown,
                charts,
            })?;
        }
    }
    if settings.measures_smollm2() {
        let smollm2 = run.run(&smollm2)?;
        let ctx = context();
        run.host.section(&ReportSection {
            key: ctx.section_key("smollm2"),
            markdown: render_smollm2(
                &smollm2,
                settings.smollm2_layers,
                settings.repeat,
                sgemm_gflops,
                &ctx,
            ),
            charts: Vec::new(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> BenchSettings {
        BenchSettings {
            quick: true,
            repeat: 2,
            batch_sizes: vec![1, 2],
            modes: vec!["ref".into(), "sgemm".into()],
            scaling: true,
            scaling_modes: vec!["structured".into()],
            smollm2: true,
            smollm2_only: false,
            smollm2_layers: 2,
            smollm2_batch_sizes: vec![1],
            smollm2_modes: vec!["sim".into()],
            backend: "flex".into(),
            sgemm_size: 1024,
        }
    }

    /// Answers every request with a fixed time and records requests, sections and events.
    #[derive(Default)]
    struct Recorder {
        requests: Vec<String>,
        sections: Vec<String>,
        events: Vec<RunEvent>,
    }

    impl Reporter for Recorder {
        fn event(&mut self, event: RunEvent) {
            self.events.push(event);
        }
    }

    impl BenchHost for Recorder {
        fn measure(
            &mut self,
            request: &ChildRequest,
            _model_dir: &Path,
        ) -> Result<Measurement, BenchError> {
            self.requests.push(request.describe());
            Ok(Measurement {
                mode: request.mode.clone(),
                batch_size: request.batch_size,
                seq_length: request.shape.seq_length,
                sim_layers: request.shape.sim_layers,
                positions: request.config.seq_length,
                seconds: vec![0.5],
                cpu_seconds: vec![0.5],
                peak_rss_kb: 1024,
                gpu_memory_mb: None,
            })
        }

        fn section(&mut self, section: &ReportSection) -> Result<(), BenchError> {
            self.sections.push(section.key.clone());
            Ok(())
        }
    }

    #[test]
    fn settings_are_refused_with_the_flag_and_the_rule() {
        assert!(settings().validate().is_ok());
        let mut bad = settings();
        bad.modes.push("fast".into());
        let error = bad.validate().unwrap_err().to_string();
        assert!(error.contains("--modes = fast"), "{error}");
        let mut bad = settings();
        bad.smollm2_layers = 31;
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--smollm2-layers = 31"));
        let mut bad = settings();
        bad.batch_sizes = vec![0];
        assert!(bad.validate().is_err());
        let mut bad = settings();
        bad.repeat = 0;
        assert!(bad.validate().is_err());
        // SmolLM2 settings are only checked when SmolLM2 is measured.
        let mut off = settings();
        off.smollm2 = false;
        off.smollm2_modes = vec!["nope".into()];
        assert!(off.validate().is_ok());
    }

    #[test]
    fn the_run_measures_in_order_and_hands_over_every_section() {
        let mut host = Recorder::default();
        run_bench(&settings(), &mut host).unwrap();
        assert_eq!(
            host.sections,
            ["bench-micro", "bench-micro-scaling", "bench-smollm2"]
        );
        // ref at B = 1, 2; sgemm once; 11 scaling points of the micro config (B = 1..16, one
        // layer, and T = 32..512 on the 512-position checkpoint); SmolLM2 sim at B = 1.
        assert_eq!(host.requests.len(), 2 + 1 + 11 + 1, "{:?}", host.requests);
        assert_eq!(host.requests[0], "bench micro: ref B=1 T=64 layers=all");
        assert_eq!(
            host.requests[13],
            "bench micro: structured B=1 T=512 layers=all Tmax=512"
        );
        assert_eq!(host.requests[14], "bench smollm2: sim B=1");
        // Both checkpoints were written.
        for positions in [64, 512] {
            let config = BenchConfig::MICRO.with_positions(positions);
            assert!(checkpoint_dir(&config).join("model.safetensors").exists());
        }
        // Progress counts the 15 measurements of the whole run, with the measured time after each.
        assert_eq!(host.events[0], RunEvent::Stage("bench micro".into()));
        assert_eq!(
            host.events[1],
            RunEvent::Progress {
                done: 0,
                total: 15,
                message: "bench micro: ref B=1 T=64 layers=all".into()
            }
        );
        assert_eq!(
            host.events[2],
            RunEvent::Note(
                "bench micro: ref B=1 T=64 layers=all: min 0.5000 s (cpu 0.50 s), peak RSS 1 MB"
                    .into()
            )
        );
        assert_eq!(
            host.events.last(),
            Some(&RunEvent::Progress {
                done: 15,
                total: 15,
                message: "measured".into()
            })
        );
        // --smollm2-only keeps only the sgemm bound of the tiny/micro measurements.
        let mut only = settings();
        only.smollm2_only = true;
        let mut host = Recorder::default();
        run_bench(&only, &mut host).unwrap();
        assert_eq!(host.sections, ["bench-smollm2"]);
        assert_eq!(host.requests.len(), 2);
    }
}
