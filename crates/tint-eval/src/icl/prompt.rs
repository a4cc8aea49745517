//! Token-level prompts: queries, demonstrations with their label spans, the in-context prefix of k
//! demonstrations, and the training sequences of the Single / Multi formats with label-only or
//! full-context loss masks (paper Figure 9).
//!
//! Pieces (input, prompt, label word, separator) are tokenised separately and their ids concatenated,
//! so label spans are exact. Every piece boundary of the default templates sits before whitespace,
//! where byte-level BPE splits anyway (the tests check the join against whole-string tokenisation).

use serde::{Deserialize, Serialize};
use tint_aux::AuxTokenizer;

use super::task::Example;
use super::template::Template;
use crate::EvalError;

/// How demonstrations form training inputs (paper appendix L, Figure 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DemoFormat {
    /// One demonstration per sequence; the model trains on the batch of them.
    Single,
    /// All demonstrations concatenated into one sequence.
    Multi,
}

impl DemoFormat {
    /// Name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            DemoFormat::Single => "single",
            DemoFormat::Multi => "multi",
        }
    }
}

/// Which tokens of the training sequences count in the internal training loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrainLoss {
    /// Only the label words.
    LabelOnly,
    /// Every token after the first.
    FullContext,
}

impl TrainLoss {
    /// Name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            TrainLoss::LabelOnly => "label",
            TrainLoss::FullContext => "full-context",
        }
    }
}

/// Token sequences for internal training with their loss targets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrainingSequences {
    /// Token ids, one unpadded sequence per row.
    pub ids: Vec<Vec<u32>>,
    /// `targets[b][j]`: whether token `j` of sequence `b` is a training target (`targets[b][0]` is
    /// false: nothing predicts the first token). Same shape as `ids`.
    pub targets: Vec<Vec<bool>>,
    /// The demonstration format the sequences are in; `None` for the query's own context
    /// (zero-shot) and for no training.
    pub format: Option<DemoFormat>,
}

impl TrainingSequences {
    /// Whether there is nothing to train on.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Number of target tokens.
    pub fn n_targets(&self) -> usize {
        self.targets.iter().flatten().filter(|&&t| t).count()
    }
}

/// A demonstration as token ids and where its label word sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedDemo {
    /// Query ids followed by the label word's ids.
    pub ids: Vec<u32>,
    /// `ids[label_start..]` are the label word's tokens.
    pub label_start: usize,
}

/// A classification context with k demonstrations in front of the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InContext {
    /// `demo_1 sep … demo_kept sep query`.
    pub ids: Vec<u32>,
    /// `ids[..demo_len]` are the demonstrations (without the trailing separator); 0 without any.
    pub demo_len: usize,
    /// Training targets over `ids[..demo_len]` for the requested loss.
    pub demo_targets: Vec<bool>,
    /// Demonstrations that fit.
    pub kept: usize,
}

/// Loss targets of a sequence of `len` tokens: every token after the first (full context), or the
/// tokens of the `[start, end)` label spans.
fn targets_for(len: usize, spans: &[(usize, usize)], loss: TrainLoss) -> Vec<bool> {
    let mut targets = vec![false; len];
    match loss {
        TrainLoss::FullContext => targets.iter_mut().skip(1).for_each(|t| *t = true),
        TrainLoss::LabelOnly => {
            for &(start, end) in spans {
                targets[start.max(1)..end]
                    .iter_mut()
                    .for_each(|t| *t = true);
            }
        }
    }
    targets
}

/// A template bound to a tokenizer: encodes queries, demonstrations and training sequences.
#[derive(Debug, Clone)]
pub struct PromptEncoder<'a> {
    tokenizer: &'a AuxTokenizer,
    template: &'a Template,
    label_ids: Vec<Vec<u32>>,
    prompt_ids: Vec<u32>,
    separator_ids: Vec<u32>,
    calibration_ids: Vec<u32>,
    max_input_tokens: usize,
    max_positions: usize,
}

impl<'a> PromptEncoder<'a> {
    /// Tokenises the fixed pieces of `template`. Inputs longer than `max_input_tokens` tokens are cut
    /// (their end is dropped, the prompt kept); no sequence may exceed `max_positions`.
    ///
    /// # Errors
    ///
    /// Tokenizer failures, a label word or calibration prompt that tokenises to nothing, and
    /// `max_input_tokens == 0`.
    pub fn new(
        tokenizer: &'a AuxTokenizer,
        template: &'a Template,
        max_input_tokens: usize,
        max_positions: usize,
    ) -> Result<Self, EvalError> {
        if max_input_tokens == 0 {
            return Err(EvalError::InvalidSetting {
                name: "--max-input-tokens",
                value: "0".into(),
                rule: "must be positive".into(),
            });
        }
        if template.label_words.len() < 2 {
            return Err(EvalError::InvalidSetting {
                name: "label_words",
                value: format!("{:?}", template.label_words),
                rule: "a classification template needs at least 2 label words".into(),
            });
        }
        let mut label_ids = Vec::with_capacity(template.n_classes());
        for (c, word) in template.label_words.iter().enumerate() {
            let ids = tokenizer.encode(&template.label_continuation(c))?;
            if ids.is_empty() {
                return Err(EvalError::EmptyLabelWord { word: word.clone() });
            }
            label_ids.push(ids);
        }
        let calibration_ids = tokenizer.encode(template.calibration_prompt())?;
        if calibration_ids.is_empty() {
            return Err(EvalError::InvalidSetting {
                name: "prompt",
                value: format!("{:?}", template.prompt),
                rule: "the calibration prompt must tokenise to at least one token".into(),
            });
        }
        Ok(Self {
            tokenizer,
            template,
            prompt_ids: tokenizer.encode(&template.prompt)?,
            separator_ids: tokenizer.encode(&template.separator)?,
            label_ids,
            calibration_ids,
            max_input_tokens,
            max_positions,
        })
    }

    /// The template.
    pub fn template(&self) -> &Template {
        self.template
    }

    /// Token ids of each class's label continuation (`" " + word`).
    pub fn label_ids(&self) -> &[Vec<u32>] {
        &self.label_ids
    }

    /// Token ids of the calibration prompt.
    pub fn calibration_ids(&self) -> &[u32] {
        &self.calibration_ids
    }

    /// Token ids of the separator between demonstrations.
    pub fn separator_ids(&self) -> &[u32] {
        &self.separator_ids
    }

    /// Longest input in tokens (longer inputs are cut).
    pub fn max_input_tokens(&self) -> usize {
        self.max_input_tokens
    }

    /// Longest label continuation in tokens.
    pub fn max_label_len(&self) -> usize {
        self.label_ids.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// Longest context that still leaves room for every label word.
    pub fn max_context_len(&self) -> usize {
        self.max_positions.saturating_sub(self.max_label_len())
    }

    /// Token ids of the query `input_prefix + text + prompt`, the input cut to `max_input_tokens`.
    ///
    /// # Errors
    ///
    /// Tokenizer failures; [`EvalError::PromptTooLong`] when even the cut query leaves no room for a
    /// label word.
    pub fn query_ids(&self, text: &str) -> Result<Vec<u32>, EvalError> {
        let mut ids = self.tokenizer.encode(&self.template.input_part(text))?;
        ids.truncate(self.max_input_tokens);
        ids.extend_from_slice(&self.prompt_ids);
        let needed = ids.len() + self.max_label_len();
        if needed > self.max_positions {
            return Err(EvalError::PromptTooLong {
                needed,
                max_positions: self.max_positions,
            });
        }
        Ok(ids)
    }

    /// A demonstration: query ids, then the ids of its label word.
    ///
    /// # Errors
    ///
    /// As [`PromptEncoder::query_ids`]; a label outside the template's classes.
    pub fn demo(&self, example: &Example) -> Result<EncodedDemo, EvalError> {
        let label = self
            .label_ids
            .get(example.label)
            .ok_or_else(|| EvalError::InvalidSetting {
                name: "label",
                value: example.label.to_string(),
                rule: format!("must be below {} classes", self.label_ids.len()).into(),
            })?;
        let mut ids = self.query_ids(&example.text)?;
        let label_start = ids.len();
        ids.extend_from_slice(label);
        Ok(EncodedDemo { ids, label_start })
    }

    /// `demo_1 sep demo_2 sep … demo_k` limited to `budget` tokens by dropping the earliest
    /// demonstrations; returns the ids, the label spans in them, and how many demonstrations fit.
    fn concat(
        &self,
        demos: &[EncodedDemo],
        budget: usize,
    ) -> (Vec<u32>, Vec<(usize, usize)>, usize) {
        let sep = self.separator_ids.len();
        let mut first = 0;
        let total = |from: usize| -> usize {
            demos[from..].iter().map(|d| d.ids.len()).sum::<usize>()
                + sep * (demos.len() - from).saturating_sub(1)
        };
        while first < demos.len() && total(first) > budget {
            first += 1;
        }
        let mut ids = Vec::new();
        let mut spans = Vec::new();
        for (i, demo) in demos[first..].iter().enumerate() {
            if i > 0 {
                ids.extend_from_slice(&self.separator_ids);
            }
            spans.push((ids.len() + demo.label_start, ids.len() + demo.ids.len()));
            ids.extend_from_slice(&demo.ids);
        }
        (ids, spans, demos.len() - first)
    }

    /// The context for classifying `query`: `demo_1 sep … demo_k sep query`, dropping the earliest
    /// demonstrations until a label word still fits. `loss` sets [`InContext::demo_targets`].
    pub fn in_context(&self, demos: &[EncodedDemo], query: &[u32], loss: TrainLoss) -> InContext {
        if demos.is_empty() {
            return InContext {
                ids: query.to_vec(),
                demo_len: 0,
                demo_targets: Vec::new(),
                kept: 0,
            };
        }
        let budget = self
            .max_context_len()
            .saturating_sub(query.len() + self.separator_ids.len());
        let (mut ids, spans, kept) = self.concat(demos, budget);
        let demo_len = ids.len();
        let demo_targets = targets_for(demo_len, &spans, loss);
        if kept > 0 {
            ids.extend_from_slice(&self.separator_ids);
        }
        ids.extend_from_slice(query);
        InContext {
            ids,
            demo_len,
            demo_targets,
            kept,
        }
    }

    /// Training sequences from demonstrations in `format`, with `loss` targets, and the number of
    /// demonstrations they hold. Multi keeps as many of the last demonstrations as fit in the model's
    /// positions.
    pub fn training(
        &self,
        demos: &[EncodedDemo],
        format: DemoFormat,
        loss: TrainLoss,
    ) -> (TrainingSequences, usize) {
        let mut out = TrainingSequences {
            format: Some(format),
            ..TrainingSequences::default()
        };
        let mut push = |ids: Vec<u32>, spans: &[(usize, usize)]| {
            out.targets.push(targets_for(ids.len(), spans, loss));
            out.ids.push(ids);
        };
        let kept = match format {
            DemoFormat::Single => {
                for demo in demos {
                    push(demo.ids.clone(), &[(demo.label_start, demo.ids.len())]);
                }
                demos.len()
            }
            DemoFormat::Multi => {
                let (ids, spans, kept) = self.concat(demos, self.max_positions);
                if kept > 0 {
                    push(ids, &spans);
                }
                kept
            }
        };
        (out, kept)
    }

    /// Training sequence for zero-shot internal training on the query's own context (every token a
    /// target: there is no label to single out).
    pub fn query_training(&self, query: &[u32]) -> TrainingSequences {
        let mut targets = vec![true; query.len()];
        if let Some(first) = targets.first_mut() {
            *first = false;
        }
        TrainingSequences {
            ids: vec![query.to_vec()],
            targets: vec![targets],
            format: None,
        }
    }
}
