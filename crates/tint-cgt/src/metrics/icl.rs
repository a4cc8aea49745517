//! Evaluation on the arithmetic in-context learning task (paper Table 1).

use burn::tensor::backend::Backend;
use serde::{Deserialize, Serialize};

use super::{frozen_context, host, linear_fit_error, representation_variation};
use crate::data::{ArithmeticConfig, ArithmeticSequence};
use crate::error::{CgtError, Result};
use crate::model::CgtModel;
use crate::regularisers::normalise;

/// Standard deviation of `a ~ U[0, 10)` and `b ~ U(-10, 10)`, used to normalise them for the fit.
const A_STD: f64 = 2.886_751_345_948_129;
const B_STD: f64 = 5.773_502_691_896_258;

/// Table-1 style results.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IclEvaluation {
    /// Answer-character accuracy on the last two examples of every task, dynamic `y`.
    pub dynamic_accuracy: f64,
    /// Answer-character accuracy on the first example of every task, dynamic `y`: the model has seen no
    /// example of that task (only other tasks' examples), so this is the level the answer format alone
    /// gives (sign, leading zeros, magnitude); in-context learning is what `dynamic_accuracy` adds to it.
    #[serde(default)]
    pub no_example_accuracy: f64,
    /// Same with `y` frozen after the first `n_examples - 2` examples, which are removed from the context.
    pub specialised_accuracy: Option<f64>,
    /// Representation variation, eq. (4), averaged over tasks.
    pub representation_variation: Option<f64>,
    /// Mean absolute error of a linear fit of normalised `(a, b)` from `y` on the last two examples.
    pub linear_fit_error: Option<f64>,
    /// Batch-mean `n_s . n_t` map, `[seq_length, seq_length]` row-major, from the first batch.
    pub dot_products: Option<Vec<f32>>,
    /// Sequence length of `dot_products`.
    pub seq_length: usize,
    /// Answer characters scored (per accuracy).
    pub answers_scored: usize,
    /// `dynamic_accuracy` per answer character: index 0 the sign, then the `d + 2` digits from the
    /// most significant (where the answer's magnitude and the task's inferred parameters show).
    #[serde(default)]
    pub dynamic_by_character: Vec<f64>,
    /// `no_example_accuracy` per answer character, indexed as [`Self::dynamic_by_character`].
    #[serde(default)]
    pub no_example_by_character: Vec<f64>,
}

/// Hits and totals per answer character (index 0 the sign, then the digits).
#[derive(Clone, Debug, Default, PartialEq)]
struct CharacterCounts {
    hits: Vec<usize>,
    totals: Vec<usize>,
}

impl CharacterCounts {
    fn new(characters: usize) -> Self {
        Self {
            hits: vec![0; characters],
            totals: vec![0; characters],
        }
    }

    fn accuracies(&self) -> Vec<f64> {
        self.hits
            .iter()
            .zip(&self.totals)
            .map(|(&h, &t)| h as f64 / t.max(1) as f64)
            .collect()
    }
}

/// Hits and total of the answer characters of the `scored` examples of one task; each character's
/// outcome is also added to `by_character` (when it has room for it).
fn answer_hits(
    predictions: &[i64],
    seq_length: usize,
    sample: usize,
    sequence: &ArithmeticSequence,
    task: usize,
    scored: std::ops::Range<usize>,
    by_character: &mut CharacterCounts,
) -> (usize, usize) {
    let mut hits = 0;
    let mut total = 0;
    for example in &sequence.tasks[task].examples[scored] {
        for (character, position) in (example.equals + 1..example.end).enumerate() {
            // Token `position` is predicted at input position `position - 1`.
            let predicted = predictions[sample * seq_length + position - 1];
            let hit = usize::from(predicted == sequence.tokens[position] as i64);
            hits += hit;
            total += 1;
            if character < by_character.hits.len() {
                by_character.hits[character] += hit;
                by_character.totals[character] += 1;
            }
        }
    }
    (hits, total)
}

/// Evaluates `model` on `n_batches` batches of `data` (use a seed different from training).
pub fn evaluate_icl<B: Backend>(
    model: &CgtModel<B>,
    data: &ArithmeticConfig,
    n_batches: usize,
    device: &B::Device,
) -> Result<IclEvaluation> {
    data.validate()?;
    let n_examples = data.n_examples;
    if n_examples < 3 {
        return Err(CgtError::InvalidDataConfig(
            "evaluation needs at least 3 examples per task".into(),
        ));
    }
    let first_scored = n_examples - 2;
    let mut result = IclEvaluation::default();
    let scored = first_scored..n_examples;
    let (mut dynamic_hits, mut specialised_hits, mut total) = (0usize, 0usize, 0usize);
    let (mut no_example_hits, mut no_example_total) = (0usize, 0usize);
    // Sign and d + 2 digits.
    let characters = data.digits + 3;
    let mut dynamic_characters = CharacterCounts::new(characters);
    let mut no_example_characters = CharacterCounts::new(characters);
    let mut unused = CharacterCounts::default();
    let (mut variation_sum, mut variation_count) = (0.0, 0usize);
    let (mut features, mut targets) = (Vec::new(), Vec::new());
    for step in 0..n_batches {
        let (batch, sequences) = data.annotated_batch(step as u64);
        let seq_length = batch.seq_length;
        let input = batch.input_tensor::<B>(device);
        let output = model.forward(&input)?;
        let predictions: Vec<i64> = output
            .logits
            .argmax(2)
            .into_data()
            .convert::<i64>()
            .to_vec::<i64>()
            .unwrap_or_default();
        for (b, sequence) in sequences.iter().enumerate() {
            for task in 0..sequence.tasks.len() {
                let (hits, count) = answer_hits(
                    &predictions,
                    seq_length,
                    b,
                    sequence,
                    task,
                    scored.clone(),
                    &mut dynamic_characters,
                );
                dynamic_hits += hits;
                total += count;
                let (hits, count) = answer_hits(
                    &predictions,
                    seq_length,
                    b,
                    sequence,
                    task,
                    0..1,
                    &mut no_example_characters,
                );
                no_example_hits += hits;
                no_example_total += count;
            }
        }
        let Some(context) = output.context else {
            continue;
        };
        let d_y = context.mean.dims()[2];
        if step == 0 {
            let unit = normalise(context.mean.clone());
            let gram = unit.clone().matmul(unit.swap_dims(1, 2)).mean_dim(0);
            result.dot_products = Some(host(gram));
            result.seq_length = seq_length;
        }
        let y = host(context.mean.clone());
        for (b, sequence) in sequences.iter().enumerate() {
            let rows = &y[b * seq_length * d_y..(b + 1) * seq_length * d_y];
            for task in &sequence.tasks {
                let examples = &task.examples;
                let first = examples[0].start..examples[first_scored - 1].end;
                let second =
                    examples[first_scored].start..examples[n_examples - 1].end.min(seq_length);
                variation_sum += representation_variation(rows, d_y, first, second.clone());
                variation_count += 1;
                for s in second {
                    features.extend(rows[s * d_y..(s + 1) * d_y].iter().map(|&v| v as f64));
                    targets.push((task.a - 5.0) / A_STD);
                    targets.push(task.b / B_STD);
                }
            }
        }
        // Specialised: per task, freeze y just before its first scored example and hide everything earlier.
        for task in 0..data.n_tasks {
            let starts: Vec<usize> = sequences
                .iter()
                .map(|s| s.tasks[task].examples[first_scored].start)
                .collect();
            let at: Vec<usize> = starts.iter().map(|s| s - 1).collect();
            let frozen = frozen_context(context.mean.clone(), &at);
            let logits = model.forward_x_path(&input, Some(frozen), Some(&starts))?;
            let predictions: Vec<i64> = logits
                .argmax(2)
                .into_data()
                .convert::<i64>()
                .to_vec::<i64>()
                .unwrap_or_default();
            for (b, sequence) in sequences.iter().enumerate() {
                specialised_hits += answer_hits(
                    &predictions,
                    seq_length,
                    b,
                    sequence,
                    task,
                    scored.clone(),
                    &mut unused,
                )
                .0;
            }
        }
    }
    result.answers_scored = total;
    result.dynamic_accuracy = dynamic_hits as f64 / total.max(1) as f64;
    result.no_example_accuracy = no_example_hits as f64 / no_example_total.max(1) as f64;
    result.dynamic_by_character = dynamic_characters.accuracies();
    result.no_example_by_character = no_example_characters.accuracies();
    if model.is_guided() {
        result.specialised_accuracy = Some(specialised_hits as f64 / total.max(1) as f64);
        result.representation_variation = Some(variation_sum / variation_count.max(1) as f64);
        let d_y = features.len() / (targets.len() / 2).max(1);
        result.linear_fit_error = linear_fit_error(&features, d_y, &targets, 2).ok();
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Predictions at input position `p` for token `p + 1`: the true next token everywhere, except
    /// that every answer character of the examples in `wrong` is predicted as the token after it.
    fn predictions_wrong_on(
        sequence: &ArithmeticSequence,
        wrong: std::ops::Range<usize>,
    ) -> Vec<i64> {
        let mut predictions: Vec<i64> = sequence.tokens[1..].iter().map(|&t| t as i64).collect();
        for task in &sequence.tasks {
            for example in &task.examples[wrong.clone()] {
                for position in example.equals + 1..example.end {
                    predictions[position - 1] = (sequence.tokens[position] as i64 + 1) % 16;
                }
            }
        }
        predictions
    }

    #[test]
    fn answer_hits_scores_only_the_answers_of_the_examples_asked_for() {
        let data = ArithmeticConfig {
            n_tasks: 2,
            n_examples: 4,
            digits: 2,
            batch_size: 1,
            seed: 0,
        };
        let sequence = data.sample(&mut rand::rngs::StdRng::seed_from_u64(3));
        let seq_length = sequence.tokens.len() - 1;
        let answer = data.digits + 3; // sign and d + 2 digits
                                      // Wrong on the first example of each task only: the no-example score is 0, the scored ones 1.
        let predictions = predictions_wrong_on(&sequence, 0..1);
        for task in 0..2 {
            let mut first = CharacterCounts::new(answer);
            assert_eq!(
                answer_hits(
                    &predictions,
                    seq_length,
                    0,
                    &sequence,
                    task,
                    0..1,
                    &mut first
                ),
                (0, answer)
            );
            assert_eq!(first.hits, vec![0; answer]);
            assert_eq!(first.totals, vec![1; answer]);
            let mut last = CharacterCounts::new(answer);
            assert_eq!(
                answer_hits(
                    &predictions,
                    seq_length,
                    0,
                    &sequence,
                    task,
                    2..4,
                    &mut last
                ),
                (2 * answer, 2 * answer)
            );
            assert_eq!(last.accuracies(), vec![1.0; answer]);
        }
        // Wrong on the last two: the reverse.
        let predictions = predictions_wrong_on(&sequence, 2..4);
        let mut counts = CharacterCounts::default();
        assert_eq!(
            answer_hits(&predictions, seq_length, 0, &sequence, 1, 0..1, &mut counts),
            (answer, answer)
        );
        assert_eq!(
            answer_hits(&predictions, seq_length, 0, &sequence, 1, 2..4, &mut counts),
            (0, 2 * answer)
        );
        // Wrong on one character only (the last digit of the third example): only that
        // character's count misses.
        let mut predictions: Vec<i64> = sequence.tokens[1..].iter().map(|&t| t as i64).collect();
        let example = &sequence.tasks[0].examples[2];
        let last_digit = example.end - 1;
        predictions[last_digit - 1] = (sequence.tokens[last_digit] as i64 + 1) % 16;
        let mut counts = CharacterCounts::new(answer);
        assert_eq!(
            answer_hits(&predictions, seq_length, 0, &sequence, 0, 2..4, &mut counts),
            (2 * answer - 1, 2 * answer)
        );
        let mut expected = vec![1.0; answer];
        expected[answer - 1] = 0.5;
        assert_eq!(counts.accuracies(), expected);
    }
}
