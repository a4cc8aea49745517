//! Helpers shared by the tint-ops integration tests.

#![allow(dead_code)] // each test file uses a subset

/// Deterministic random numbers (xorshift64* + Box–Muller), so failures are reproducible.
pub(crate) struct Rng(pub u64);

impl Rng {
    /// Uniform in `(0, 1)`.
    pub(crate) fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
        (bits as f64 + 0.5) / (1u64 << 53) as f64
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
