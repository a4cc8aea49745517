//! Prompt templates and label words (the official TinT `icl_eval` templates, version 0).
//!
//! A query is `input_prefix + text + prompt`; its label is the continuation `" " + label_word`;
//! demonstrations are joined with `separator`. Calibration scores the label words after the prompt
//! alone (the official "surface form" prompt, leading whitespace removed so it can start a sequence).

use serde::{Deserialize, Serialize};

use super::task::TaskKind;

/// How an input becomes a prompt, and the word that stands for each class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    /// Text before the input, e.g. `"Review: "`.
    pub input_prefix: String,
    /// Text after the input, e.g. `"\nSentiment:"`; the label word follows it after a space.
    pub prompt: String,
    /// Label word of class `c` (without the leading space).
    pub label_words: Vec<String>,
    /// Text between demonstrations (`"\n\n"`).
    pub separator: String,
}

const SENTIMENT_WORDS: [&str; 2] = ["Negative", "Positive"];

impl Template {
    /// The default template of `task`.
    ///
    /// - Sentiment tasks (SST-2, MR, CR, MPQA, Amazon and the snippets): `Review: {text}\nSentiment:`
    ///   with `Negative` / `Positive` (class 0 = negative).
    /// - Amazon fine food: the Amazon polarity prompt and words; class 1 (`Positive`) is a 5-star
    ///   ("great") review, class 0 (`Negative`) any other rating.
    /// - Subj: `{text} This is` with `objective` / `subjective` (class 0 = objective).
    /// - AGNews: `Article: {text}\nWhat is the article about? Answer:` with `World`, `Sports`,
    ///   `Business`, `Technology` (the AGNews class order).
    /// - BBC topics: the AGNews prompt with `Business`, `Entertainment`, `Politics`, `Sports`,
    ///   `Technology` (alphabetical directory order).
    pub fn for_task(task: TaskKind) -> Self {
        let (input_prefix, prompt, words): (&str, &str, &[&str]) = match task {
            TaskKind::Sst2
            | TaskKind::Mr
            | TaskKind::Cr
            | TaskKind::Mpqa
            | TaskKind::Amazon
            | TaskKind::AmazonFineFood
            | TaskKind::MrSnippets
            | TaskKind::CrSnippets => ("Review: ", "\nSentiment:", &SENTIMENT_WORDS),
            TaskKind::Subj => ("", " This is", &["objective", "subjective"]),
            TaskKind::AgNews => (
                "Article: ",
                "\nWhat is the article about? Answer:",
                &["World", "Sports", "Business", "Technology"],
            ),
            TaskKind::BbcTopics => (
                "Article: ",
                "\nWhat is the article about? Answer:",
                &[
                    "Business",
                    "Entertainment",
                    "Politics",
                    "Sports",
                    "Technology",
                ],
            ),
        };
        Self {
            input_prefix: input_prefix.to_string(),
            prompt: prompt.to_string(),
            label_words: words.iter().map(|w| w.to_string()).collect(),
            separator: "\n\n".to_string(),
        }
    }

    /// Number of classes.
    pub fn n_classes(&self) -> usize {
        self.label_words.len()
    }

    /// The input part `input_prefix + text` (text trimmed).
    pub fn input_part(&self, text: &str) -> String {
        format!("{}{}", self.input_prefix, text.trim())
    }

    /// The whole query `input_prefix + text + prompt`.
    pub fn query(&self, text: &str) -> String {
        format!("{}{}", self.input_part(text), self.prompt)
    }

    /// The continuation that names class `label`: `" " + label_words[label]`.
    pub fn label_continuation(&self, label: usize) -> String {
        format!(" {}", self.label_words[label])
    }

    /// A demonstration: the query followed by its label's continuation.
    pub fn demonstration(&self, text: &str, label: usize) -> String {
        format!("{}{}", self.query(text), self.label_continuation(label))
    }

    /// The prompt alone, for calibration (`P(c | prompt)`).
    pub fn calibration_prompt(&self) -> &str {
        self.prompt.trim_start()
    }
}
