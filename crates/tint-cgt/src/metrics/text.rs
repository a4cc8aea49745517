//! The specialisation reading on text (paper §4.4, Fig. 6): the cross-entropy at each position of a
//! continuation, for the dynamic model (`y` computed along the continuation, which alone is in
//! context) and for the specialised model (`y` frozen at the end of a prefix of the same document
//! that is not in context). The paper found the specialised model lower at first and the dynamic one
//! catching up after about 200 tokens.

use burn::tensor::activation::log_softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::{frozen_context, host};
use crate::data::{step_rng, TextMixture};
use crate::embedding::CgtInput;
use crate::error::{CgtError, Result};
use crate::model::CgtModel;

/// Mean cross-entropy (nats per byte) at every position of the continuation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PositionLoss {
    /// Bytes of the prefix that set the frozen `y` (not in context of either pass).
    pub prefix: usize,
    /// Continuations averaged.
    pub samples: usize,
    /// Entry `t`: mean cross-entropy of predicting byte `t + 1` of the continuation from bytes
    /// `0..=t`, with dynamic `y` (or the plain model's, for a baseline).
    pub dynamic: Vec<f64>,
    /// The same with `y` frozen at the prefix's last byte (guided models only).
    pub specialised: Option<Vec<f64>>,
}

/// The per-position cross-entropy of a batch, summed over the batch.
///
/// # Shapes
/// - `logits`: `[batch_size, seq_length, vocab]`
/// - `targets`: `[batch_size, seq_length]`
/// - output: `seq_length` sums
fn summed_position_loss<B: Backend>(logits: Tensor<B, 3>, targets: Tensor<B, 2, Int>) -> Vec<f64> {
    let [batch_size, seq_length, _] = logits.dims();
    let picked = log_softmax(logits, 2)
        .gather(2, targets.unsqueeze_dim::<3>(2))
        .reshape([batch_size, seq_length]);
    host(picked.sum_dim(0).neg())
        .into_iter()
        .map(f64::from)
        .collect()
}

/// The per-position cross-entropy of `model` on `batches × batch_size` continuations drawn from
/// `source` (its documents, its sequence length; batch `i` from `step_rng(seed, i)`), each after a
/// `prefix`-byte prefix of the same document.
///
/// # Errors
/// `prefix` is 0 or longer than the model's sequence limit, or a forward fails.
pub fn evaluate_position_loss<B: Backend>(
    model: &CgtModel<B>,
    source: &TextMixture,
    prefix: usize,
    batches: usize,
    seed: u64,
    device: &B::Device,
) -> Result<PositionLoss> {
    let seq_length = source.seq_length;
    if prefix == 0 || prefix > model.max_seq_len || seq_length > model.max_seq_len {
        return Err(CgtError::InvalidConfig(format!(
            "the position reading needs 0 < prefix ({prefix}) and the continuation \
             ({seq_length}) within the model's {} positions",
            model.max_seq_len
        )));
    }
    let batch_size = source.batch_size;
    let tensor = |bytes: Vec<i64>, length: usize| {
        Tensor::<B, 2, Int>::from_data(TensorData::new(bytes, [batch_size, length]), device)
    };
    let mut dynamic = vec![0.0; seq_length];
    let mut specialised = model.is_guided().then(|| vec![0.0; seq_length]);
    for batch in 0..batches {
        let mut rng = step_rng(seed, batch as u64);
        let samples: Vec<Vec<u8>> = (0..batch_size)
            .map(|_| source.continuation(prefix, &mut rng))
            .collect();
        let column = |from: usize, to: usize| -> Vec<i64> {
            samples
                .iter()
                .flat_map(|s| s[from..to].iter().map(|&b| b as i64))
                .collect()
        };
        let input = CgtInput::Tokens(tensor(column(prefix, prefix + seq_length), seq_length));
        let targets = tensor(column(prefix + 1, prefix + seq_length + 1), seq_length);
        let add = |sums: &mut Vec<f64>, logits| {
            for (sum, value) in sums
                .iter_mut()
                .zip(summed_position_loss(logits, targets.clone()))
            {
                *sum += value;
            }
        };
        match specialised.as_mut() {
            None => add(&mut dynamic, model.forward(&input)?.logits),
            Some(frozen_sums) => {
                let prompt = CgtInput::Tokens(tensor(column(0, prefix), prefix));
                let context = model.context(&prompt)?.mean;
                let frozen = frozen_context(context, &vec![prefix - 1; batch_size]);
                let lower = model.lower_pass(&input)?;
                add(
                    &mut dynamic,
                    model.upper_pass(lower.x.clone(), lower.context.mean)?,
                );
                add(frozen_sums, model.upper_pass(lower.x, frozen)?);
            }
        }
    }
    let samples = batches * batch_size;
    let mean = |sums: Vec<f64>| sums.into_iter().map(|s| s / samples as f64).collect();
    Ok(PositionLoss {
        prefix,
        samples,
        dynamic: mean(dynamic),
        specialised: specialised.map(mean),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CgtConfig;
    use crate::loss::cross_entropy;
    use burn::backend::Flex;

    type B = Flex;

    fn source() -> TextMixture {
        let documents = [
            "the quick brown fox jumps over the lazy dog. ",
            "pack my box with five dozen liquor jugs! ",
        ]
        .iter()
        .map(|d| d.repeat(4).into_bytes())
        .collect();
        TextMixture::from_documents(documents, 12, 3, 6, 3, 1).unwrap()
    }

    /// The position means average to the masked cross-entropy of the same continuations (the loss
    /// the training uses), and the frozen pass equals `forward_x_path` with that frozen `y`.
    #[test]
    fn position_losses_agree_with_the_cross_entropy_and_the_frozen_x_path() {
        let device = Default::default();
        let config = CgtConfig::new(256, 16, 2, 16, 2)
            .with_d_y(8)
            .with_n_heads_y(1)
            .with_readout_layer(1)
            .with_rank(2)
            .with_n_templates(2);
        B::seed(&device, 4);
        let model = CgtModel::<B>::new(&config, &device).unwrap();
        let source = source();
        let (prefix, seed) = (5, 9);
        let reading = evaluate_position_loss(&model, &source, prefix, 1, seed, &device).unwrap();
        assert_eq!((reading.samples, reading.dynamic.len()), (3, 12));

        let mut rng = step_rng(seed, 0);
        let samples: Vec<Vec<u8>> = (0..3)
            .map(|_| source.continuation(prefix, &mut rng))
            .collect();
        let ids = |from: usize, to: usize| {
            let values: Vec<i64> = samples
                .iter()
                .flat_map(|s| s[from..to].iter().map(|&b| b as i64))
                .collect();
            Tensor::<B, 2, Int>::from_data(TensorData::new(values, [3, to - from]), &device)
        };
        let input = CgtInput::Tokens(ids(prefix, prefix + 12));
        let targets = ids(prefix + 1, prefix + 13);
        let ones = Tensor::<B, 2>::ones([3, 12], &device);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        // f32 sums of 12 x 3 log-probabilities of order 5.5: agreement to 1e-5 relative.
        let tolerance = 1e-4;
        let dynamic = model.forward(&input).unwrap().logits;
        let expected: f64 = cross_entropy(dynamic, targets.clone(), ones.clone())
            .into_scalar()
            .into();
        assert!((mean(&reading.dynamic) - expected).abs() < tolerance);

        let context = model
            .context(&CgtInput::Tokens(ids(0, prefix)))
            .unwrap()
            .mean;
        let frozen = frozen_context(context, &[prefix - 1; 3]);
        let logits = model.forward_x_path(&input, Some(frozen), None).unwrap();
        let expected: f64 = cross_entropy(logits, targets, ones).into_scalar().into();
        let specialised = reading.specialised.unwrap();
        assert!((mean(&specialised) - expected).abs() < tolerance);
        assert!((mean(&specialised) - mean(&reading.dynamic)).abs() > 1e-7);
    }

    #[test]
    fn a_prefix_outside_the_positions_is_refused() {
        let device = Default::default();
        let config = CgtConfig::new(256, 16, 1, 16, 2);
        let model = CgtModel::<B>::new(&config, &device).unwrap();
        let message = evaluate_position_loss(&model, &source(), 0, 1, 1, &device)
            .unwrap_err()
            .to_string();
        assert!(message.contains("prefix (0)"), "{message}");
        let reading = evaluate_position_loss(&model, &source(), 4, 2, 1, &device).unwrap();
        assert!(reading.specialised.is_none() && reading.samples == 6);
    }
}
