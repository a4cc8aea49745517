//! The conventions that make CGT runs reproducible and comparable: how a seed shifts a preset, the
//! model initialisation seed, the held-out evaluation streams (the same for every seed), the
//! freeze points of the regression evaluation and the default run directory.

use std::path::PathBuf;

use tint_cgt::data::{ArithmeticConfig, LinearRegressionConfig};
use tint_cgt::presets::{DataPreset, ExperimentPreset};

/// Seed `s` shifts the training stream's seed by `SEED_STRIDE * s`.
pub const SEED_STRIDE: u64 = 7919;

/// The backend seed of the initial weights of seed `s`: `MODEL_SEED_BASE + s` (the same initial
/// weights for a (seed, variant) pair on every invocation).
pub const MODEL_SEED_BASE: u64 = 1_000;

/// Held-out evaluation streams use the preset's data seed plus this offset.
pub const EVAL_SEED_OFFSET: u64 = 1000;

/// Text presets evaluate on batches `TEXT_EVAL_FIRST_BATCH + i` of the training stream (never
/// reached by training) with auxiliary draws from stream [`TEXT_EVAL_RNG_STREAM`].
pub const TEXT_EVAL_FIRST_BATCH: u64 = 1_000_000;

/// The random stream of the text evaluation's auxiliary draws.
pub const TEXT_EVAL_RNG_STREAM: u64 = 7;

/// The preset of one seed: seed 0 is the preset itself; seed `s` shifts the training stream's seed by
/// `SEED_STRIDE * s` and the auxiliary draws' by `s` (evaluation streams derive from the preset's seed).
pub fn preset_for_seed(preset: &ExperimentPreset, seed: u64) -> ExperimentPreset {
    let mut seeded = preset.clone();
    match &mut seeded.data {
        DataPreset::Arithmetic(data) => data.seed += SEED_STRIDE * seed,
        DataPreset::LinearRegression(data) => data.seed += SEED_STRIDE * seed,
        DataPreset::TextMixture { .. } => {}
    }
    seeded.training.seed += seed;
    seeded
}

/// The default run directory: depends on everything that changes the schedule or the data stream.
pub fn default_run_dir(preset: &ExperimentPreset) -> PathBuf {
    PathBuf::from("target/cgt-runs").join(format!(
        "{}-{}steps-batch{}",
        preset.name,
        preset.training.steps,
        preset.data.batch_size()
    ))
}

/// The held-out evaluation stream of an arithmetic preset (its final table and its learning curve).
pub fn icl_eval_data(data: &ArithmeticConfig) -> ArithmeticConfig {
    ArithmeticConfig {
        seed: data.seed + EVAL_SEED_OFFSET,
        ..data.clone()
    }
}

/// The held-out evaluation stream of a regression preset (no curriculum: every sequence has all
/// pairs).
pub fn regression_eval_data(data: &LinearRegressionConfig) -> LinearRegressionConfig {
    LinearRegressionConfig {
        seed: data.seed + EVAL_SEED_OFFSET,
        ..data.without_curriculum()
    }
}

/// The prompt sizes `k` after which `y` is frozen in the regression evaluation (for 20 pairs: 5, 10
/// and 12, the last being the "once 12 pairs are shown" point of the CPU preset's target).
pub fn freeze_points(n_pairs: usize) -> [usize; 3] {
    [n_pairs / 4, n_pairs / 2, 3 * n_pairs / 5]
}
