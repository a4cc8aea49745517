//! Statistics over seeds: the mean and the half-width of its 95 % Student-t interval (the CGT
//! tables' unit is the seed), and the table cell that shows them.

/// Two-sided 95 % Student-t quantiles for 1..=10 degrees of freedom.
const T_975: [f64; 10] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
];

/// Mean of `values` and the half-width of its 95 % Student-t interval over seeds (`None` for a single
/// value; the normal 1.96 beyond 11 values). `None` for no values.
pub fn interval(values: &[f64]) -> Option<(f64, Option<f64>)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Some((mean, None));
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = T_975.get(n - 2).copied().unwrap_or(1.96);
    Some((mean, Some(t * (variance / n as f64).sqrt())))
}

/// A table cell: `mean ± half-width` over seeds (`scale` multiplies both, `digits` decimals).
pub fn cell(values: &[f64], scale: f64, digits: usize, suffix: &str) -> String {
    match interval(values) {
        None => "–".into(),
        Some((mean, None)) => format!("{:.digits$}{suffix}", mean * scale),
        Some((mean, Some(h))) => {
            format!("{:.digits$} ± {:.digits$}{suffix}", mean * scale, h * scale)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_is_student_t_over_seeds() {
        // Values 1, 2, 3: mean 2, sample sd 1, half-width 4.303 / sqrt(3) = 2.484. Tolerance
        // 1e-9: a few roundings of numbers near 1.
        let (mean, half) = interval(&[1.0, 2.0, 3.0]).unwrap();
        assert!((mean - 2.0).abs() < 1e-12);
        assert!((half.unwrap() - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(interval(&[5.0]), Some((5.0, None)));
        assert_eq!(interval(&[]), None);
        // 0.5, 0.7: mean 0.6, sd 0.1414, half-width 12.706 · 0.1414 / sqrt(2) = 1.2706.
        assert_eq!(cell(&[0.5, 0.7], 100.0, 1, " %"), "60.0 ± 127.1 %");
        assert_eq!(cell(&[], 1.0, 1, ""), "–");
    }
}
