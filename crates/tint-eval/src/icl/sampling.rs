//! Seeded choice of the k demonstrations from the experiments' one generator ([`tint_lab::rng`]), so that
//! runs are reproducible across platforms.

use super::task::Example;
use crate::EvalError;
use tint_lab::rng;

/// Draws `k` demonstrations from `pool` with `seed`.
///
/// With `balanced`, every class gets `k / n_classes` of them (k must be a multiple of the class count,
/// as in the official code's `unbiased` sampling); otherwise the first `k` of a seeded permutation.
/// The result is in the permuted order, which is also the order of the demonstrations in a prompt.
///
/// # Errors
///
/// [`EvalError::InvalidSetting`] when the pool is too small or `k` does not divide evenly.
pub fn sample_demonstrations(
    pool: &[Example],
    k: usize,
    n_classes: usize,
    balanced: bool,
    seed: u64,
) -> Result<Vec<Example>, EvalError> {
    let mut order: Vec<usize> = (0..pool.len()).collect();
    rng::shuffle(&mut rng::seeded(seed), &mut order);
    if !balanced {
        if k > pool.len() {
            return Err(EvalError::InvalidSetting {
                name: "--shots",
                value: k.to_string(),
                rule: format!("the demonstration pool has only {} examples", pool.len()).into(),
            });
        }
        return Ok(order[..k].iter().map(|&i| pool[i].clone()).collect());
    }
    if n_classes == 0 || !k.is_multiple_of(n_classes) {
        return Err(EvalError::InvalidSetting {
            name: "--shots",
            value: k.to_string(),
            rule: format!("balanced sampling needs a multiple of the {n_classes} classes").into(),
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
        return Err(EvalError::InvalidSetting {
            name: "--shots",
            value: k.to_string(),
            rule: format!("some class has fewer than {per_class} examples in the pool").into(),
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
