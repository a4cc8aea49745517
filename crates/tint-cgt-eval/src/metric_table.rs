//! The metric table of a CGT section: one row per metric, one column per variant (mean ± 95 %
//! Student-t half-width over its seeds), the reference predictors' columns on the regression
//! presets, and the paper's figures; rows of each seed's own value where a variant has several
//! seeds; and the regression's error-by-pair table.

use tint_cgt::metrics::{ReferenceErrors, RegressionReferences};
use tint_cgt::presets::{DataPreset, Variant};
use tint_lab::seed_interval::{cell, interval};
use tint_lab::table::Table;

use super::conventions::freeze_points;
use super::variant_result::{by_seed, per_seed, variants_of, VariantResult};

/// Titles of the reference columns of the linear-regression table.
const REFERENCE_TITLES: [&str; 4] = [
    "least squares in context",
    "ridge λ = σ² (Bayes)",
    "mean of shown y",
    "zero",
];

/// One reference predictor's cells, in the order of [`REFERENCE_TITLES`].
fn reference_cells(errors: &ReferenceErrors) -> Vec<String> {
    [
        errors.least_squares,
        errors.bayes_ridge,
        errors.mean,
        errors.zero,
    ]
    .iter()
    .map(|e| format!("{e:.3}"))
    .collect()
}

/// A table row's cells.
type Row = Vec<String>;

/// A metric of one run (`None` where the run does not have it).
type Metric<'m> = &'m dyn Fn(&VariantResult) -> Option<f64>;

/// The runs of a section, by variant, with the reference columns (if any) after them.
pub(crate) struct MetricTable<'a> {
    results: &'a [VariantResult],
    /// The variants in the order of their columns.
    pub(crate) variants: Vec<Variant>,
    /// The reference columns' titles (none without references).
    extra: &'static [&'static str],
    /// Whether some variant has more than one seed (then the by-seed rows are shown).
    several_seeds: bool,
}

impl<'a> MetricTable<'a> {
    /// The table of `results`, with the reference columns when `with_references`.
    pub(crate) fn new(results: &'a [VariantResult], with_references: bool) -> Self {
        let variants = variants_of(results);
        let several_seeds = variants
            .iter()
            .any(|&v| results.iter().filter(|r| r.variant == v).count() > 1);
        Self {
            results,
            variants,
            extra: if with_references {
                &REFERENCE_TITLES
            } else {
                &[]
            },
            several_seeds,
        }
    }

    /// The table: its header, the preset's own rows ([`Self::data_rows`]) and the rows every
    /// preset has ([`Self::common_rows`]), as markdown.
    pub(crate) fn markdown(
        &self,
        data: &DataPreset,
        references: Option<&RegressionReferences>,
    ) -> String {
        let header = std::iter::once("metric")
            .chain(self.variants.iter().map(|v| v.title()))
            .chain(self.extra.iter().copied())
            .chain(["paper (baseline / CGT / +aux / +aux+reg)"]);
        let mut table = Table::new(header);
        for row in self
            .data_rows(data, references)
            .into_iter()
            .chain(self.common_rows())
        {
            table.push_row(row);
        }
        table.to_markdown()
    }

    /// A row (the one of the list): one cell per variant over its seeds, then the reference cells
    /// (dashes when there are none), then the paper.
    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        name: &str,
        metric: Metric<'_>,
        scale: f64,
        digits: usize,
        suffix: &str,
        reference: Option<Vec<String>>,
        paper: &str,
    ) -> Vec<Row> {
        let reference =
            reference.unwrap_or_else(|| self.extra.iter().map(|_| "–".to_string()).collect());
        let cells = self
            .variants
            .iter()
            .map(|&v| cell(&per_seed(self.results, v, metric), scale, digits, suffix));
        vec![std::iter::once(name.to_string())
            .chain(cells)
            .chain(reference)
            .chain([paper.to_string()])
            .collect()]
    }

    /// A row of each seed's own value (`seed: value`): the spread behind a mean, and runs that
    /// differ in kind (those of two backends pooled in one section) told apart. Only with several
    /// seeds (an empty list otherwise).
    fn seed_row(
        &self,
        name: &str,
        metric: Metric<'_>,
        scale: f64,
        digits: usize,
        suffix: &str,
    ) -> Vec<Row> {
        if !self.several_seeds {
            return Vec::new();
        }
        let cells = self
            .variants
            .iter()
            .map(|&v| {
                let listed: Vec<String> = by_seed(self.results, v, metric)
                    .into_iter()
                    .map(|(seed, x)| format!("{seed}: {:.digits$}", x * scale))
                    .collect();
                if listed.is_empty() {
                    "–".to_string()
                } else {
                    format!("{}{suffix}", listed.join(" · "))
                }
            })
            .chain(self.extra.iter().map(|_| "–".to_string()));
        vec![std::iter::once(name.to_string())
            .chain(cells)
            .chain(["–".to_string()])
            .collect()]
    }

    /// The rows of the preset's own metrics (accuracies, regression errors or text losses).
    pub(crate) fn data_rows(
        &self,
        data: &DataPreset,
        references: Option<&RegressionReferences>,
    ) -> Vec<Row> {
        match data {
            DataPreset::Arithmetic(_) => self.arithmetic_rows(),
            DataPreset::LinearRegression(data) => self.regression_rows(data.n_pairs, references),
            DataPreset::TextMixture { .. } => [
                self.row(
                    "eval CE (dynamic y), nats/byte",
                    &VariantResult::text_loss_dynamic,
                    1.0,
                    3,
                    "",
                    None,
                    "Fig. 5, c4, nats/BPE token: baseline ~3.65, + y 3.42, x 224: ~3.25",
                ),
                self.row(
                    "eval CE, frozen-y auxiliary model",
                    &VariantResult::text_loss_frozen,
                    1.0,
                    3,
                    "",
                    None,
                    "–",
                ),
            ]
            .concat(),
        }
    }

    /// Accuracies, the in-context gain, the specialised accuracy and the representation of `y`.
    fn arithmetic_rows(&self) -> Vec<Row> {
        [
            self.row(
                "base accuracy (dynamic y)",
                &VariantResult::dynamic_accuracy,
                100.0,
                1,
                " %",
                None,
                "77.7 / 79.0 / 77.5 / 78.6 %",
            ),
            self.row(
                "no-example accuracy (first example of each task: the format-only level)",
                &VariantResult::no_example_accuracy,
                100.0,
                1,
                " %",
                None,
                "–",
            ),
            self.row(
                "in-context gain: base − no-example accuracy (issue bar ≥ 20 points)",
                &VariantResult::in_context_gain,
                100.0,
                1,
                " points",
                None,
                "–",
            ),
            self.seed_row(
                "in-context gain by seed (seed: points)",
                &VariantResult::in_context_gain,
                100.0,
                1,
                "",
            ),
            self.row(
                "specialised accuracy",
                &VariantResult::specialised_accuracy,
                100.0,
                1,
                " %",
                None,
                "– / 15.3 / 77.0 / 77.5 %",
            ),
            self.row(
                "representation variation (eq. 4)",
                &VariantResult::representation_variation,
                1.0,
                3,
                "",
                None,
                "– / 0.80 / 0.39 / 0.07",
            ),
            self.row(
                "linear-fit error of (a, b) from y",
                &VariantResult::linear_fit_error,
                1.0,
                3,
                "",
                None,
                "– / 0.19 / 0.12 / 0.04",
            ),
        ]
        .concat()
    }

    /// The regression errors with dynamic and frozen `y` at the freeze points of `n_pairs` pairs,
    /// beside the references, and the representation of `y`.
    fn regression_rows(
        &self,
        n_pairs: usize,
        references: Option<&RegressionReferences>,
    ) -> Vec<Row> {
        let dynamic_reference = |k: usize| {
            references.map(|r| {
                reference_cells(&ReferenceErrors::average(r.by_pair.get(k..).unwrap_or(&[])))
            })
        };
        let frozen_reference = |k: usize| {
            references.and_then(|r| {
                r.frozen
                    .iter()
                    .find(|f| f.0 == k)
                    .map(|f| reference_cells(&f.1))
            })
        };
        let mut out = self.row(
            "L2 on all pairs, dynamic y",
            &|r| r.dynamic_error_from(0),
            1.0,
            3,
            "",
            dynamic_reference(0),
            "–",
        );
        for k in freeze_points(n_pairs) {
            out.extend(self.row(
                &format!("L2 on pairs {k}.., dynamic y (full context)"),
                &|r| r.dynamic_error_from(k),
                1.0,
                3,
                "",
                dynamic_reference(k),
                "–",
            ));
            out.extend(self.row(
                &format!("L2 on pairs {k}.., y frozen after {k} pairs (references: fit on {k})"),
                &|r| r.frozen_error_after(k),
                1.0,
                3,
                "",
                frozen_reference(k),
                "specialised ≈ in-context",
            ));
        }
        let k = freeze_points(n_pairs)[2];
        if let Some(mean) =
            references.map(|r| ReferenceErrors::average(r.by_pair.get(k..).unwrap_or(&[])).mean)
        {
            out.extend(self.row(
                &format!("L2 on pairs {k}.. (dynamic) / mean-of-shown-y L2 (target ≤ 0.25)"),
                &|r| r.dynamic_error_from(k).map(|e| e / mean),
                1.0,
                3,
                "",
                None,
                "–",
            ));
        }
        out.extend(self.row(
            "representation variation (eq. 4)",
            &VariantResult::representation_variation,
            1.0,
            3,
            "",
            None,
            "– / 0.80 / 0.39 / 0.07 (ICL)",
        ));
        out.extend(self.row(
            "linear-fit error of (U, b) from y",
            &VariantResult::linear_fit_error,
            1.0,
            3,
            "",
            None,
            "– / 0.19 / 0.12 / 0.04 (ICL)",
        ));
        out
    }

    /// The rows every preset has: the folded-model check, the final loss and the times.
    pub(crate) fn common_rows(&self) -> Vec<Row> {
        // The folded-model check: the largest difference over seeds (a worst case, not a mean).
        let fold_cells: Vec<String> = self
            .variants
            .iter()
            .map(|&v| {
                let errors = per_seed(self.results, v, &|r| r.fold_error.map(f64::from));
                errors
                    .iter()
                    .copied()
                    .reduce(f64::max)
                    .map_or("–".into(), |e| format!("{e:.1e}"))
            })
            .chain(self.extra.iter().map(|_| "–".to_string()))
            .collect();
        [
            vec![std::iter::once(
                "folded vs frozen-y outputs, max abs diff (max over seeds)".to_string(),
            )
            .chain(fold_cells)
            .chain(["–".to_string()])
            .collect()],
            self.row(
                "final training loss (mean of last 10 steps)",
                &VariantResult::final_task_loss,
                1.0,
                3,
                "",
                None,
                "–",
            ),
            self.row(
                "training time (all steps)",
                &|r| Some(r.train_seconds),
                1.0,
                0,
                " s",
                None,
                "~10 h on TPU, 400k steps",
            ),
            self.row(
                "time per training step",
                &VariantResult::seconds_per_step,
                1.0,
                3,
                " s",
                None,
                "–",
            ),
            self.seed_row(
                "time per training step by seed (seed: s)",
                &VariantResult::seconds_per_step,
                1.0,
                3,
                "",
            ),
            self.row(
                "wall time of this invocation (steps trained now + evaluation)",
                &|r| Some(r.wall_seconds),
                1.0,
                0,
                " s",
                None,
                "–",
            ),
        ]
        .concat()
    }

    /// The regression's dynamic-`y` error by number of shown pairs (mean over seeds) beside the
    /// references, at a few counts up to `n_pairs − 1`.
    pub(crate) fn by_pair_table(
        &self,
        n_pairs: usize,
        references: &RegressionReferences,
    ) -> String {
        let shown: Vec<usize> = [1, 2, 4, 6, 8, 10, 12, 16, n_pairs - 1]
            .into_iter()
            .filter(|&i| i < n_pairs)
            .collect();
        let mut table = Table::new(
            std::iter::once("pairs shown")
                .chain(self.variants.iter().map(|v| v.title()))
                .chain(["least squares", "ridge λ = σ²", "mean of shown y"]),
        );
        for i in shown {
            let cells: Vec<String> = self
                .variants
                .iter()
                .map(|&v| {
                    let values = per_seed(self.results, v, &|r| {
                        r.regression
                            .as_ref()
                            .and_then(|e| e.dynamic_by_pair.get(i).copied())
                    });
                    interval(&values).map_or("–".into(), |(m, _)| format!("{m:.3}"))
                })
                .collect();
            let e = &references.by_pair[i];
            table.push_row(std::iter::once(i.to_string()).chain(cells).chain([
                format!("{:.3}", e.least_squares),
                format!("{:.3}", e.bayes_ridge),
                format!("{:.3}", e.mean),
            ]));
        }
        format!(
            "\nDynamic-y error by number of shown pairs (mean over seeds) next to the references:\n\n{}",
            table.to_markdown()
        )
    }
}
