//! Seeded choice of the k demonstrations: a small deterministic generator (SplitMix64), so that runs
//! are reproducible across platforms without a random-number dependency.

use super::error::IclError;
use super::task::Example;

/// SplitMix64 (Steele, Lea & Flood 2014): 64-bit state, full period, good enough to shuffle data.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index in `0..n` (`n > 0`), by rejection so there is no modulo bias.
    pub fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return (x % n) as usize;
            }
        }
    }

    /// Fisher–Yates shuffle in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// Draws `k` demonstrations from `pool` with `seed`.
///
/// With `balanced`, every class gets `k / n_classes` of them (k must be a multiple of the class count,
/// as in the official code's `unbiased` sampling); otherwise the first `k` of a seeded permutation.
/// The result is in the permuted order, which is also the order of the demonstrations in a prompt.
///
/// # Errors
///
/// [`IclError::InvalidSetting`] when the pool is too small or `k` does not divide evenly.
pub fn sample_demonstrations(
    pool: &[Example],
    k: usize,
    n_classes: usize,
    balanced: bool,
    seed: u64,
) -> Result<Vec<Example>, IclError> {
    let mut order: Vec<usize> = (0..pool.len()).collect();
    SplitMix64::new(seed).shuffle(&mut order);
    if !balanced {
        if k > pool.len() {
            return Err(IclError::InvalidSetting {
                name: "k",
                value: k.to_string(),
                rule: format!("the demonstration pool has only {} examples", pool.len()),
            });
        }
        return Ok(order[..k].iter().map(|&i| pool[i].clone()).collect());
    }
    if n_classes == 0 || !k.is_multiple_of(n_classes) {
        return Err(IclError::InvalidSetting {
            name: "k",
            value: k.to_string(),
            rule: format!("balanced sampling needs a multiple of the {n_classes} classes"),
        });
    }
    let per_class = k / n_classes;
    let mut left = vec![per_class; n_classes];
    let mut chosen = Vec::with_capacity(k);
    for i in order {
        let label = pool[i].label;
        if label < n_classes && left[label] > 0 {
            left[label] -= 1;
            chosen.push(pool[i].clone());
            if chosen.len() == k {
                break;
            }
        }
    }
    if chosen.len() < k {
        return Err(IclError::InvalidSetting {
            name: "k",
            value: k.to_string(),
            rule: format!("some class has fewer than {per_class} examples in the pool"),
        });
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Vec<Example> {
        (0..20)
            .map(|i| Example {
                text: format!("t{i}"),
                label: usize::from(i >= 15),
            })
            .collect()
    }

    #[test]
    fn shuffle_is_a_seeded_permutation() {
        let mut a: Vec<usize> = (0..50).collect();
        let mut b = a.clone();
        SplitMix64::new(3).shuffle(&mut a);
        SplitMix64::new(3).shuffle(&mut b);
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_ne!(a, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn balanced_sampling_gives_equal_classes() {
        let demos = sample_demonstrations(&pool(), 8, 2, true, 1).unwrap();
        assert_eq!(demos.iter().filter(|d| d.label == 1).count(), 4);
        assert_eq!(demos.iter().filter(|d| d.label == 0).count(), 4);
        // Only 5 examples of class 1 exist.
        assert!(sample_demonstrations(&pool(), 12, 2, true, 1).is_err());
        assert!(sample_demonstrations(&pool(), 3, 2, true, 1).is_err());
    }

    #[test]
    fn seeds_choose_different_sets() {
        let a = sample_demonstrations(&pool(), 6, 2, false, 0).unwrap();
        let b = sample_demonstrations(&pool(), 6, 2, false, 1).unwrap();
        assert_ne!(a, b);
        assert!(sample_demonstrations(&pool(), 21, 2, false, 0).is_err());
    }
}
