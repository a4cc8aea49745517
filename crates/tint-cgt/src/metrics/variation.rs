//! Representation variation, paper eq. (4).

/// `1/|E2| sum_{s in E2} ||ybar_s - ybar_{s-1}||` with `ybar = (y - <y>) / sqrt(<||y - <y>||^2>)`, the
/// averages taken over `E1 + E2`.
///
/// `context` is row-major `[seq_length, d_y]` for one sequence; `first` (`E1`) and `second` (`E2`) are
/// position ranges; `second.start` must be at least 1.
pub fn representation_variation(
    context: &[f32],
    d_y: usize,
    first: std::ops::Range<usize>,
    second: std::ops::Range<usize>,
) -> f64 {
    let row = |s: usize| &context[s * d_y..(s + 1) * d_y];
    let positions: Vec<usize> = first.clone().chain(second.clone()).collect();
    let count = positions.len() as f64;
    let mut mean = vec![0.0f64; d_y];
    for &s in &positions {
        for (m, &v) in mean.iter_mut().zip(row(s)) {
            *m += v as f64 / count;
        }
    }
    let spread: f64 = positions
        .iter()
        .map(|&s| {
            row(s)
                .iter()
                .zip(&mean)
                .map(|(&v, m)| (v as f64 - m).powi(2))
                .sum::<f64>()
        })
        .sum::<f64>()
        / count;
    let scale = spread.sqrt().max(1e-12);
    let total: f64 = second
        .clone()
        .map(|s| {
            row(s)
                .iter()
                .zip(row(s - 1))
                .map(|(&a, &b)| ((a - b) as f64 / scale).powi(2))
                .sum::<f64>()
                .sqrt()
        })
        .sum();
    total / second.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Closed-form values in f64.
    const HAND_TOLERANCE: f64 = 1e-9;

    #[test]
    fn variation_on_hand_input() {
        // d_y = 1, y = (0, 2, 2, 2): E1 = 0..2, E2 = 2..4. Mean 1.5, spread = (2.25 + 3 * 0.25) / 4 = 0.75.
        // E2 steps: |2 - 2| and |2 - 2| -> 0.
        let constant_tail = [0.0, 2.0, 2.0, 2.0];
        assert!(representation_variation(&constant_tail, 1, 0..2, 2..4).abs() < HAND_TOLERANCE);
        // y = (0, 0, 1, 3): mean 1, spread (1 + 1 + 0 + 4) / 4 = 1.5; steps 1 and 2 -> (3 / sqrt 1.5) / 2.
        let moving = [0.0, 0.0, 1.0, 3.0];
        let expected = 3.0 / 1.5f64.sqrt() / 2.0;
        assert!(
            (representation_variation(&moving, 1, 0..2, 2..4) - expected).abs() < HAND_TOLERANCE
        );
    }
}
