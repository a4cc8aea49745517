//! The settings of `cargo xtask eval cgt`: the preset with its overrides, the variants and seeds,
//! where runs, charts and corpus live, validated before anything trains.

use std::path::PathBuf;

use tint_cgt::nodes::NodeSetup;
use tint_cgt::presets::{DataPreset, ExperimentPreset, Variant};

use super::conventions::{default_run_dir, EvalStream};
use super::error::CgtRunError;
use tint_lab::first_repeat;

/// What to train and evaluate (the flags of `cargo xtask eval cgt`).
#[derive(Debug, Clone, PartialEq)]
pub struct CgtSettings {
    /// Experiment preset ([`ExperimentPreset::by_name`]).
    pub preset: String,
    /// Training steps per variant (overrides the preset); at least 1.
    pub steps: Option<usize>,
    /// Sequences per training batch (overrides the preset); at least 1.
    pub batch_size: Option<usize>,
    /// Variants by slug (`baseline`, `baseline-wide`, `cgt`, `cgt-aux`, `cgt-aux-reg`); empty: the
    /// preset's ([`Variant::defaults`]).
    pub variants: Vec<String>,
    /// Text corpus of the text presets, files and directories
    /// ([`crate::text_corpus::read_documents`]); empty: the host's default (the SOTU addresses and
    /// Shakespeare's works).
    pub text: Vec<PathBuf>,
    /// Checkpoint every N steps (overrides the preset; does not change the results).
    pub checkpoint_every: Option<usize>,
    /// Directory for the SVG charts.
    pub plots: PathBuf,
    /// The same directory as the report section links it: relative to the report's folder or
    /// absolute.
    pub plots_link: PathBuf,
    /// Directory for checkpoints, logs and exported models (`None`: [`default_run_dir`]).
    pub run_dir: Option<PathBuf>,
    /// Seeds, one run per seed and variant; at least one.
    pub seeds: Vec<u64>,
    /// Report only the runs whose final checkpoint exists, without training the others.
    pub only_finished: bool,
    /// The burn backend (`flex`, `wgpu`, `cuda`), for the reproducing command.
    pub backend: String,
    /// Evaluate the held-out in-context accuracy every N training steps and after the last
    /// (arithmetic presets, one device): the learning curve, kept in each run's `curve.jsonl`. Does
    /// not change the training.
    pub eval_every: Option<usize>,
    /// Devices to train on, data-parallel (`tint_cgt::train_data_parallel`) when more than one;
    /// at least 1, and it must divide the batch size. Does not change the objective except for the
    /// batch-coupled regularisers (docs/cgt.md, "Data-parallel training").
    pub devices: usize,
    /// With several nodes: this process's place among them (`--nodes`, `--node-rank`,
    /// `--orchestrator`, `--node-address`); every node trains its rows of each batch on its
    /// `devices` (`tint_cgt::train_data_parallel_on_nodes`). `None`: one node.
    pub nodes: Option<NodeSetup>,
    /// The held-out sequences the runs are evaluated on: the validation stream of every table, or
    /// the test stream (`--test-stream`) kept for confirming a result once.
    pub eval_stream: EvalStream,
    /// The name of the report section and of the charts (`--section`) instead of the preset's: runs
    /// of one preset at other settings (say `--steps 7000`) then keep their own section and charts
    /// instead of replacing the preset's (`super::report::RunSummary::stem`).
    pub section: Option<String>,
}

impl CgtSettings {
    /// The settings of a plain run of `preset` (seed 0, all variants) on `backend`.
    pub fn new(preset: &str, backend: &str) -> Self {
        Self {
            preset: preset.to_string(),
            steps: None,
            batch_size: None,
            variants: Vec::new(),
            text: Vec::new(),
            checkpoint_every: None,
            plots: PathBuf::from("docs/cgt"),
            // The default report, `experiments/cgt-icl-small/README.md`, links them from there.
            plots_link: PathBuf::from("../../docs/cgt"),
            run_dir: None,
            seeds: vec![0],
            only_finished: false,
            backend: backend.to_string(),
            eval_every: None,
            devices: 1,
            nodes: None,
            eval_stream: EvalStream::Validation,
            section: None,
        }
    }

    /// The preset with the overrides applied: `steps` rescales the warm-up (at most a tenth of the
    /// steps) and a pair curriculum's ramp (keeps its share of the schedule).
    ///
    /// # Errors
    /// An unknown preset, or a zero step count or batch size.
    pub fn configured_preset(&self) -> Result<ExperimentPreset, CgtRunError> {
        let mut preset =
            ExperimentPreset::by_name(&self.preset).map_err(CgtRunError::cgt("--preset"))?;
        if let Some(steps) = self.steps {
            if steps == 0 {
                return Err(CgtRunError::InvalidSetting {
                    name: "--steps",
                    value: "0".into(),
                    rule: "at least 1",
                });
            }
            let scale = |part: usize| part * steps / preset.training.steps;
            if let DataPreset::LinearRegression(data) = &mut preset.data {
                if let Some(curriculum) = &mut data.curriculum {
                    curriculum.ramp_steps = scale(curriculum.ramp_steps);
                }
            }
            preset.training.warmup_steps = preset.training.warmup_steps.min(steps / 10);
            preset.training.steps = steps;
        }
        if let Some(batch_size) = self.batch_size {
            if batch_size == 0 {
                return Err(CgtRunError::InvalidSetting {
                    name: "--batch-size",
                    value: "0".into(),
                    rule: "at least 1",
                });
            }
            preset.data.set_batch_size(batch_size);
        }
        if let Some(every) = self.checkpoint_every {
            preset.training.checkpoint_every = every;
        }
        Ok(preset)
    }

    /// The variants to run, in the given order (the preset's [`Variant::defaults`] when none is
    /// named).
    ///
    /// # Errors
    /// A name that is not a variant's slug, or an unknown preset.
    pub fn variants(&self) -> Result<Vec<Variant>, CgtRunError> {
        if self.variants.is_empty() {
            let preset =
                ExperimentPreset::by_name(&self.preset).map_err(CgtRunError::cgt("--preset"))?;
            return Ok(Variant::defaults(&preset.data).to_vec());
        }
        self.variants
            .iter()
            .map(|name| {
                Variant::ALL
                    .into_iter()
                    .find(|v| v.slug() == name)
                    .ok_or_else(|| CgtRunError::InvalidSetting {
                        name: "--variants",
                        value: name.clone(),
                        rule: "one of baseline, baseline-wide, cgt, cgt-aux, cgt-aux-reg",
                    })
            })
            .collect()
    }

    /// Checks the seeds, that no seed or variant repeats, and the other settings (the preset and
    /// the variants' names are checked by their accessors).
    ///
    /// # Errors
    /// No seed.
    pub fn validate(&self) -> Result<(), CgtRunError> {
        if self.seeds.is_empty() {
            return Err(CgtRunError::InvalidSetting {
                name: "--seeds",
                value: String::new(),
                rule: "at least one seed",
            });
        }
        // A repeated seed or variant would run twice and its interval would count one run as
        // two (issue 66).
        if let Some(seed) = first_repeat(&self.seeds) {
            return Err(CgtRunError::InvalidSetting {
                name: "--seeds",
                value: format!("{seed} (in {:?})", self.seeds),
                rule: "name each value once",
            });
        }
        if let Some(variant) = first_repeat(&self.variants) {
            return Err(CgtRunError::InvalidSetting {
                name: "--variants",
                value: format!("{variant} (in {:?})", self.variants),
                rule: "name each value once",
            });
        }
        if let Some(section) = &self.section {
            let file_stem = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
            if section.is_empty() || !section.chars().all(file_stem) {
                return Err(CgtRunError::InvalidSetting {
                    name: "--section",
                    value: format!("{section:?}"),
                    rule: "a name of ASCII letters, digits, `-` and `_` (it names the report \
                           section and the chart files)",
                });
            }
        }
        if self.devices == 0 {
            return Err(CgtRunError::InvalidSetting {
                name: "--devices",
                value: "0".into(),
                rule: "at least one device",
            });
        }
        if let Some(every) = self.eval_every {
            if every == 0 {
                return Err(CgtRunError::InvalidSetting {
                    name: "--eval-every",
                    value: "0".into(),
                    rule: "at least 1 step",
                });
            }
            if self.devices > 1 || self.nodes.is_some() {
                return Err(CgtRunError::InvalidSetting {
                    name: "--eval-every",
                    value: format!(
                        "{every} with --devices {} {}",
                        self.devices,
                        self.node_count()
                    ),
                    rule: "learning curves are measured on single-device runs",
                });
            }
            if self.eval_stream == EvalStream::Test {
                return Err(CgtRunError::InvalidSetting {
                    name: "--eval-every",
                    value: format!("{every} with --test-stream"),
                    rule: "learning curves are measured on the validation stream only (a curve is \
                           for watching training; the test stream is for confirming a result once)",
                });
            }
        }
        Ok(())
    }

    /// Checks the node setup, and that the batch of the configured preset splits into equal shards
    /// over the devices of every node.
    ///
    /// # Errors
    /// [`Self::nodes`] in a build without tint-cgt's `nodes` feature, or a bad one; the batch size
    /// is not a multiple of [`Self::devices`] times the node count.
    pub fn validate_devices(&self, preset: &ExperimentPreset) -> Result<(), CgtRunError> {
        if let Some(node) = &self.nodes {
            node.validate().map_err(CgtRunError::cgt("--nodes"))?;
        }
        let batch_size = preset.data.batch_size();
        let nodes = self.nodes.as_ref().map_or(1, |n| n.nodes as usize);
        let shards = self.devices * nodes;
        if shards == 0 || !batch_size.is_multiple_of(shards) {
            return Err(CgtRunError::InvalidSetting {
                name: "--devices",
                value: format!(
                    "{} {} (batch size {batch_size})",
                    self.devices,
                    self.node_count()
                ),
                rule: "at least one device, and the devices of all nodes divide the batch size \
                       (equal shards)",
            });
        }
        // Last, so that a build without the network still checks the rest of the settings.
        if self.nodes.is_some() {
            tint_cgt::nodes::require_network().map_err(CgtRunError::cgt("--nodes"))?;
        }
        Ok(())
    }

    /// `on N nodes` with several nodes, else empty (for messages).
    fn node_count(&self) -> String {
        self.nodes
            .as_ref()
            .map_or(String::new(), |n| format!("on {} nodes", n.nodes))
    }

    /// The run directory of `preset` (the configured one).
    pub fn run_dir(&self, preset: &ExperimentPreset) -> PathBuf {
        self.run_dir
            .clone()
            .unwrap_or_else(|| default_run_dir(preset))
    }

    /// The command line that reproduces the run (report paths and checkpointing left out: they do
    /// not change the numbers).
    pub fn command_line(&self) -> String {
        let mut command = if self.backend == "flex" {
            "cargo xtask eval cgt".to_string()
        } else {
            format!("cargo run -p xtask --features {} -- eval cgt", self.backend)
        };
        command.push_str(&format!(" --preset {}", self.preset));
        if let Some(steps) = self.steps {
            command.push_str(&format!(" --steps {steps}"));
        }
        if let Some(batch_size) = self.batch_size {
            command.push_str(&format!(" --batch-size {batch_size}"));
        }
        if !self.variants.is_empty() {
            command.push_str(&format!(" --variants {}", self.variants.join(",")));
        }
        if self.only_finished {
            command.push_str(" --only-finished");
        }
        if self.seeds != [0] {
            let seeds: Vec<String> = self.seeds.iter().map(|s| s.to_string()).collect();
            command.push_str(&format!(" --seeds {}", seeds.join(",")));
        }
        if !self.text.is_empty() {
            let paths: Vec<String> = self.text.iter().map(|p| p.display().to_string()).collect();
            command.push_str(&format!(" --text {}", paths.join(",")));
        }
        // Which runs an `--only-finished` assembly reads: without it the command names the preset's
        // default directory, whose runs may be others (say the CPU's beside a GPU's).
        if let Some(run_dir) = &self.run_dir {
            command.push_str(&format!(" --run-dir {}", run_dir.display()));
        }
        if self.devices > 1 {
            command.push_str(&format!(" --devices {}", self.devices));
        }
        if let Some(node) = &self.nodes {
            command.push_str(&format!(
                " --nodes {} --node-rank {} --orchestrator {} --node-address {}",
                node.nodes, node.rank, node.orchestrator, node.address
            ));
        }
        if let Some(every) = self.eval_every {
            command.push_str(&format!(" --eval-every {every}"));
        }
        if self.eval_stream == EvalStream::Test {
            command.push_str(" --test-stream");
        }
        if let Some(section) = &self.section {
            command.push_str(&format!(" --section {section}"));
        }
        command
    }
}

#[cfg(test)]
mod tests {
    use super::super::conventions::{icl_eval_data, preset_for_seed, regression_eval_data};
    use super::*;

    #[test]
    fn command_line_names_the_overrides() {
        let plain = CgtSettings::new("linreg-small", "flex");
        assert_eq!(
            plain.command_line(),
            "cargo xtask eval cgt --preset linreg-small"
        );
        let overridden = CgtSettings {
            steps: Some(40),
            batch_size: Some(8),
            variants: vec!["baseline".into(), "cgt".into()],
            checkpoint_every: Some(10),
            plots: PathBuf::from("/tmp/plots"),
            plots_link: PathBuf::from("/tmp/plots"),
            ..CgtSettings::new("icl-small", "cuda")
        };
        assert_eq!(
            overridden.command_line(),
            "cargo run -p xtask --features cuda -- eval cgt --preset icl-small --steps 40 \
             --batch-size 8 --variants baseline,cgt"
        );
        let elsewhere = CgtSettings {
            run_dir: Some(PathBuf::from("target/cgt-runs/gpu-icl-small")),
            only_finished: true,
            ..CgtSettings::new("icl-small", "flex")
        };
        assert_eq!(
            elsewhere.command_line(),
            "cargo xtask eval cgt --preset icl-small --only-finished --run-dir target/cgt-runs/gpu-icl-small"
        );
        assert_eq!(
            overridden.variants().unwrap(),
            [Variant::Baseline, Variant::Cgt]
        );
        let unknown = CgtSettings {
            variants: vec!["cgt-x".into()],
            ..plain.clone()
        };
        let error = unknown.variants().unwrap_err().to_string();
        assert!(error.contains("--variants = cgt-x"), "{error}");
        let no_seeds = CgtSettings {
            seeds: Vec::new(),
            ..plain.clone()
        };
        assert!(no_seeds.validate().is_err());
        // Issue 66: a repeated seed or variant is refused by name, not run twice.
        let twice = CgtSettings {
            seeds: vec![0, 1, 0],
            ..plain.clone()
        };
        let error = twice.validate().unwrap_err().to_string();
        assert!(
            error.contains("--seeds") && error.contains("0 (in [0, 1, 0])"),
            "{error}"
        );
        let twice = CgtSettings {
            variants: vec!["cgt".into(), "cgt".into()],
            ..plain.clone()
        };
        let error = twice.validate().unwrap_err().to_string();
        assert!(
            error.contains("--variants") && error.contains("cgt (in"),
            "{error}"
        );
        let once = CgtSettings {
            seeds: vec![0, 1],
            variants: vec!["baseline".into(), "cgt".into()],
            ..plain
        };
        once.validate().unwrap();
    }

    #[test]
    fn a_section_name_is_checked_and_in_the_command() {
        let plain = CgtSettings::new("icl-small", "flex");
        let named = CgtSettings {
            steps: Some(7000),
            section: Some("icl-small-7000".into()),
            ..plain.clone()
        };
        named.validate().unwrap();
        assert_eq!(
            named.command_line(),
            "cargo xtask eval cgt --preset icl-small --steps 7000 --section icl-small-7000"
        );
        for bad in ["", "../docs", "a b", "x.svg"] {
            let error = CgtSettings {
                section: Some(bad.into()),
                ..plain.clone()
            }
            .validate()
            .unwrap_err()
            .to_string();
            assert!(
                error.contains(&format!("--section = {bad:?}")) && error.contains("letters"),
                "{error}"
            );
        }
    }

    #[test]
    fn overrides_change_preset_and_run_dir() {
        let settings = CgtSettings {
            steps: Some(50),
            batch_size: Some(4),
            ..CgtSettings::new("icl-paper", "flex")
        };
        let preset = settings.configured_preset().unwrap();
        assert_eq!(preset.training.steps, 50);
        assert_eq!(preset.training.warmup_steps, 5);
        assert_eq!(preset.data.batch_size(), 4);
        assert_eq!(preset.training.checkpoint_every, 1000);
        assert_eq!(
            settings.run_dir(&preset),
            PathBuf::from("target/cgt-runs/icl-paper-50steps-batch4")
        );
        let every = CgtSettings {
            checkpoint_every: Some(7),
            ..CgtSettings::new("icl-tiny", "flex")
        };
        assert_eq!(
            every.configured_preset().unwrap().training.checkpoint_every,
            7
        );
        let zero = CgtSettings {
            batch_size: Some(0),
            ..CgtSettings::new("icl-tiny", "flex")
        };
        assert!(zero.configured_preset().is_err());
        assert!(CgtSettings::new("no-such-preset", "flex")
            .configured_preset()
            .is_err());
    }

    #[test]
    fn seeds_shift_the_training_stream_only() {
        let settings = CgtSettings {
            steps: Some(100),
            ..CgtSettings::new("linreg-cpu", "flex")
        };
        let preset = settings.configured_preset().unwrap();
        let DataPreset::LinearRegression(data) = &preset.data else {
            panic!("linreg preset expected")
        };
        // The curriculum ramp keeps its 40 % share of the shortened schedule.
        assert_eq!(data.curriculum.unwrap().ramp_steps, 40);
        let seeded = preset_for_seed(&preset, 2);
        let DataPreset::LinearRegression(seeded_data) = &seeded.data else {
            panic!("linreg preset expected")
        };
        assert_eq!(seeded_data.seed, data.seed + 2 * 7919);
        assert_eq!(seeded.training.seed, preset.training.seed + 2);
        assert_eq!(preset_for_seed(&preset, 0).training, preset.training);
        // Evaluation streams derive from the unseeded preset and drop the curriculum.
        let eval = regression_eval_data(data, EvalStream::Validation);
        assert_eq!(eval.seed, data.seed + 1000);
        assert!(eval.curriculum.is_none());
        let test = regression_eval_data(data, EvalStream::Test);
        assert_eq!(test.seed, data.seed + 2000);
        assert!(test.curriculum.is_none());
        let seeds = CgtSettings {
            seeds: vec![1, 2, 3],
            ..CgtSettings::new("linreg-cpu", "flex")
        };
        assert_eq!(
            seeds.command_line(),
            "cargo xtask eval cgt --preset linreg-cpu --seeds 1,2,3"
        );
    }

    #[test]
    fn the_test_stream_is_another_held_out_stream_and_has_no_curve() {
        let settings = CgtSettings {
            seeds: vec![4, 5],
            only_finished: true,
            eval_stream: EvalStream::Test,
            ..CgtSettings::new("icl-small", "flex")
        };
        assert_eq!(
            settings.command_line(),
            "cargo xtask eval cgt --preset icl-small --only-finished --seeds 4,5 --test-stream"
        );
        settings.validate().unwrap();
        let preset = settings.configured_preset().unwrap();
        let DataPreset::Arithmetic(data) = &preset.data else {
            panic!("arithmetic preset expected")
        };
        let validation = icl_eval_data(data, EvalStream::Validation);
        let test = icl_eval_data(data, EvalStream::Test);
        assert_eq!(
            (validation.seed, test.seed),
            (data.seed + 1000, data.seed + 2000)
        );
        assert_ne!(
            validation.annotated_batch(0).0,
            test.annotated_batch(0).0,
            "the two streams hold other sequences"
        );
        let with_curve = CgtSettings {
            eval_every: Some(100),
            ..settings
        };
        let error = with_curve.validate().unwrap_err().to_string();
        assert!(
            error.contains("--eval-every = 100 with --test-stream")
                && error.contains("validation stream only"),
            "{error}"
        );
    }

    #[test]
    fn several_nodes_split_the_batch_over_every_device_of_every_node() {
        let node = |rank| NodeSetup::new(rank, 2, "ws://10.0.0.1:3000", "ws://10.0.0.2:3001");
        // icl-tiny: batch 16.
        let settings = CgtSettings {
            devices: 2,
            nodes: Some(node(1)),
            ..CgtSettings::new("icl-tiny", "flex")
        };
        let preset = settings.configured_preset().unwrap();
        settings.validate().unwrap();
        let checked = settings.validate_devices(&preset);
        match tint_cgt::nodes::require_network() {
            Ok(()) => checked.unwrap(),
            // The default build has no network for several nodes (issue 63).
            Err(_) => {
                let error = checked.unwrap_err().to_string();
                assert!(error.contains("no network for several nodes"), "{error}");
            }
        }
        assert_eq!(
            settings.command_line(),
            "cargo xtask eval cgt --preset icl-tiny --devices 2 --nodes 2 --node-rank 1 \
             --orchestrator ws://10.0.0.1:3000 --node-address ws://10.0.0.2:3001"
        );
        // 4 devices divide the batch of 16, but 4 on each of 3 nodes (12 shards) do not.
        let odd = CgtSettings {
            devices: 4,
            nodes: Some(NodeSetup {
                nodes: 3,
                ..node(0)
            }),
            ..settings.clone()
        };
        let preset = odd.configured_preset().unwrap();
        let error = odd.validate_devices(&preset).unwrap_err().to_string();
        assert!(
            error.contains("4 on 3 nodes (batch size 16)")
                && error.contains("devices of all nodes"),
            "{error}"
        );
        let bad_rank = CgtSettings {
            nodes: Some(node(2)),
            ..settings.clone()
        };
        let error = bad_rank.validate_devices(&preset).unwrap_err().to_string();
        assert!(
            error.contains("--nodes") && error.contains("got 2"),
            "{error}"
        );
        let with_curve = CgtSettings {
            devices: 1,
            eval_every: Some(10),
            ..settings
        };
        let error = with_curve.validate().unwrap_err().to_string();
        assert!(error.contains("with --devices 1 on 2 nodes"), "{error}");
    }
}
