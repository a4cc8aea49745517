//! Seeded, streaming data generators (no files): arithmetic in-context learning, linear regression and
//! text mixtures. Every generator produces a [`HostBatch`] deterministically from `(seed, step)`, so a
//! resumed run sees exactly the batches it would have seen.

pub mod arithmetic;
pub mod batch;
pub mod linreg;
pub mod text;

pub use arithmetic::{
    ArithmeticConfig, ArithmeticSequence, ArithmeticVocab, ExampleSpan, TaskSpan,
};
pub use batch::{BatchSource, HostBatch, HostInput, HostTargets};
pub use linreg::{LinearRegressionConfig, PairCurriculum, RegressionProblem};
pub use text::{TextCorpus, TextMixture};

use rand::rngs::StdRng;
use rand::SeedableRng;

/// A random generator for batch `step` of stream `seed` (independent streams per step).
pub fn step_rng(seed: u64, step: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17))
}

/// A standard normal sample (Box-Muller), so no extra distribution crate is needed.
pub fn standard_normal(rng: &mut impl rand::Rng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}
