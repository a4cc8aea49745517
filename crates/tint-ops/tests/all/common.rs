//! Helpers shared by the tint-ops integration tests.

#![allow(dead_code)] // each test file uses a subset

use rand::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;

/// Deterministic random numbers (rand's SplitMix64 + Box–Muller), so failures are reproducible.
pub(crate) struct Rng(SplitMix64);

impl Rng {
    /// A generator whose state starts at `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self(SplitMix64::seed_from_u64(seed))
    }

    /// Uniform in `(0, 1)`.
    pub(crate) fn uniform(&mut self) -> f64 {
        ((self.0.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Normal with mean 0 and standard deviation `std`.
    pub(crate) fn normal(&mut self, std: f64) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        std * (-2.0 * u1.ln()).sqrt() * (2.0 * core::f64::consts::PI * u2).cos()
    }

    /// Uniform integer in `0..n`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((self.uniform() * n as f64) as usize).min(n - 1)
    }

    /// `n` normals with standard deviation `std`.
    pub(crate) fn normals(&mut self, n: usize, std: f64) -> Vec<f64> {
        (0..n).map(|_| self.normal(std)).collect()
    }
}
