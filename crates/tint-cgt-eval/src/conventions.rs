//! The conventions that make CGT runs reproducible and comparable: how a seed shifts a preset, the
//! model initialisation seed, the held-out evaluation streams (the same for every seed: the
//! validation stream that every run is evaluated on, and a test stream kept for confirming a result
//! after choices were made on the validation stream), the freeze points of the regression evaluation
//! and the default run directory.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use tint_cgt::data::{ArithmeticConfig, LinearRegressionConfig};
use tint_cgt::presets::{DataPreset, ExperimentPreset};

/// Seed `s` shifts the training stream's seed by `SEED_STRIDE * s`.
pub const SEED_STRIDE: u64 = 7919;

/// The backend seed of the initial weights of seed `s`: `MODEL_SEED_BASE + s` (the same initial
/// weights for a (seed, variant) pair on every invocation).
pub const MODEL_SEED_BASE: u64 = 1_000;

/// The validation stream uses the preset's data seed plus this offset.
pub const EVAL_SEED_OFFSET: u64 = 1000;

/// The test stream uses the preset's data seed plus this offset.
pub const TEST_SEED_OFFSET: u64 = 2000;

/// The data seed of the text streams: seed `s` trains on mixtures of stream
/// `TEXT_DATA_SEED + SEED_STRIDE * s` of the training documents; every run is evaluated on stream
/// `TEXT_DATA_SEED + offset` of the held-out documents ([`EvalStream::seed_offset`]).
pub const TEXT_DATA_SEED: u64 = 1;

/// The training stream's seed of text seed `seed`.
pub fn text_train_seed(seed: u64) -> u64 {
    TEXT_DATA_SEED + SEED_STRIDE * seed
}

/// The held-out stream's seed of the text evaluation on `stream`.
pub fn text_eval_seed(stream: EvalStream) -> u64 {
    TEXT_DATA_SEED + stream.seed_offset()
}

/// The position reading (paper Fig. 6) draws its continuations from the held-out stream's seed
/// plus this offset, so that they are not the mixtures' draws.
pub const TEXT_POSITION_SEED_OFFSET: u64 = 500;

/// The prefix of the position reading: bytes of a held-out document that set the frozen `y`, as
/// many as the middle of `text-small`'s cut range (48–80; the paper: about 100 tokens, the first
/// sentence).
pub const TEXT_POSITION_PREFIX: usize = 64;

/// The held-out sequences a run is evaluated on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvalStream {
    /// The sequences of every table and learning curve (data seed + [`EVAL_SEED_OFFSET`]). Choices
    /// such as a preset's step count have been made on it.
    #[default]
    Validation,
    /// Sequences no choice was made on (data seed + [`TEST_SEED_OFFSET`]), for confirming a result
    /// once (`--test-stream`).
    Test,
}

impl EvalStream {
    /// The offset added to the preset's data seed.
    pub fn seed_offset(self) -> u64 {
        match self {
            Self::Validation => EVAL_SEED_OFFSET,
            Self::Test => TEST_SEED_OFFSET,
        }
    }

    /// The per-run file of the evaluation on this stream, beside the checkpoint.
    pub fn evaluation_file(self) -> &'static str {
        match self {
            Self::Validation => "evaluation.json",
            Self::Test => "evaluation-test.json",
        }
    }

    /// The stem of the report section's key (`cgt:<stem>`) and of the charts' names
    /// (`<stem>-loss.svg`, …) of the section `name` (the preset's, or `--section`): the name itself
    /// for validation (so that existing sections and charts keep their names), `<name>-test` for
    /// the test stream.
    pub fn stem(self, name: &str) -> String {
        match self {
            Self::Validation => name.to_string(),
            Self::Test => format!("{name}-test"),
        }
    }
}

/// The random stream of the text evaluation's auxiliary draws.
pub const TEXT_EVAL_RNG_STREAM: u64 = 7;

/// The preset of one seed: seed 0 is the preset itself; seed `s` shifts the training stream's seed by
/// `SEED_STRIDE * s` and the auxiliary draws' by `s` (evaluation streams derive from the preset's seed;
/// a text preset's streams are seeded by [`text_train_seed`] and [`text_eval_seed`]).
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
pub fn icl_eval_data(data: &ArithmeticConfig, stream: EvalStream) -> ArithmeticConfig {
    ArithmeticConfig {
        seed: data.seed + stream.seed_offset(),
        ..data.clone()
    }
}

/// The held-out evaluation stream of a regression preset (no curriculum: every sequence has all
/// pairs).
pub fn regression_eval_data(
    data: &LinearRegressionConfig,
    stream: EvalStream,
) -> LinearRegressionConfig {
    LinearRegressionConfig {
        seed: data.seed + stream.seed_offset(),
        ..data.without_curriculum()
    }
}

/// The prompt sizes `k` after which `y` is frozen in the regression evaluation (for 20 pairs: 5, 10
/// and 12, the last being the "once 12 pairs are shown" point of the CPU preset's target).
pub fn freeze_points(n_pairs: usize) -> [usize; 3] {
    [n_pairs / 4, n_pairs / 2, 3 * n_pairs / 5]
}
