//! The smallest trainable setup shared by the training tests: a 4-pair linear-regression stream and
//! a 2-layer CGT over it.

use tint_cgt::data::LinearRegressionConfig;
use tint_cgt::objective::ObjectiveConfig;
use tint_cgt::train::TrainingConfig;
use tint_cgt::{CgtConfig, InputKind};

/// Batches of 2 sequences of 4 pairs `x ∈ R^3`, `y ∈ R^1` (stream seed 1, no curriculum).
pub(crate) fn tiny_regression_data() -> LinearRegressionConfig {
    LinearRegressionConfig {
        d_in: 3,
        d_out: 1,
        n_pairs: 4,
        noise: 0.1,
        batch_size: 2,
        seed: 1,
        curriculum: None,
    }
}

/// A 2-layer CGT for [`tiny_regression_data`]: `d_x = 8` (one head), `d_y = 4`, readout layer 1,
/// rank 1, 2 templates, inputs through a learned map of width 4.
pub(crate) fn tiny_regression_model() -> CgtConfig {
    CgtConfig::new(1, 8, 2, 8, 1)
        .with_input(InputKind::Vectors(4))
        .with_d_y(4)
        .with_readout_layer(1)
        .with_rank(1)
        .with_n_templates(2)
}

/// `steps` Adam steps for the tiny setup: lr 3e-3 after `warmup_steps` of warm-up, cosine to 3e-4,
/// gradient norm clipped at 1, the default objective (the baseline's), no periodic checkpoint.
pub(crate) fn tiny_training(steps: usize, warmup_steps: usize) -> TrainingConfig {
    TrainingConfig {
        steps,
        learning_rate: 3e-3,
        min_learning_rate: 3e-4,
        warmup_steps,
        grad_clip_norm: Some(1.0),
        objective: ObjectiveConfig::default(),
        seed: 0,
        checkpoint_every: 0,
    }
}
