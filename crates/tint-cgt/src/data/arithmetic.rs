//! Synthetic in-context arithmetic (paper §4.1): each sequence holds `n_tasks` tasks of `n_examples`
//! examples `A*B=C` with `C = trunc(a A + b B)` (truncated toward zero, matching the paper's `-00028` example), hidden `a ~ U[0, 10)`, `b ~ U(-10, 10)` per task,
//! `d`-digit zero-padded `A`, `B` and a signed `(d + 2)`-digit `C`, e.g. `012*023=+00035`.
//! Examples are separated by `|`, tasks by `#`.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::batch::{BatchSource, HostBatch, HostInput, HostTargets};
use super::step_rng;
use crate::error::{CgtError, Result};

/// The 16-symbol character vocabulary of the arithmetic task.
pub struct ArithmeticVocab;

impl ArithmeticVocab {
    /// Symbols in id order.
    pub const SYMBOLS: &'static str = "0123456789*=+-|#";

    /// Vocabulary size.
    pub const SIZE: usize = 16;

    /// Encodes a string of vocabulary symbols.
    pub fn encode(text: &str) -> Result<Vec<u32>> {
        text.chars()
            .map(|c| {
                Self::SYMBOLS.find(c).map(|i| i as u32).ok_or_else(|| {
                    CgtError::InvalidDataConfig(format!("symbol {c:?} not in vocabulary"))
                })
            })
            .collect()
    }

    /// Decodes ids back to text (unknown ids become `?`).
    pub fn decode(ids: &[u32]) -> String {
        ids.iter()
            .map(|&i| Self::SYMBOLS.chars().nth(i as usize).unwrap_or('?'))
            .collect()
    }
}

/// Positions of one example `A*B=C` in its sequence (sequence coordinates).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExampleSpan {
    /// Position of the first digit of `A`.
    pub start: usize,
    /// Position of `=`; the answer occupies `equals + 1 .. end`.
    pub equals: usize,
    /// One past the last answer digit.
    pub end: usize,
}

/// One task of a sequence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskSpan {
    /// Hidden multiplier `a`.
    pub a: f64,
    /// Hidden multiplier `b`.
    pub b: f64,
    /// The task's examples in order.
    pub examples: Vec<ExampleSpan>,
}

/// A generated sequence with its task annotations.
#[derive(Clone, Debug, PartialEq)]
pub struct ArithmeticSequence {
    /// Token ids.
    pub tokens: Vec<u32>,
    /// Tasks in order.
    pub tasks: Vec<TaskSpan>,
}

/// Parameters of the arithmetic generator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArithmeticConfig {
    /// Tasks per sequence.
    pub n_tasks: usize,
    /// Examples per task.
    pub n_examples: usize,
    /// Digits `d` of the operands.
    pub digits: usize,
    /// Sequences per batch.
    pub batch_size: usize,
    /// Stream seed.
    pub seed: u64,
}

impl ArithmeticConfig {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        if self.n_tasks == 0 || self.n_examples == 0 || self.batch_size == 0 {
            return Err(CgtError::InvalidDataConfig(
                "n_tasks, n_examples and batch_size must be positive".into(),
            ));
        }
        if self.digits == 0 || self.digits > 6 {
            return Err(CgtError::InvalidDataConfig(format!(
                "digits = {} outside 1..=6",
                self.digits
            )));
        }
        Ok(())
    }

    /// Characters in one example: `d + 1 + d + 1 + 1 + (d + 2)`.
    pub fn example_length(&self) -> usize {
        3 * self.digits + 5
    }

    /// Tokens in one sequence.
    pub fn sequence_length(&self) -> usize {
        let task = self.n_examples * self.example_length() + self.n_examples - 1;
        self.n_tasks * task + self.n_tasks - 1
    }

    /// The text of one example.
    pub fn format_example(&self, a: f64, b: f64, left: u64, right: u64) -> String {
        let answer = (a * left as f64 + b * right as f64).trunc() as i64;
        let sign = if answer < 0 { '-' } else { '+' };
        let d = self.digits;
        format!(
            "{left:0d$}*{right:0d$}={sign}{:0w$}",
            answer.unsigned_abs(),
            w = d + 2
        )
    }

    /// Samples one annotated sequence.
    pub fn sample(&self, rng: &mut impl Rng) -> ArithmeticSequence {
        let limit = 10u64.pow(self.digits as u32);
        let mut text = String::new();
        let mut tasks = Vec::with_capacity(self.n_tasks);
        for task in 0..self.n_tasks {
            if task > 0 {
                text.push('#');
            }
            let a = rng.random_range(0.0..10.0);
            let b = loop {
                let b: f64 = rng.random_range(-10.0..10.0);
                if b > -10.0 {
                    break b;
                }
            };
            let mut examples = Vec::with_capacity(self.n_examples);
            for example in 0..self.n_examples {
                if example > 0 {
                    text.push('|');
                }
                let start = text.len();
                let left = rng.random_range(0..limit);
                let right = rng.random_range(0..limit);
                text.push_str(&self.format_example(a, b, left, right));
                examples.push(ExampleSpan {
                    start,
                    equals: start + 2 * self.digits + 1,
                    end: text.len(),
                });
            }
            tasks.push(TaskSpan { a, b, examples });
        }
        let tokens = ArithmeticVocab::encode(&text).expect("generated text uses the vocabulary");
        ArithmeticSequence { tokens, tasks }
    }

    /// A batch of annotated sequences for step `step`, plus its host batch
    /// (inputs `tokens[..n-1]`, targets `tokens[1..]`, every position in the loss).
    pub fn annotated_batch(&self, step: u64) -> (HostBatch, Vec<ArithmeticSequence>) {
        let mut rng = step_rng(self.seed, step);
        let sequences: Vec<ArithmeticSequence> = (0..self.batch_size)
            .map(|_| self.sample(&mut rng))
            .collect();
        let length = self.sequence_length() - 1;
        let mut inputs = Vec::with_capacity(self.batch_size * length);
        let mut targets = Vec::with_capacity(self.batch_size * length);
        for sequence in &sequences {
            inputs.extend(sequence.tokens[..length].iter().map(|&t| t as i64));
            targets.extend(sequence.tokens[1..].iter().map(|&t| t as i64));
        }
        let batch = HostBatch {
            batch_size: self.batch_size,
            seq_length: length,
            input: HostInput::Tokens(inputs),
            targets: HostTargets::Tokens(targets),
            loss_mask: vec![1.0; self.batch_size * length],
        };
        (batch, sequences)
    }
}

impl BatchSource for ArithmeticConfig {
    fn batch(&self, step: u64) -> HostBatch {
        self.annotated_batch(step).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn config() -> ArithmeticConfig {
        ArithmeticConfig {
            n_tasks: 4,
            n_examples: 4,
            digits: 3,
            batch_size: 3,
            seed: 7,
        }
    }

    #[test]
    fn paper_examples_format() {
        // a = 1, b = 1: 12 + 23 = 35; a = 0.5, b = -1.5: 6 - 34.5 = -28.5, truncated to -28 as in the paper.
        assert_eq!(config().format_example(1.0, 1.0, 12, 23), "012*023=+00035");
        assert_eq!(config().format_example(0.5, -1.5, 12, 23), "012*023=-00028");
        assert_eq!(config().format_example(0.0, 0.0, 0, 0), "000*000=+00000");
    }

    #[test]
    fn sequences_have_the_announced_layout_and_answers() {
        let config = config();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let sequence = config.sample(&mut rng);
        assert_eq!(sequence.tokens.len(), config.sequence_length());
        assert_eq!(config.sequence_length(), 4 * (4 * 14 + 3) + 3);
        let text = ArithmeticVocab::decode(&sequence.tokens);
        assert_eq!(text.matches('#').count(), 3);
        assert_eq!(text.matches('|').count(), 12);
        for task in &sequence.tasks {
            assert!((0.0..10.0).contains(&task.a) && task.b > -10.0 && task.b < 10.0);
            for example in &task.examples {
                let body = &text[example.start..example.end];
                let left: f64 = body[0..3].parse().unwrap();
                let right: f64 = body[4..7].parse().unwrap();
                assert_eq!(&body[3..4], "*");
                assert_eq!(&text[example.equals..example.equals + 1], "=");
                let answer: i64 = body[8..].parse().unwrap();
                assert_eq!(answer, (task.a * left + task.b * right).trunc() as i64);
                assert_eq!(body.len(), 14);
            }
        }
    }

    #[test]
    fn batches_are_deterministic_and_shifted() {
        let config = config();
        let (first, sequences) = config.annotated_batch(5);
        assert_eq!(first, config.batch(5));
        assert_ne!(first, config.batch(6));
        first.validate().unwrap();
        let (HostInput::Tokens(inputs), HostTargets::Tokens(targets)) =
            (&first.input, &first.targets)
        else {
            panic!("token batch expected");
        };
        let n = first.seq_length;
        assert_eq!(inputs[1..n], targets[..n - 1]);
        assert_eq!(targets[n - 1], *sequences[0].tokens.last().unwrap() as i64);
    }

    #[test]
    fn bad_parameters_and_symbols_are_errors() {
        let mut bad = config();
        bad.digits = 0;
        assert!(bad.validate().is_err());
        assert!(ArithmeticVocab::encode("12a").is_err());
    }
}
