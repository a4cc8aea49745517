//! Turning label-word log-probabilities into predictions, with and without calibration (paper
//! appendix L): `argmax_c P(c | input, prompt)` or `argmax_c P(c | input, prompt) / P(c | prompt)`.
//!
//! Everything works on log-probabilities, so the ratio is a difference.

/// Index of the largest score; the first one on ties. `None` for an empty or non-finite slice.
pub fn argmax(scores: &[f64]) -> Option<usize> {
    if scores.is_empty() || scores.iter().any(|s| !s.is_finite()) {
        return None;
    }
    let mut best = 0;
    for (i, &s) in scores.iter().enumerate() {
        if s > scores[best] {
            best = i;
        }
    }
    Some(best)
}

/// Calibrated log-scores `log P(c | input, prompt) - log P(c | prompt)`.
///
/// `conditional[c]` and `prior[c]` are the log-probabilities of label word `c` after the full prompt
/// and after the prompt alone (same length).
pub fn calibrated_scores(conditional: &[f64], prior: &[f64]) -> Vec<f64> {
    conditional
        .iter()
        .zip(prior)
        .map(|(&cond, &base)| cond - base)
        .collect()
}

/// Uncalibrated prediction: `argmax_c log P(c | input, prompt)`.
pub fn predict(conditional: &[f64]) -> Option<usize> {
    argmax(conditional)
}

/// Calibrated prediction: `argmax_c P(c | input, prompt) / P(c | prompt)`.
pub fn predict_calibrated(conditional: &[f64], prior: &[f64]) -> Option<usize> {
    if conditional.len() != prior.len() {
        return None;
    }
    argmax(&calibrated_scores(conditional, prior))
}

/// Fraction of `predicted[i] == gold[i]` (0 for empty input).
pub fn accuracy(predicted: &[usize], gold: &[usize]) -> f64 {
    if predicted.is_empty() {
        return 0.0;
    }
    let correct = predicted.iter().zip(gold).filter(|(p, g)| p == g).count();
    correct as f64 / predicted.len() as f64
}

/// Mean and population standard deviation (as `numpy.std`, which the paper's tables report over
/// seeds). `(0, 0)` for an empty slice.
pub fn mean_std(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}
