//! The per-character breakdown of the in-context accuracy agrees with the overall accuracies: every
//! answer has the same `d + 3` characters (sign and `d + 2` digits), so the overall accuracy is the
//! mean of the per-character ones.

use burn::backend::Flex;
use tint_cgt::data::{ArithmeticConfig, ArithmeticVocab};
use tint_cgt::metrics::evaluate_icl;
use tint_cgt::{CgtConfig, CgtModel};

/// Sums of at most a few hundred hit ratios in f64.
const MEAN_TOLERANCE: f64 = 1e-12;

#[test]
fn the_accuracy_is_the_mean_of_the_per_character_accuracies() {
    let device = Default::default();
    let data = ArithmeticConfig {
        n_tasks: 2,
        n_examples: 3,
        digits: 2,
        batch_size: 4,
        seed: 11,
    };
    for guided in [false, true] {
        let config = CgtConfig::new(ArithmeticVocab::SIZE, data.sequence_length(), 2, 16, 2)
            .with_d_y(8)
            .with_readout_layer(1)
            .with_rank(1)
            .with_n_templates(2);
        let config = if guided { config } else { config.baseline() };
        let model = CgtModel::<Flex>::new(&config, &device).unwrap();
        let evaluation = evaluate_icl(&model, &data, 2, &device).unwrap();
        for (overall, by_character) in [
            (
                evaluation.dynamic_accuracy,
                &evaluation.dynamic_by_character,
            ),
            (
                evaluation.no_example_accuracy,
                &evaluation.no_example_by_character,
            ),
        ] {
            assert_eq!(by_character.len(), data.digits + 3);
            assert!(by_character.iter().all(|a| (0.0..=1.0).contains(a)));
            let mean = by_character.iter().sum::<f64>() / by_character.len() as f64;
            assert!(
                (mean - overall).abs() < MEAN_TOLERANCE,
                "{mean} vs {overall} ({by_character:?})"
            );
        }
    }
}
