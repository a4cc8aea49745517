//! Theorem C.2 (paper appendix C) demonstrated numerically with [`TintAttention`]: a softmax
//! attention with `2H` heads on `2 Ds`-wide rows plus one extra token `u` approximates a bounded
//! linear attention with `H` heads, and the error shrinks as `ε` shrinks.
//!
//! # The construction (proof of Theorem C.2, made concrete)
//!
//! Linear attention `L` (Definition C.1, `f_attn` linear, `H` heads of size `d`, no mask): random
//! content projections (dimension-wise then split-wise), key/value position terms with random
//! per-head `λ^K`, `λ^V`, random dimension-wise `c_proj`. One restriction: the last coordinate of
//! every query/key head is unused (its split-wise row and column are 0, no query position term).
//! The proof needs a query component that is the same for every token so that the score with `u`
//! is the constant `-2 log ε`; with `2H` heads on `2 Ds` the head size stays `d`, so that
//! component has to come from a coordinate `L` leaves free (the paper leaves this implicit).
//!
//! Softmax attention `S` on rows `[ē_1 … ē_T, u]`, `ē_t = [ê_t, 0]`, scores `softmax(ε · q·k)`:
//! * heads `h < H`: `q = q^L_h + e_{d-1}` (position term, token rows), `k = k^L_h`
//!   for tokens and `k_u = (−2 log ε / ε) e_{d-1}` (read from the second half of `u`), so the
//!   scores are `ε a_{t,j}` and `−2 log ε` for `u`; values `ε^{-3} v^L_h`, 0 for `u`;
//! * heads `H + h`: `q = 0` (uniform `1/(T+1)` over all `T + 1` keys), values `v^L_h`;
//! * `W_O` (folded into `S`'s dimension-wise `c_proj`): `L.c_proj(head_h − (T+1)/ε · head_{H+h})`.
//!
//! Lemma C.3: `ε^{-3} e^{ε a_j} / (Σ_j' e^{ε a_j'} + ε^{-2}) = ε^{-1} + a_j + ε (a_j²/2 − T) + O(ε²)`,
//! and the uniform heads remove the `ε^{-1} Σ_j v_j` term exactly, so
//! `W_O ẽ^S_t − ẽ^L_t = ε Σ_j (a_{t,j}²/2 − T) v_j + O(ε²)`: first order in `ε` (the theorem states
//! the weaker `O(√ε)`).
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use burn::{
    backend::Flex,
    tensor::{DType, Device, ElementConversion, Int, Tensor, TensorData},
};
use tint_ops::{
    attention::{
        AttentionMasks, AttentionRows, ContentProjection, PositionProjectionBuilder, Qkv, Scoring,
        TintAttention,
    },
    hsplit::{DimWiseBuilder, SplitWiseBuilder},
};

use crate::common::Rng;

type B = Flex;

/// Aux heads `H` of the linear attention.
const N_HEADS: usize = 2;
/// Head size `d` (the last coordinate of q/k heads is the free one).
const HEAD_DIM: usize = 4;
/// Tokens `T`.
const SEQ_LENGTH: usize = 6;
const BATCH: usize = 2;
/// The ε values of the curve. At 1e-1 the size of Lemma C.3's first-order term, `ε (a²/2 + T)`, is
/// O(1), so that point lies outside the asymptotic regime; the rate is checked from 1e-2 on.
const EPSILONS: [f64; 6] = [1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6];
/// From ε = 1e-2 on, one decade of ε must shrink the error by at least this factor. The error is
/// `ε C + O(ε²)` (module docs), so the ratio tends to 10; second-order terms are ≤ ε·(|a| + T) ≈ 10%
/// of the first-order one at ε = 1e-2, and f64 round-off (≈ 1e-16 · ε^-1 · T |v| ≈ 1e-9 at 1e-6)
/// stays far below the truncation error (≈ 1e-5 at 1e-6). The paper's `O(√ε)` would only need √10.
const MIN_DECADE_RATIO: f64 = 8.0;
/// ... and by at most this factor (a faster decay would mean the first-order term is missing, i.e.
/// the curve is not the one Lemma C.3 predicts).
const MAX_DECADE_RATIO: f64 = 12.5;
/// Relative error (max |W_O ẽ^S − ẽ^L| / max |ẽ^L|) required at the smallest ε.
const FINAL_REL_TOL: f64 = 1e-4;

/// Random weights of the linear attention `L`, kept on the host so `S` can be built from them.
struct LinearWeights {
    /// `[qkv][coord][out_head][in_head]`: dimension-wise maps.
    dim_wise: [Vec<Vec<Vec<f64>>>; 3],
    /// `[qkv][head][out][in]`: split-wise blocks.
    split_wise: [Vec<Vec<Vec<f64>>>; 3],
    /// `[position][coord]` for keys and values (no query position term).
    key_positions: Vec<Vec<f64>>,
    value_positions: Vec<Vec<f64>>,
    /// Per-head `λ^K`, `λ^V`.
    key_lambda: Vec<f64>,
    value_lambda: Vec<f64>,
    /// `[coord][out_head][in_head]`: `c_proj`.
    c_proj: Vec<Vec<Vec<f64>>>,
}

impl LinearWeights {
    fn random(rng: &mut Rng) -> Self {
        let (h, d, t) = (N_HEADS, HEAD_DIM, SEQ_LENGTH);
        let mut square = |n: usize, std: f64| -> Vec<Vec<f64>> {
            (0..n)
                .map(|_| (0..n).map(|_| rng.normal(std)).collect())
                .collect()
        };
        let dim_wise = [0, 1, 2].map(|_| (0..d).map(|_| square(h, 0.6)).collect::<Vec<_>>());
        let mut split_wise = [0, 1, 2].map(|_| (0..h).map(|_| square(d, 0.5)).collect::<Vec<_>>());
        let c_proj = (0..d).map(|_| square(h, 0.7)).collect();
        // Query and key heads leave coordinate d-1 free (row and column 0).
        for blocks in &mut split_wise[..2] {
            for block in blocks.iter_mut() {
                for i in 0..d {
                    block[d - 1][i] = 0.0;
                    block[i][d - 1] = 0.0;
                }
            }
        }
        let mut positions = |free_last: bool| -> Vec<Vec<f64>> {
            (0..t)
                .map(|_| {
                    (0..d)
                        .map(|c| {
                            if free_last && c == d - 1 {
                                0.0
                            } else {
                                rng.normal(0.3)
                            }
                        })
                        .collect()
                })
                .collect()
        };
        let key_positions = positions(true);
        let value_positions = positions(false);
        let key_lambda = (0..h).map(|_| rng.normal(1.0)).collect();
        let value_lambda = (0..h).map(|_| rng.normal(1.0)).collect();
        Self {
            dim_wise,
            split_wise,
            key_positions,
            value_positions,
            key_lambda,
            value_lambda,
            c_proj,
        }
    }

    /// `L`: `H` heads on `Ds = H d`, positions `0..T` (plus the unused `T`, so `Pd` matches `S`).
    fn linear_attention(&self, device: &Device<B>) -> TintAttention<B> {
        let (h, d, t) = (N_HEADS, HEAD_DIM, SEQ_LENGTH);
        let projection = |which: usize| {
            let mut dim_wise = DimWiseBuilder::zeros(h, d);
            let mut split_wise = SplitWiseBuilder::zeros(h, d);
            for c in 0..d {
                for out in 0..h {
                    for input in 0..h {
                        dim_wise.set(c, out, input, self.dim_wise[which][c][out][input]);
                    }
                }
            }
            for head in 0..h {
                for out in 0..d {
                    for input in 0..d {
                        split_wise.set(head, out, input, self.split_wise[which][head][out][input]);
                    }
                }
            }
            ContentProjection::new(dim_wise, split_wise, DType::F64, device)
        };
        let mut positions = PositionProjectionBuilder::zeros(t + 1, d, h);
        for position in 0..t {
            for c in 0..d {
                positions.set(Qkv::Key, position, c, self.key_positions[position][c]);
                positions.set(Qkv::Value, position, c, self.value_positions[position][c]);
            }
        }
        for head in 0..h {
            positions.set_lambda(Qkv::Key, head, self.key_lambda[head]);
            positions.set_lambda(Qkv::Value, head, self.value_lambda[head]);
        }
        let mut c_proj = DimWiseBuilder::zeros(h, d);
        for c in 0..d {
            for out in 0..h {
                for input in 0..h {
                    c_proj.set(c, out, input, self.c_proj[c][out][input]);
                }
            }
        }
        TintAttention {
            query: projection(0),
            key: projection(1),
            value: projection(2),
            positions: positions.build(DType::F64, device),
            c_proj: c_proj.build(DType::F64, device),
            n_heads: h,
            scoring: Scoring::Linear,
            causal_masks: Default::default(),
        }
    }

    /// `S` for a given ε: `2H` heads on `2 Ds`, the extra token `u` at position `T`, `W_O` in `c_proj`.
    fn softmax_attention(&self, epsilon: f64, device: &Device<B>) -> TintAttention<B> {
        let (h, d, t) = (N_HEADS, HEAD_DIM, SEQ_LENGTH);
        let value_scale = epsilon.powi(-3);
        // Query: heads h < H copy L's query; heads >= H are 0.
        let mut q_dim = DimWiseBuilder::zeros(2 * h, d);
        let mut q_split = SplitWiseBuilder::zeros(2 * h, d);
        // Key: heads h < H copy L's key; coordinate d-1 of head h reads block H + h (u's key).
        let mut k_dim = DimWiseBuilder::zeros(2 * h, d);
        let mut k_split = SplitWiseBuilder::zeros(2 * h, d);
        // Value: head h = ε^-3 v^L_h, head H + h = v^L_h (both from the first half only).
        let mut v_dim = DimWiseBuilder::zeros(2 * h, d);
        let mut v_split = SplitWiseBuilder::zeros(2 * h, d);
        for c in 0..d {
            for out in 0..h {
                for input in 0..h {
                    q_dim.set(c, out, input, self.dim_wise[0][c][out][input]);
                    if c < d - 1 {
                        k_dim.set(c, out, input, self.dim_wise[1][c][out][input]);
                    }
                    v_dim.set(c, out, input, self.dim_wise[2][c][out][input]);
                    v_dim.set(c, h + out, input, self.dim_wise[2][c][out][input]);
                }
            }
        }
        for head in 0..h {
            k_dim.set(d - 1, head, h + head, 1.0);
            k_split.set(head, d - 1, d - 1, 1.0);
            for out in 0..d {
                for input in 0..d {
                    q_split.set(head, out, input, self.split_wise[0][head][out][input]);
                    if out < d - 1 {
                        k_split.set(head, out, input, self.split_wise[1][head][out][input]);
                    }
                    let v = self.split_wise[2][head][out][input];
                    v_split.set(head, out, input, value_scale * v);
                    v_split.set(h + head, out, input, v);
                }
            }
        }
        let mut positions = PositionProjectionBuilder::zeros(t + 1, d, 2 * h);
        for position in 0..t {
            // The constant query component e_{d-1} of every token row.
            positions.set(Qkv::Query, position, d - 1, 1.0);
            for c in 0..d {
                positions.set(Qkv::Key, position, c, self.key_positions[position][c]);
                positions.set(Qkv::Value, position, c, self.value_positions[position][c]);
            }
        }
        for head in 0..h {
            positions.set_lambda(Qkv::Query, head, 1.0);
            positions.set_lambda(Qkv::Key, head, self.key_lambda[head]);
            positions.set_lambda(Qkv::Value, head, value_scale * self.value_lambda[head]);
            positions.set_lambda(Qkv::Value, h + head, self.value_lambda[head]);
        }
        // W_O then L's c_proj: out block h = Σ_h' C[h, h'] (block h' − (T+1)/ε block H + h').
        let correction = -((t + 1) as f64) / epsilon;
        let mut c_proj = DimWiseBuilder::zeros(2 * h, d);
        for c in 0..d {
            for out in 0..h {
                for input in 0..h {
                    let weight = self.c_proj[c][out][input];
                    c_proj.set(c, out, input, weight);
                    c_proj.set(c, out, h + input, correction * weight);
                }
            }
        }
        TintAttention {
            query: ContentProjection::new(q_dim, q_split, DType::F64, device),
            key: ContentProjection::new(k_dim, k_split, DType::F64, device),
            value: ContentProjection::new(v_dim, v_split, DType::F64, device),
            positions: positions.build(DType::F64, device),
            c_proj: c_proj.build(DType::F64, device),
            n_heads: 2 * h,
            scoring: Scoring::Softmax { scale: epsilon },
            causal_masks: Default::default(),
        }
    }
}

fn max_abs(x: Tensor<B, 3>) -> f64 {
    x.abs().max().into_scalar().elem()
}

#[test]
fn softmax_with_2h_heads_and_an_extra_token_approximates_linear_attention() {
    let device = Default::default();
    let (h, d, t) = (N_HEADS, HEAD_DIM, SEQ_LENGTH);
    let d_sim = h * d;
    let mut rng = Rng::new(0x5eed_c2c2_0000_0001);
    let weights = LinearWeights::random(&mut rng);
    let inputs: Vec<f64> = (0..BATCH * t * d_sim).map(|_| rng.normal(0.7)).collect();
    let hidden = Tensor::<B, 3>::from_data(
        TensorData::new(inputs, [BATCH, t, d_sim]),
        (&device, DType::F64),
    );
    let token_positions = Tensor::<B, 1, Int>::from_data(
        TensorData::new((0..t as i64).collect::<Vec<_>>(), [t]),
        &device,
    );
    let linear = weights.linear_attention(&device).forward(
        hidden.clone(),
        token_positions,
        AttentionRows {
            queries: 0..t,
            keys: 0..t,
        },
        AttentionMasks::none(),
    );
    let scale = max_abs(linear.clone());
    assert!(
        scale > 0.1,
        "the linear attention output is not trivial: {scale}"
    );

    let all_positions = Tensor::<B, 1, Int>::from_data(
        TensorData::new((0..=t as i64).collect::<Vec<_>>(), [t + 1]),
        &device,
    );
    let mut errors = Vec::new();
    for epsilon in EPSILONS {
        // ē_t = [ê_t, 0]; u = [0, κ e_{d-1} in every block H + h], κ = −2 log ε / ε (score scale ε).
        let kappa = -2.0 * epsilon.ln() / epsilon;
        let mut u = vec![0.0; 2 * d_sim];
        for head in 0..h {
            u[(h + head) * d + d - 1] = kappa;
        }
        let u_row =
            Tensor::<B, 1>::from_data(TensorData::new(u, [2 * d_sim]), (&device, DType::F64))
                .reshape([1, 1, 2 * d_sim])
                .repeat_dim(0, BATCH);
        let padded = Tensor::cat(vec![hidden.clone(), hidden.zeros_like()], 2);
        let rows = Tensor::cat(vec![padded, u_row], 1); // [B, T + 1, 2 Ds]
        let softmax = weights.softmax_attention(epsilon, &device).forward(
            rows,
            all_positions.clone(),
            AttentionRows {
                queries: 0..t,
                keys: 0..t + 1,
            },
            AttentionMasks::none(),
        );
        let error = max_abs(softmax.narrow(2, 0, d_sim) - linear.clone()) / scale;
        println!("Theorem C.2: epsilon = {epsilon:.0e}: max |W_O e_softmax - e_linear| / max |e_linear| = {error:.3e}");
        errors.push(error);
    }
    for (pair, eps) in errors.windows(2).zip(EPSILONS).skip(1) {
        let ratio = pair[0] / pair[1];
        assert!(
            (MIN_DECADE_RATIO..MAX_DECADE_RATIO).contains(&ratio),
            "error ratio {ratio} from ε = {eps:.0e} to ε/10 is not ~10: {errors:?}"
        );
    }
    let final_error = *errors.last().expect("non-empty curve");
    assert!(
        final_error < FINAL_REL_TOL,
        "relative error {final_error} at the smallest ε"
    );
}
