//! The markdown section of a CGT experiment: the setting (command, model, schedule, data), the table
//! of every metric per variant over seeds next to the reference predictors and the paper's figures,
//! the by-pair table of the regression presets, and links to the charts.

use std::path::Path;
use tint_lab::table::Table;

use tint_cgt::metrics::{IclEvaluation, RegressionReferences};
use tint_cgt::presets::{DataPreset, ExperimentPreset, Variant};

use super::baseline_chart::differences_from_baseline;
use super::conventions::EvalStream;
use super::curve::curve_table;
use super::metric_table::MetricTable;
use super::paired::paired_table;
use super::positions::{charted, position_table};
use super::variant_result::{loss_chart_seed, per_seed, variants_of, VariantResult};
use tint_lab::seed_interval::cell;

/// How the runs were invoked, for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// The command line that reproduces the run.
    pub command: String,
    /// The burn backend.
    pub backend: String,
    /// Whether `--steps` overrode the preset.
    pub steps_overridden: bool,
    /// Whether `--batch-size` overrode the preset.
    pub batch_overridden: bool,
    /// The text corpus (text presets).
    pub corpus: Option<String>,
    /// Reference predictors (linear-regression presets).
    pub references: Option<RegressionReferences>,
    /// `(seed, variant)` runs left out by `only_finished`.
    pub skipped: Vec<(u64, Variant)>,
    /// The held-out stream the runs were evaluated on.
    pub eval_stream: EvalStream,
    /// `--section`: the section's and charts' name when it is not the preset's.
    pub section: Option<String>,
}

impl RunSummary {
    /// The stem of the section's key (`cgt:<stem>`) and of the charts' names of `preset`'s runs:
    /// `--section` when given, else the preset's name, with the stream's suffix
    /// ([`EvalStream::stem`]).
    pub fn stem(&self, preset: &ExperimentPreset) -> String {
        self.eval_stream
            .stem(self.section.as_deref().unwrap_or(&preset.name))
    }
}

/// The table of the arithmetic accuracy per answer character: one row per character, per variant
/// the accuracy on the last two examples and on the first example of every task. Empty when no run
/// has the breakdown.
fn character_table(results: &[VariantResult]) -> String {
    let variants: Vec<Variant> = variants_of(results)
        .into_iter()
        .filter(|&v| {
            results.iter().any(|r| {
                r.variant == v
                    && r.icl
                        .as_ref()
                        .is_some_and(|e| !e.dynamic_by_character.is_empty())
            })
        })
        .collect();
    let Some(characters) = results
        .iter()
        .filter_map(|r| r.icl.as_ref())
        .map(|e| e.dynamic_by_character.len())
        .max()
        .filter(|&n| n > 0)
    else {
        return String::new();
    };
    let mut table = Table::new(std::iter::once("answer character".to_string()).chain(
        variants.iter().flat_map(|v| {
            [
                format!("{}: last two examples", v.title()),
                format!("{}: no example", v.title()),
            ]
        }),
    ));
    for k in 0..characters {
        let name = if k == 0 {
            "sign".to_string()
        } else {
            format!("digit {k}")
        };
        let cells = variants.iter().flat_map(|&v| {
            let pick = |by: fn(&IclEvaluation) -> &Vec<f64>| {
                per_seed(results, v, &|r| {
                    r.icl.as_ref().and_then(|e| by(e).get(k).copied())
                })
            };
            [
                cell(&pick(|e| &e.dynamic_by_character), 100.0, 1, " %"),
                cell(&pick(|e| &e.no_example_by_character), 100.0, 1, " %"),
            ]
        });
        table.push_row(std::iter::once(name).chain(cells));
    }
    table.to_markdown()
}

/// The report section of a preset's runs (`plots_link`: the charts' directory as the section
/// links it, relative to the report's folder or absolute).
pub fn render_section(
    preset: &ExperimentPreset,
    results: &[VariantResult],
    plots_link: &Path,
    summary: &RunSummary,
) -> String {
    let mut seeds: Vec<u64> = results.iter().map(|r| r.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let mut out = heading(preset, summary);
    out.push_str(&setting_paragraph(preset, summary, &seeds));
    out.push_str(&data_paragraph(preset, summary));
    out.push_str(&provenance_paragraphs(results, summary));
    let references = summary.references.as_ref();
    let table = MetricTable::new(results, references.is_some());
    out.push_str(&table.markdown(&preset.data, references));
    let paired = paired_table(&preset.data, results);
    let text = matches!(preset.data, DataPreset::TextMixture { .. });
    if !paired.is_empty() {
        out.push_str(&format!(
            "\nPaired differences (each variant minus the one it adds a training term to{}, per seed: \
             the two runs of a seed share the training stream, the initialisation seed and the \
             evaluation sequences; mean ± 95 % Student-t half-width over the seeds with both \
             runs):\n\n{paired}",
            if text {
                "; then Fig. 5's comparisons of the full CGT and the widened baseline"
            } else {
                ""
            }
        ));
    }
    if text && !differences_from_baseline(results).is_empty() {
        out.push_str(&format!(
            "\nEach variant's held-out cross-entropy minus the Baseline's (paper Fig. 5's comparison), \
             paired by seed, mean ± 95 % Student-t half-width:\n\n![vs Baseline]({})\n",
            plots_link
                .join(format!("{}-vs-baseline.svg", summary.stem(preset)))
                .display()
        ));
    }
    if let (DataPreset::LinearRegression(data), Some(references)) = (&preset.data, references) {
        out.push_str(&table.by_pair_table(data.n_pairs, references));
    }
    out.push_str(&position_paragraph(
        results,
        plots_link,
        &summary.stem(preset),
    ));
    out.push_str(&chart_links(
        preset,
        results,
        &table.variants,
        plots_link,
        &summary.stem(preset),
    ));
    out
}

/// The text presets' position reading (paper Fig. 6 and 13) with its chart; empty without one.
fn position_paragraph(results: &[VariantResult], plots_link: &Path, stem: &str) -> String {
    let table = position_table(results);
    let Some(prefix) = results
        .iter()
        .find_map(|r| r.text_positions.as_ref())
        .filter(|_| !table.is_empty())
    else {
        return String::new();
    };
    let chart = if results.iter().any(|r| {
        charted(r.variant)
            && r.text_positions
                .as_ref()
                .is_some_and(|p| p.specialised.is_some())
    }) {
        format!(
            "\n![by position]({})\n",
            plots_link.join(format!("{stem}-positions.svg")).display()
        )
    } else {
        String::new()
    };
    format!(
        "\nCross-entropy by position of {} held-out continuations (paper Fig. 6 and 13): each is \
         {} bytes of one held-out document after a {}-byte prefix of it that neither pass has in \
         context. The specialised model uses `y` frozen at the prefix's last byte; the dynamic \
         model computes `y` along the continuation; the Baseline reads the continuation alone. \
         Nats per byte, mean over the bytes of the range, then mean ± 95 % Student-t half-width \
         over seeds (below zero: the specialised model is better). The chart draws the variants \
         trained with the auxiliary loss:\n\n{table}{chart}",
        prefix.samples,
        prefix.dynamic.len(),
        prefix.prefix
    )
}

/// `## CGT: …`, with the test stream and the section's name when they apply.
fn heading(preset: &ExperimentPreset, summary: &RunSummary) -> String {
    let mut out = match summary.eval_stream {
        EvalStream::Validation => format!("## CGT: `{}`", preset.name),
        EvalStream::Test => format!("## CGT: `{}` on the test stream", preset.name),
    };
    if let Some(section) = &summary.section {
        out.push_str(&format!(" (section `{section}`)"));
    }
    out.push_str("\n\n");
    out
}

/// The command, model, schedule and seeds in one paragraph.
fn setting_paragraph(preset: &ExperimentPreset, summary: &RunSummary, seeds: &[u64]) -> String {
    let model = &preset.model;
    let training = &preset.training;
    let source = |overridden: bool, flag: &str| {
        if overridden {
            format!("set by {flag}")
        } else {
            "preset".to_string()
        }
    };
    format!(
        "Command: `{}` (backend {}). \
         Model: L = {}, l = {}, d_x = {} ({} heads), d_y = {} ({} heads), rank r = {}, M = {} templates, \
         input {:?}; {} steps per variant ({}), batch {} ({}), Adam with {} warm-up steps + cosine from lr {} \
         to {}, gradient norm {}, eta = {}, w_C = {}, w_D = {} ({:?} normalisation). Seeds {:?}: \
         {}.\n\n",
        summary.command,
        summary.backend,
        model.n_layers,
        model.readout_layer,
        model.d_x,
        model.n_heads_x,
        model.d_y,
        model.n_heads_y,
        model.rank,
        model.n_templates,
        model.input,
        training.steps,
        source(summary.steps_overridden, "--steps"),
        preset.data.batch_size(),
        source(summary.batch_overridden, "--batch-size"),
        training.warmup_steps,
        training.learning_rate,
        training.min_learning_rate,
        match training.grad_clip_norm {
            Some(norm) => format!("clipped at {norm}"),
            None => "not clipped".to_string(),
        },
        training.objective.eta,
        training.objective.w_continuity,
        training.objective.w_orthogonality,
        training.objective.normalisation,
        seeds,
        if seeds.len() > 1 {
            "cells are mean ± half-width of the 95 % Student-t interval over seeds"
        } else {
            "one seed, every cell is a single observation"
        },
    )
}

/// What the data are and how each metric is read from them.
fn data_paragraph(preset: &ExperimentPreset, summary: &RunSummary) -> String {
    match &preset.data {
        DataPreset::Arithmetic(data) => format!(
            "Data: {} tasks x {} examples, d = {} digits ({} tokens per sequence). \
             Accuracy = answer characters (sign and digits after `=`) of the last two examples of every task, \
             teacher-forced argmax. Specialised = `y` frozen after the first {} examples of the task, \
             everything before them hidden from attention (positions kept).\n\n",
            data.n_tasks,
            data.n_examples,
            data.digits,
            data.sequence_length(),
            data.n_examples - 2
        ),
        DataPreset::LinearRegression(data) => format!(
            "Data: {} (x, y) pairs per sequence, x in R^{}, y in R^{}, U, b and x standard normal, noise σ = {}{}. \
             Errors are mean squared errors of the prediction of y_i at x_i (noisy targets) over {} held-out \
             evaluation batches of {} sequences (the same for every seed). Reference columns see only the shown \
             pairs of the same sequence: least squares fits (U, b) on them (minimum-norm while fewer pairs than \
             unknowns), the ridge with λ = σ² is the Bayes-optimal predictor for this generator, the mean \
             predicts the average of the shown y. Representation variation: eq. 4 with E1 = the first half of \
             the pairs, E2 = the second; linear fit: (U, b) from y_s, s in E2 (mean absolute error).\n\n",
            data.n_pairs,
            data.d_in,
            data.d_out,
            data.noise,
            data.curriculum.map_or(String::new(), |c| format!(
                "; training curriculum from {} pairs, one more pair at a time up to {} at step {}",
                c.start_pairs, data.n_pairs, c.ramp_steps
            )),
            preset.eval_batches,
            data.batch_size,
        ),
        DataPreset::TextMixture {
            seq_length,
            cut_min,
            cut_max,
            ..
        } => format!(
            "Data: byte-level mixtures of two documents of {} ({seq_length} bytes per sequence, switch \
             between positions {cut_min} and {cut_max}).\n\n",
            summary.corpus.as_deref().unwrap_or("the corpus"),
        ),
    }
}

/// The test-stream note, the runs left out and the runs resumed from checkpoints.
fn provenance_paragraphs(results: &[VariantResult], summary: &RunSummary) -> String {
    let mut out = String::new();
    if summary.eval_stream == EvalStream::Test {
        out.push_str(
            "Evaluated on the **test stream** (data seed + 2000; `--test-stream`): held-out sequences on \
             which no choice was made. The other tables, the learning curves and every choice of a \
             preset (such as its step count) use the validation stream (data seed + 1000).\n\n",
        );
    }
    if !summary.skipped.is_empty() {
        let skipped: Vec<String> = summary
            .skipped
            .iter()
            .map(|(seed, v)| format!("{} seed {seed}", v.title()))
            .collect();
        out.push_str(&format!(
            "Not run (no final checkpoint when this report was assembled with --only-finished): {}.\n\n",
            skipped.join(", ")
        ));
    }
    let label = |r: &VariantResult| format!("{} seed {}", r.variant.title(), r.seed);
    let read_back: Vec<String> = results
        .iter()
        .filter(|r| r.recorded_final_loss.is_some())
        .map(label)
        .collect();
    if !read_back.is_empty() {
        out.push_str(&format!(
            "Read back from their `evaluation.json` (finished runs kept without their weights; \
             nothing was evaluated again): {}.\n\n",
            read_back.join(", ")
        ));
    }
    let resumed: Vec<String> = results
        .iter()
        .filter(|r| r.resumed_at > 0 && r.recorded_final_loss.is_none())
        .map(|r| {
            format!(
                "{} seed {} at step {}",
                r.variant.title(),
                r.seed,
                r.resumed_at
            )
        })
        .collect();
    if !resumed.is_empty() {
        out.push_str(&format!(
            "Resumed from checkpoints ({}); losses and training times of the earlier steps are read \
             back from the runs' log.jsonl.\n\n",
            resumed.join(", ")
        ));
    }
    out
}

/// The links to the section's charts: the loss, the regression's error by pair, the accuracy by
/// character, the learning curve and the `y · y` maps of the variants with a context summary.
fn chart_links(
    preset: &ExperimentPreset,
    results: &[VariantResult],
    variants: &[Variant],
    plots_link: &Path,
    stem: &str,
) -> String {
    let mut out = String::new();
    let plot_path = |file: String| plots_link.join(file).display().to_string();
    if let Some(seed) = loss_chart_seed(results) {
        out.push_str(&format!(
            "\nTraining loss of seed {seed} (task loss, 10-step moving average):\n\n![loss]({})\n",
            plot_path(format!("{stem}-loss.svg"))
        ));
    }
    if matches!(preset.data, DataPreset::LinearRegression(_)) {
        out.push_str(&format!(
            "\nError by number of shown pairs (mean over seeds; thin lines: references):\n\n![by pair]({})\n",
            plot_path(format!("{stem}-by-pair.svg"))
        ));
    }
    let characters = character_table(results);
    if !characters.is_empty() {
        out.push_str(&format!(
            "\nAccuracy by answer character (sign, then the digits from the most significant; mean ± 95 % \
             Student-t half-width over seeds): on the last two examples of every task, and on the first \
             (no example of the task seen):\n\n{characters}"
        ));
    }
    let curve = curve_table(results);
    if !curve.is_empty() {
        out.push_str(&format!(
            "\nHeld-out answer accuracy during training (the learning curve: the evaluation sequences of \
             the table, after the steps listed; accuracy on the last two examples of every task, and the \
             in-context gain over the no-example accuracy):\n\n{curve}\n![curve]({})\n",
            plot_path(format!("{stem}-curve.svg"))
        ));
    }
    // The baseline has no context summary `y`: a section of baselines alone has no map to show.
    let with_summary: Vec<&Variant> = variants
        .iter()
        .filter(|v| **v != Variant::Baseline)
        .collect();
    if matches!(preset.data, DataPreset::Arithmetic(_)) && !with_summary.is_empty() {
        out.push_str("\nMean `n_s . n_t` of the normalised context `y` over an evaluation batch (red +1, white 0, blue −1):\n\n");
        for v in with_summary {
            out.push_str(&format!(
                "- {}: ![y.y]({})\n",
                v.title(),
                plot_path(format!("{stem}-{}-yy.svg", v.slug()))
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::conventions::freeze_points;
    use super::super::settings::CgtSettings;
    use super::*;
    use tint_cgt::metrics::{ReferenceErrors, RegressionEvaluation};

    #[test]
    fn linreg_section_has_references_and_timings() {
        let settings = CgtSettings {
            batch_size: Some(4),
            ..CgtSettings::new("linreg-small", "flex")
        };
        let preset = settings.configured_preset().unwrap();
        let DataPreset::LinearRegression(data) = &preset.data else {
            panic!("linreg preset expected")
        };
        let n = data.n_pairs;
        let errors = |scale: f64| ReferenceErrors {
            least_squares: scale,
            bayes_ridge: scale / 2.0,
            mean: 10.0,
            zero: 17.0,
        };
        let references = RegressionReferences {
            by_pair: vec![errors(1.0); n],
            frozen: freeze_points(n).iter().map(|&k| (k, errors(2.0))).collect(),
        };
        let result = |seed: u64, error: f64| VariantResult {
            variant: Variant::Cgt,
            seed,
            losses: (0..20).map(|i| (i as f64, 1.0)).collect(),
            train_seconds: 10.0,
            wall_seconds: 12.0,
            resumed_at: 20,
            icl: None,
            regression: Some(RegressionEvaluation {
                dynamic_by_pair: vec![error; n],
                specialised: freeze_points(n).iter().map(|&k| (k, error, 0.75)).collect(),
                representation_variation: Some(0.1),
                linear_fit_error: Some(0.2),
            }),
            text_loss: None,
            text_positions: None,
            fold_error: Some(1e-6),
            curve: Vec::new(),
            recorded_final_loss: None,
        };
        let summary = RunSummary {
            command: settings.command_line(),
            backend: "flex".into(),
            steps_overridden: false,
            batch_overridden: true,
            corpus: None,
            references: Some(references),
            skipped: vec![(4, Variant::CgtAux)],
            eval_stream: EvalStream::Validation,
            section: None,
        };
        let one = render_section(
            &preset,
            &[result(0, 0.5)],
            Path::new("/tmp/plots"),
            &summary,
        );
        assert!(one.contains("`cargo xtask eval cgt --preset linreg-small --batch-size 4`"));
        assert!(one.contains("batch 4 (set by --batch-size)"), "{one}");
        assert!(one.contains("one seed, every cell is a single observation"));
        assert!(
            one.contains("with --only-finished): CGT (Aux) seed 4."),
            "{one}"
        );
        assert!(one.contains(
            "| least squares in context | ridge λ = σ² (Bayes) | mean of shown y | zero |"
        ));
        let k = n / 2;
        assert!(
            one.contains(&format!(
                "| L2 on pairs {k}.., y frozen after {k} pairs (references: fit on {k}) | 0.750 | 2.000 | 1.000 | 10.000 | 17.000 |"
            )),
            "{one}"
        );
        assert!(one
            .contains("| L2 on all pairs, dynamic y | 0.500 | 1.000 | 0.500 | 10.000 | 17.000 |"));
        assert!(
            one.contains("| time per training step | 0.500 s | – | – | – | – |"),
            "{one}"
        );
        assert!(one.contains("| training time (all steps) | 10 s |"));
        assert!(one.contains("| final training loss (mean of last 10 steps) | 1.000 |"));
        assert!(one.contains("Resumed from checkpoints (CGT (no Aux/Reg) seed 0 at step 20)"));
        // One seed: no by-seed rows (the mean row is that seed's value).
        assert!(!one.contains("by seed"), "{one}");
        // Three seeds with errors 0.4, 0.5, 0.6: mean 0.5, half-width 4.303 * 0.1 / sqrt(3) = 0.248;
        // the ratio to the mean-of-shown-y error (10) is 0.05 ± 0.025.
        let three = render_section(
            &preset,
            &[result(1, 0.4), result(2, 0.5), result(3, 0.6)],
            Path::new("/tmp/plots"),
            &summary,
        );
        assert!(
            three.contains("| L2 on all pairs, dynamic y | 0.500 ± 0.248 |"),
            "{three}"
        );
        let last = freeze_points(n)[2];
        assert!(
            three.contains(&format!(
                "| L2 on pairs {last}.. (dynamic) / mean-of-shown-y L2 (target ≤ 0.25) | 0.050 ± 0.025 |"
            )),
            "{three}"
        );
        assert!(three.contains("| representation variation (eq. 4) | 0.100 ± 0.000 |"));
        // Each seed's time per step (10 s over 20 steps), labelled by seed, after the mean row.
        assert!(
            three.contains(
                "| time per training step by seed (seed: s) | 1: 0.500 · 2: 0.500 · 3: 0.500 | – |"
            ),
            "{three}"
        );
        assert!(three
            .contains("| folded vs frozen-y outputs, max abs diff (max over seeds) | 1.0e-6 |"));
        assert!(
            three.contains("| 12 | 0.500 | 1.000 | 0.500 | 10.000 |"),
            "{three}"
        );
    }

    #[test]
    fn a_test_stream_section_is_headed_and_names_its_charts() {
        let settings = CgtSettings::new("icl-tiny", "flex");
        let preset = settings.configured_preset().unwrap();
        let result = VariantResult {
            variant: Variant::Baseline,
            seed: 0,
            losses: vec![(0.0, 1.0)],
            train_seconds: 1.0,
            wall_seconds: 1.0,
            resumed_at: 0,
            icl: Some(IclEvaluation {
                dynamic_accuracy: 0.5,
                no_example_accuracy: 0.25,
                ..Default::default()
            }),
            regression: None,
            text_loss: None,
            text_positions: None,
            fold_error: None,
            curve: vec![super::super::curve_file::CurvePoint {
                step: 10,
                dynamic_accuracy: 0.5,
                no_example_accuracy: 0.25,
            }],
            recorded_final_loss: None,
        };
        let summary = |eval_stream| RunSummary {
            command: settings.command_line(),
            backend: "flex".into(),
            steps_overridden: false,
            batch_overridden: false,
            corpus: None,
            references: None,
            skipped: Vec::new(),
            eval_stream,
            section: None,
        };
        let plots = Path::new("/tmp/plots");
        let validation = render_section(
            &preset,
            std::slice::from_ref(&result),
            plots,
            &summary(EvalStream::Validation),
        );
        assert!(validation.contains("Held-out answer accuracy during training"));
        assert!(validation.contains("/tmp/plots/icl-tiny-curve.svg"));
        // The baseline has no `y`: no heading for a map that a baseline-only section cannot show.
        assert!(!validation.contains("n_s . n_t"), "{validation}");
        // A test-stream run carries no curve (the curve is the validation stream's: run.rs tests).
        let on_test = VariantResult {
            curve: Vec::new(),
            recorded_final_loss: None,
            ..result.clone()
        };
        let test = render_section(&preset, &[on_test], plots, &summary(EvalStream::Test));
        assert!(test.starts_with("## CGT: `icl-tiny` on the test stream\n"));
        assert!(test.contains("Evaluated on the **test stream**"), "{test}");
        assert!(test.contains("| in-context gain: base − no-example accuracy (issue bar ≥ 20 points) | 25.0 points |"), "{test}");
        assert!(test.contains("/tmp/plots/icl-tiny-test-loss.svg"));
        // Two seeds: each seed's gain, in the order of the runs, labelled by seed.
        let other_seed = VariantResult {
            seed: 4,
            icl: Some(IclEvaluation {
                dynamic_accuracy: 0.6,
                no_example_accuracy: 0.25,
                ..Default::default()
            }),
            curve: Vec::new(),
            recorded_final_loss: None,
            ..result.clone()
        };
        let two = render_section(
            &preset,
            &[
                VariantResult {
                    curve: Vec::new(),
                    recorded_final_loss: None,
                    ..result.clone()
                },
                other_seed,
            ],
            plots,
            &summary(EvalStream::Test),
        );
        assert!(
            two.contains("| in-context gain by seed (seed: points) | 0: 25.0 · 4: 35.0 | – |"),
            "{two}"
        );
        assert!(!test.contains("by seed"), "{test}");
        // `--section` renames the section's charts and says so in its heading.
        let named = RunSummary {
            section: Some("icl-tiny-long".into()),
            ..summary(EvalStream::Test)
        };
        let guided = VariantResult {
            variant: Variant::Cgt,
            curve: Vec::new(),
            recorded_final_loss: None,
            ..result
        };
        let renamed = render_section(&preset, &[guided], plots, &named);
        assert!(
            renamed
                .starts_with("## CGT: `icl-tiny` on the test stream (section `icl-tiny-long`)\n"),
            "{renamed}"
        );
        assert!(renamed.contains("/tmp/plots/icl-tiny-long-test-loss.svg"));
        assert!(renamed.contains("Mean `n_s . n_t` of the normalised context `y`"));
        assert!(
            renamed.contains("/tmp/plots/icl-tiny-long-test-cgt-yy.svg"),
            "{renamed}"
        );
        assert!(!renamed.contains("/tmp/plots/icl-tiny-test-"));
    }
}
