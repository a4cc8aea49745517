//! The loss gradient of docs/construction.md §7 (`loss::loss_gradient`), every kind, against plain loops.
//! The simulator and the functional reference share this function, so their agreement
//! (simulator.rs) cannot catch a wrong formula here.
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

mod common;

use burn::tensor::{DType, Int, Tensor, TensorData};
use common::*;
use tint_sim::loss::loss_gradient;
use tint_sim::LossGradientKind;

/// f64 sums of at most 7 products of O(1) numbers: round-off ~1e-15; 1e-12 leaves room and still
/// fails on any wrong term (entries are O(0.1–1)).
const LOSS_GRADIENT_TOL: f64 = 1e-12;

const B: usize = 2;
const T: usize = 4;
const D: usize = 3;
const V: usize = 7;

fn tensor<const N: usize>(values: &[f64], shape: [usize; N]) -> Tensor<TestBackend, N> {
    let device = Default::default();
    Tensor::<TestBackend, N>::from_data(
        TensorData::new(values.to_vec(), shape),
        (&device, DType::F64),
    )
}

/// Plain-loop `(pred_t - E[id_{t+1}]) * next_target_t` (zero target at the last position).
fn expected(kind: LossGradientKind, h: &[f64], e: &[f64], ids: &[i64], mask: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; B * T * D];
    for b in 0..B {
        for t in 0..T {
            let h_bt = &h[(b * T + t) * D..(b * T + t + 1) * D];
            let logits: Vec<f64> = (0..V)
                .map(|v| (0..D).map(|k| e[v * D + k] * h_bt[k]).sum())
                .collect();
            let weights: Vec<f64> = match kind {
                LossGradientKind::Prediction => {
                    let max = logits.iter().cloned().fold(f64::MIN, f64::max);
                    let exp: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
                    let sum: f64 = exp.iter().sum();
                    exp.iter().map(|x| x / sum).collect()
                }
                LossGradientKind::Quadratic => logits,
                LossGradientKind::MeanEmbedding => vec![1.0 / V as f64; V],
            };
            for k in 0..D {
                let pred: f64 = (0..V).map(|v| weights[v] * e[v * D + k]).sum();
                let target = if t + 1 < T {
                    e[ids[b * T + t + 1] as usize * D + k]
                } else {
                    0.0
                };
                out[(b * T + t) * D + k] = (pred - target) * mask[b * T + t];
            }
        }
    }
    out
}

#[test]
fn every_loss_gradient_kind_matches_plain_loops() {
    let mut rng = SeededRng::new(11);
    let h: Vec<f64> = (0..B * T * D).map(|_| rng.normal()).collect();
    let e: Vec<f64> = (0..V * D).map(|_| 0.5 * rng.normal()).collect();
    let ids: Vec<i64> = (0..B * T)
        .map(|_| (rng.next_u64() % V as u64) as i64)
        .collect();
    // Targets 1..3 of sequence 0 and 1..2 of sequence 1 are training targets; the last row is
    // set to 1 in sequence 0 to check that its zero target (no next token) is used.
    let mask = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0];
    let ids_t = Tensor::<TestBackend, 2, Int>::from_data(
        TensorData::new(ids.clone(), [B, T]),
        &Default::default(),
    );
    for kind in [
        LossGradientKind::Prediction,
        LossGradientKind::Quadratic,
        LossGradientKind::MeanEmbedding,
    ] {
        let got = loss_gradient(
            tensor(&h, [B, T, D]),
            &tensor(&e, [V, D]),
            &ids_t,
            &tensor(&mask, [B, T, 1]),
            kind,
        );
        assert_eq!(got.dtype(), DType::F64);
        let want = TensorData::new(expected(kind, &h, &e, &ids, &mask), [B, T, D]);
        let err = max_abs_diff(&got.into_data(), &want);
        eprintln!("{kind:?}: loss gradient vs plain loops {err:e}");
        assert!(err < LOSS_GRADIENT_TOL, "{kind:?}: differs by {err}");
    }
}
