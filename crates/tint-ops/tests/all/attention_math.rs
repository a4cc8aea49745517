//! [`TintAttention`] (docs/construction.md §3.1, paper Definition C.1) against plain attention math.
//!
//! Every test builds a `TintAttention` from random host weights (through the public builders),
//! feeds it random f64 rows, and compares `forward` **and** `forward_dense` with a reference
//! written here with plain loops, straight from the spec:
//!
//! 1. content projections: dimension-wise op (`M_c`, `nf x nf`, per coordinate `c < nx`) then
//!    split-wise op (`M_i`, `nx x nx`, per block `i`);
//! 2. position terms from an explicit one-hot vector (prefix row `p` → index `Tmax + p`, token row
//!    `P + t` → `t`, §2.2): `q^h += λ_q[h] Wq^p pos`, `k^h += λ_k[h] Wk^p pos`, `v^h += λ_v[h] Wv^p pos`;
//! 3. scores `q·k` per head; linear: causal-masked entries are 0, then `+ additive`; softmax:
//!    `scale · q·k`, causal-masked entries excluded, `+ additive`, softmax over the keys;
//! 4. key mask (multiplicative, per key), optional transpose of the score matrix (backward
//!    attention), multiplicative mask;
//! 5. `o^h = Σ_j a[i, j] v_j^h`, heads concatenated, dimension-wise `c_proj`.
//!
//! Weights come in two flavours: `Dense` (every matrix random: no structure shortcut applies) and
//! `Structured` (identity / zero / 0-1 selection / random blocks, shared dimension-wise maps, zero
//! value heads with `λ_v = 0`, a head `c_proj` never reads, `λ ∈ {0, 1, random}`), so `forward`'s
//! shortcuts (copies, gathers, live-head restriction, column-restricted projections) are exercised
//! against the same plain math. Query/key projections also use block sizes other than the head size
//! (`query_conv_dim` / `key_conv_dim` of §3.1).

use core::ops::Range;

use burn::{
    backend::Flex,
    tensor::{DType, Int, Tensor, TensorData},
};
use tint_ops::{
    attention::{
        AttentionMasks, AttentionRows, ContentProjection, PositionProjectionBuilder, Qkv, Scoring,
        TintAttention, MASKED_SCORE,
    },
    hsplit::{DimWiseBuilder, SplitWiseBuilder},
    layout::position_indices,
};

use crate::common::Rng;

type B = Flex;

/// Allowed `max |module - reference|`, relative to `max(1, max |reference|)`. Everything runs in
/// f64 on O(1) inputs; each output is a sum of at most a few hundred products (projection: ≤ 16
/// terms, score: ≤ 4 terms, attention: ≤ 10 keys, `c_proj`: ≤ 4 heads), so summation-order
/// differences between the kernels and the loops are ~1e-14 relative. 1e-10 leaves a wide margin
/// for that and is still ~8 orders of magnitude below any real error (a wrong index, a missing
/// mask, a wrong λ or scale changes the output by O(scale)).
const REL_TOL: f64 = 1e-10;

/// A mask that is meant to matter must change the reference output by at least this (relative):
/// otherwise a module ignoring the mask could pass.
const MIN_MASK_EFFECT: f64 = 1e-3;

/// The reference output must exceed this (max abs), so "module == reference" is not `0 == 0`; it is
/// still 6 orders of magnitude above the absolute tolerance (`REL_TOL` for outputs below 1).
const MIN_OUTPUT: f64 = 1e-4;

/// Seeds per (shape, flavour) combination.
const SEEDS: [u64; 2] = [0x5eed_a77e_0000_0001, 0x5eed_a77e_0000_0002];

// ---------------------------------------------------------------------------------------------
// Shapes and host-side weights
// ---------------------------------------------------------------------------------------------

/// One attention shape: `nh` heads of size `d` on `Ds = nh d`, query/key content blocks of
/// `qk_block`, `P` prefix rows and `T` token rows, one-hot positions of size `Pd = Tmax + P`.
#[derive(Debug, Clone, Copy)]
struct Shape {
    n_heads: usize,
    head_dim: usize,
    qk_block: usize,
    n_prefixes: usize,
    seq_length: usize,
    max_seq_length: usize,
    batch_size: usize,
}

impl Shape {
    fn d_sim(&self) -> usize {
        self.n_heads * self.head_dim
    }
    fn n_rows(&self) -> usize {
        self.n_prefixes + self.seq_length
    }
    fn position_dim(&self) -> usize {
        self.max_seq_length + self.n_prefixes
    }
    fn all_rows(&self) -> AttentionRows {
        AttentionRows {
            queries: 0..self.n_rows(),
            keys: 0..self.n_rows(),
        }
    }
    fn token_rows(&self) -> Range<usize> {
        self.n_prefixes..self.n_rows()
    }
}

/// Several shapes: batch 1 and > 1, q/k blocks equal to, larger than and smaller than the head.
const SHAPES: [Shape; 4] = [
    Shape {
        n_heads: 2,
        head_dim: 4,
        qk_block: 4,
        n_prefixes: 3,
        seq_length: 5,
        max_seq_length: 7,
        batch_size: 2,
    },
    Shape {
        n_heads: 3,
        head_dim: 2,
        qk_block: 6,
        n_prefixes: 2,
        seq_length: 4,
        max_seq_length: 4,
        batch_size: 1,
    },
    Shape {
        n_heads: 4,
        head_dim: 3,
        qk_block: 6,
        n_prefixes: 4,
        seq_length: 6,
        max_seq_length: 8,
        batch_size: 3,
    },
    Shape {
        n_heads: 4,
        head_dim: 4,
        qk_block: 2,
        n_prefixes: 2,
        seq_length: 5,
        max_seq_length: 6,
        batch_size: 2,
    },
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Flavour {
    Dense,
    Structured,
}

const FLAVOURS: [Flavour; 2] = [Flavour::Dense, Flavour::Structured];

const QKV: [Qkv; 3] = [Qkv::Query, Qkv::Key, Qkv::Value];

/// A content projection on the host: dimension-wise `[nx][nf][nf]` (`M_c[out, in]`), then
/// split-wise `[nf][nx][nx]` (`M_i[out, in]`).
struct HostProjection {
    nf: usize,
    nx: usize,
    dim: Vec<f64>,
    split: Vec<f64>,
}

impl HostProjection {
    fn random(rng: &mut Rng, d_sim: usize, nx: usize, flavour: Flavour) -> Self {
        let nf = d_sim / nx;
        let mut dim = vec![0.0; nx * nf * nf];
        let mut split = vec![0.0; nf * nx * nx];
        match flavour {
            Flavour::Dense => {
                dim = rng.normals(nx * nf * nf, 0.6);
                split = rng.normals(nf * nx * nx, 0.5);
            }
            Flavour::Structured => {
                match rng.below(3) {
                    // Identity.
                    0 => {
                        for c in 0..nx {
                            for i in 0..nf {
                                dim[(c * nf + i) * nf + i] = 1.0;
                            }
                        }
                    }
                    // Shared across coordinates, sparse with some exact 1s.
                    1 => Self::fill_shared(rng, &mut dim, nx, nf),
                    // Per coordinate.
                    _ => dim = rng.normals(nx * nf * nf, 0.6),
                }
                for block in 0..nf {
                    let m = &mut split[block * nx * nx..(block + 1) * nx * nx];
                    match rng.below(4) {
                        0 => (0..nx).for_each(|i| m[i * nx + i] = 1.0),
                        1 => {}
                        // 0/1 selection (a gather, repeats allowed).
                        2 => (0..nx).for_each(|o| m[o * nx + rng.below(nx)] = 1.0),
                        _ => m.iter_mut().for_each(|w| *w = rng.normal(0.5)),
                    }
                }
            }
        }
        Self { nf, nx, dim, split }
    }

    /// The same random `nf x nf` map (entries 0, 1 or normal) for every coordinate.
    fn fill_shared(rng: &mut Rng, dim: &mut [f64], nx: usize, nf: usize) {
        let shared: Vec<f64> = (0..nf * nf)
            .map(|_| match rng.below(5) {
                0 | 1 => 0.0,
                2 => 1.0,
                _ => rng.normal(0.6),
            })
            .collect();
        for c in 0..nx {
            dim[c * nf * nf..(c + 1) * nf * nf].copy_from_slice(&shared);
        }
    }

    /// `split(dim(e))`, straight from the §3.1 definitions.
    fn apply(&self, e: &[f64]) -> Vec<f64> {
        let (nf, nx) = (self.nf, self.nx);
        let mut mid = vec![0.0; nf * nx];
        for c in 0..nx {
            for out in 0..nf {
                mid[out * nx + c] = (0..nf)
                    .map(|input| self.dim[(c * nf + out) * nf + input] * e[input * nx + c])
                    .sum();
            }
        }
        let mut res = vec![0.0; nf * nx];
        for block in 0..nf {
            for out in 0..nx {
                res[block * nx + out] = (0..nx)
                    .map(|input| {
                        self.split[(block * nx + out) * nx + input] * mid[block * nx + input]
                    })
                    .sum();
            }
        }
        res
    }

    fn module(&self) -> ContentProjection<B> {
        let (nf, nx) = (self.nf, self.nx);
        let mut dim = DimWiseBuilder::zeros(nf, nx);
        let mut split = SplitWiseBuilder::zeros(nf, nx);
        for c in 0..nx {
            for out in 0..nf {
                for input in 0..nf {
                    dim.set(c, out, input, self.dim[(c * nf + out) * nf + input]);
                }
            }
        }
        for block in 0..nf {
            for out in 0..nx {
                for input in 0..nx {
                    split.set(
                        block,
                        out,
                        input,
                        self.split[(block * nx + out) * nx + input],
                    );
                }
            }
        }
        ContentProjection::new(dim, split, DType::F64, &Default::default())
    }
}

/// A whole attention on the host.
struct HostAttention {
    shape: Shape,
    projections: [HostProjection; 3],
    /// `[Pd][3][d]`: `W^p_{q,k,v}` column for each one-hot position.
    positions: Vec<f64>,
    /// `λ_q, λ_k, λ_v`, each `[nh]`.
    lambda: [Vec<f64>; 3],
    /// `[d][nh][nh]`: `c_proj` (dimension-wise over the heads).
    c_proj: Vec<f64>,
    scoring: Scoring,
}

impl HostAttention {
    fn random(rng: &mut Rng, shape: Shape, flavour: Flavour, scoring: Scoring) -> Self {
        let (nh, d, ds, pd) = (
            shape.n_heads,
            shape.head_dim,
            shape.d_sim(),
            shape.position_dim(),
        );
        let mut projections = [shape.qk_block, shape.qk_block, d]
            .map(|nx| HostProjection::random(rng, ds, nx, flavour));
        let positions = rng.normals(pd * 3 * d, 0.4);
        let mut lambda = [0, 1, 2].map(|_| {
            (0..nh)
                .map(|_| match flavour {
                    Flavour::Dense => rng.normal(1.0),
                    Flavour::Structured => match rng.below(3) {
                        0 => 0.0,
                        1 => 1.0,
                        _ => rng.normal(1.0),
                    },
                })
                .collect::<Vec<f64>>()
        });
        let mut c_proj = vec![0.0; d * nh * nh];
        match flavour {
            Flavour::Dense => c_proj = rng.normals(d * nh * nh, 0.6),
            Flavour::Structured => {
                HostProjection::fill_shared(rng, &mut c_proj, d, nh);
                // The last head is never read by c_proj (a dead head for `forward`).
                for c in 0..d {
                    for out in 0..nh {
                        c_proj[(c * nh + out) * nh + nh - 1] = 0.0;
                    }
                }
                // Output block 0 reads every other head (still shared across coordinates).
                for c in 0..d {
                    for input in 0..nh - 1 {
                        c_proj[c * nh * nh + input] = 1.0;
                    }
                }
                let value = &mut projections[2];
                // Value dimension-wise shared, so its zero output blocks are visible.
                HostProjection::fill_shared(rng, &mut value.dim, d, nh);
                if nh >= 3 {
                    // Head 0: zero value content and λ_v = 0 (dead).
                    value.split[..d * d].fill(0.0);
                    lambda[2][0] = 0.0;
                }
                if nh >= 4 {
                    // Head 1: identity value block fed by a zero dimension-wise output, λ_v = 0 (dead).
                    for c in 0..d {
                        for input in 0..nh {
                            value.dim[(c * nh + 1) * nh + input] = 0.0;
                        }
                    }
                    let block = &mut value.split[d * d..2 * d * d];
                    block.fill(0.0);
                    (0..d).for_each(|i| block[i * d + i] = 1.0);
                    lambda[2][1] = 0.0;
                }
                // Head nh - 2: zero value content but λ_v = 1: live through its position term.
                // Its q and k position terms are on, so the head's output cannot vanish.
                let h = nh - 2;
                value.split[h * d * d..(h + 1) * d * d].fill(0.0);
                lambda[2][h] = 1.0;
                for which in 0..2 {
                    if lambda[which][h] == 0.0 {
                        lambda[which][h] = 1.0;
                    }
                }
            }
        }
        Self {
            shape,
            projections,
            positions,
            lambda,
            c_proj,
            scoring,
        }
    }

    fn module(&self) -> TintAttention<B> {
        let (nh, d, pd) = (
            self.shape.n_heads,
            self.shape.head_dim,
            self.shape.position_dim(),
        );
        let mut positions = PositionProjectionBuilder::zeros(pd, d, nh);
        for r in 0..pd {
            for (w, which) in QKV.into_iter().enumerate() {
                for c in 0..d {
                    positions.set(which, r, c, self.positions[(r * 3 + w) * d + c]);
                }
            }
        }
        for (w, which) in QKV.into_iter().enumerate() {
            for h in 0..nh {
                positions.set_lambda(which, h, self.lambda[w][h]);
            }
        }
        let mut c_proj = DimWiseBuilder::zeros(nh, d);
        for c in 0..d {
            for out in 0..nh {
                for input in 0..nh {
                    c_proj.set(c, out, input, self.c_proj[(c * nh + out) * nh + input]);
                }
            }
        }
        let device = Default::default();
        TintAttention {
            query: self.projections[0].module(),
            key: self.projections[1].module(),
            value: self.projections[2].module(),
            positions: positions.build(DType::F64, &device),
            c_proj: c_proj.build(DType::F64, &device),
            n_heads: nh,
            scoring: self.scoring,
            causal_masks: Default::default(),
        }
    }

    /// q, k or v of one row, `[nh * d]` (head after head): content projection plus
    /// `λ[h] · W^p onehot(row)`.
    fn qkv_row(&self, which: usize, e: &[f64], row: usize) -> Vec<f64> {
        let s = self.shape;
        let (nh, d, pd) = (s.n_heads, s.head_dim, s.position_dim());
        let index = position_indices(s.n_prefixes, s.seq_length, s.max_seq_length);
        let mut onehot = vec![0.0; pd];
        onehot[index[row]] = 1.0;
        let position_term: Vec<f64> = (0..d)
            .map(|c| {
                (0..pd)
                    .map(|r| onehot[r] * self.positions[(r * 3 + which) * d + c])
                    .sum()
            })
            .collect();
        let content = self.projections[which].apply(e);
        (0..nh * d)
            .map(|k| content[k] + self.lambda[which][k / d] * position_term[k % d])
            .collect()
    }

    /// The plain attention: `[batch_size][n_queries][Ds]`.
    fn reference(&self, hidden: &[f64], rows: &AttentionRows, masks: &HostMasks) -> Vec<f64> {
        let s = self.shape;
        let (nh, d, ds, n_rows) = (s.n_heads, s.head_dim, s.d_sim(), s.n_rows());
        let (nq, nk) = (rows.queries.len(), rows.keys.len());
        let mut out = vec![0.0; s.batch_size * nq * ds];
        for b in 0..s.batch_size {
            let row = |r: usize| &hidden[(b * n_rows + r) * ds..(b * n_rows + r + 1) * ds];
            let q: Vec<Vec<f64>> = rows
                .queries
                .clone()
                .map(|r| self.qkv_row(0, row(r), r))
                .collect();
            let k: Vec<Vec<f64>> = rows
                .keys
                .clone()
                .map(|r| self.qkv_row(1, row(r), r))
                .collect();
            let v: Vec<Vec<f64>> = rows
                .keys
                .clone()
                .map(|r| self.qkv_row(2, row(r), r))
                .collect();
            let allowed =
                |i: usize, j: usize| !masks.causal || rows.keys.start + j <= rows.queries.start + i;
            let additive = |i: usize, j: usize| {
                masks
                    .additive
                    .as_ref()
                    .map_or(0.0, |m| m[(b * nq + i) * nk + j])
            };
            let mut heads = vec![0.0; nq * ds]; // concatenated head outputs
            for h in 0..nh {
                let dot = |i: usize, j: usize| -> f64 {
                    (0..d).map(|c| q[i][h * d + c] * k[j][h * d + c]).sum()
                };
                let mut a = vec![0.0; nq * nk];
                for i in 0..nq {
                    match self.scoring {
                        Scoring::Linear => {
                            for j in 0..nk {
                                let score = if allowed(i, j) { dot(i, j) } else { 0.0 };
                                a[i * nk + j] = score + additive(i, j);
                            }
                        }
                        Scoring::Softmax { scale } => {
                            let logits: Vec<Option<f64>> = (0..nk)
                                .map(|j| allowed(i, j).then(|| scale * dot(i, j) + additive(i, j)))
                                .collect();
                            let max = logits
                                .iter()
                                .flatten()
                                .fold(f64::NEG_INFINITY, |m, &l| m.max(l));
                            assert!(max.is_finite(), "every key of query {i} is masked");
                            let weights: Vec<f64> = logits
                                .iter()
                                .map(|l| l.map_or(0.0, |l| (l - max).exp()))
                                .collect();
                            let total: f64 = weights.iter().sum();
                            for j in 0..nk {
                                a[i * nk + j] = weights[j] / total;
                            }
                        }
                    }
                }
                if let Some(key_mask) = &masks.key_mask {
                    for i in 0..nq {
                        for j in 0..nk {
                            a[i * nk + j] *= key_mask[b * nk + j];
                        }
                    }
                }
                if masks.transpose {
                    assert_eq!(nq, nk, "the transpose needs a square score matrix");
                    a = (0..nq * nk).map(|x| a[(x % nk) * nk + x / nk]).collect();
                }
                if let Some(m) = &masks.multiplicative {
                    for i in 0..nq {
                        for j in 0..nk {
                            a[i * nk + j] *= m[(b * nq + i) * nk + j];
                        }
                    }
                }
                for i in 0..nq {
                    for c in 0..d {
                        heads[i * ds + h * d + c] =
                            (0..nk).map(|j| a[i * nk + j] * v[j][h * d + c]).sum();
                    }
                }
            }
            for i in 0..nq {
                for block in 0..nh {
                    for c in 0..d {
                        out[(b * nq + i) * ds + block * d + c] = (0..nh)
                            .map(|input| {
                                self.c_proj[(c * nh + block) * nh + input]
                                    * heads[i * ds + input * d + c]
                            })
                            .sum();
                    }
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Masks, running, comparing
// ---------------------------------------------------------------------------------------------

/// Host copy of [`AttentionMasks`] (`[batch][n_queries][n_keys]` / `[batch][n_keys]`).
#[derive(Debug, Clone, Default)]
struct HostMasks {
    causal: bool,
    transpose: bool,
    multiplicative: Option<Vec<f64>>,
    additive: Option<Vec<f64>>,
    key_mask: Option<Vec<f64>>,
}

impl HostMasks {
    fn is_none(&self) -> bool {
        !self.causal
            && !self.transpose
            && self.multiplicative.is_none()
            && self.additive.is_none()
            && self.key_mask.is_none()
    }

    fn module(&self, shape: Shape, rows: &AttentionRows) -> AttentionMasks<B> {
        let (b, nq, nk) = (shape.batch_size, rows.queries.len(), rows.keys.len());
        AttentionMasks {
            causal: self.causal,
            transpose_scores: self.transpose,
            multiplicative: self.multiplicative.clone().map(|m| tensor(m, [b, nq, nk])),
            additive: self.additive.clone().map(|m| tensor(m, [b, nq, nk])),
            key_mask: self.key_mask.clone().map(|m| tensor(m, [b, nk])),
        }
    }
}

/// Random multiplicative mask: 30% exact zeros, the rest uniform in `[0, 1)` (real weights, so a
/// transposed or mis-indexed mask cannot coincide with the right one).
fn multiplicative_mask(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            if rng.uniform() < 0.3 {
                0.0
            } else {
                rng.uniform()
            }
        })
        .collect()
}

/// Random additive mask `[batch][nq][nk]`: normal values; with `hard`, 30% of the entries are
/// [`MASKED_SCORE`], except key column 0 (which every query may see, so no softmax row is empty).
fn additive_mask(rng: &mut Rng, batch: usize, nq: usize, nk: usize, hard: bool) -> Vec<f64> {
    (0..batch * nq * nk)
        .map(|x| {
            if hard && x % nk != 0 && rng.uniform() < 0.3 {
                MASKED_SCORE
            } else {
                rng.normal(1.0)
            }
        })
        .collect()
}

fn tensor<const D: usize>(values: Vec<f64>, shape: [usize; D]) -> Tensor<B, D> {
    Tensor::from_data(
        TensorData::new(values, shape),
        (&Default::default(), DType::F64),
    )
}

fn to_host<const D: usize>(x: Tensor<B, D>) -> Vec<f64> {
    x.into_data().to_vec::<f64>().expect("f64 tensor")
}

fn max_abs(x: &[f64]) -> f64 {
    x.iter().fold(0.0, |m, v| m.max(v.abs()))
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter().zip(b).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
}

/// Asserts `got ≈ want` within [`REL_TOL`] relative to `max(1, max |want|)`.
fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    let scale = max_abs(want).max(1.0);
    let err = max_abs_diff(got, want);
    assert!(
        err <= REL_TOL * scale,
        "{what}: max |module - plain math| = {err:.3e} > {REL_TOL:e} * {scale:.3e}"
    );
}

/// Everything one case needs.
struct Case {
    shape: Shape,
    host: HostAttention,
    module: TintAttention<B>,
    hidden: Vec<f64>,
    rng: Rng,
}

impl Case {
    fn new(shape: Shape, flavour: Flavour, softmax: bool, seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ ((shape.n_heads * 131 + shape.qk_block * 7) as u64));
        let scoring = if softmax {
            // Not 1 and not 1/sqrt(d), so a missing or wrong scale shows.
            Scoring::Softmax {
                scale: 0.3 + rng.uniform(),
            }
        } else {
            Scoring::Linear
        };
        let host = HostAttention::random(&mut rng, shape, flavour, scoring);
        let module = host.module();
        if flavour == Flavour::Structured {
            // The structured weights exercise `forward`'s live-head restriction (the last head is
            // never read by c_proj).
            let live = module.live_heads();
            assert!(live.end < shape.n_heads, "live heads {live:?}");
        }
        let hidden = rng.normals(shape.batch_size * shape.n_rows() * shape.d_sim(), 0.7);
        Self {
            shape,
            host,
            module,
            hidden,
            rng,
        }
    }

    fn position_index(&self) -> Tensor<B, 1, Int> {
        let s = self.shape;
        let index: Vec<i64> = position_indices(s.n_prefixes, s.seq_length, s.max_seq_length)
            .into_iter()
            .map(|i| i as i64)
            .collect();
        let n = index.len();
        Tensor::from_data(TensorData::new(index, [n]), &Default::default())
    }

    fn hidden(&self) -> Tensor<B, 3> {
        let s = self.shape;
        tensor(self.hidden.clone(), [s.batch_size, s.n_rows(), s.d_sim()])
    }

    /// `forward` (or `forward_dense`) on the host masks, as a host vector.
    fn run(&self, rows: &AttentionRows, masks: &HostMasks, dense: bool) -> Vec<f64> {
        let (hidden, index) = (self.hidden(), self.position_index());
        let module_masks = masks.module(self.shape, rows);
        let out = if dense {
            self.module
                .forward_dense(hidden, index, rows.clone(), module_masks)
        } else {
            self.module
                .forward(hidden, index, rows.clone(), module_masks)
        };
        let s = self.shape;
        assert_eq!(
            out.dims(),
            [s.batch_size, rows.queries.len(), s.d_sim()],
            "output shape"
        );
        to_host(out)
    }

    /// Compares `forward` and `forward_dense` with the plain math; returns the reference.
    fn check(&self, name: &str, rows: &AttentionRows, masks: &HostMasks) -> Vec<f64> {
        let want = self.host.reference(&self.hidden, rows, masks);
        assert!(
            max_abs(&want) > MIN_OUTPUT,
            "{name} {:?} {rows:?}: the reference output is trivial ({:e})",
            self.shape,
            max_abs(&want)
        );
        let ctx = format!("{name} {:?} {rows:?}", self.shape);
        assert_close(
            &format!("{ctx} forward"),
            &self.run(rows, masks, false),
            &want,
        );
        assert_close(
            &format!("{ctx} forward_dense"),
            &self.run(rows, masks, true),
            &want,
        );
        if !masks.is_none() {
            let unmasked = self
                .host
                .reference(&self.hidden, rows, &HostMasks::default());
            let effect = max_abs_diff(&want, &unmasked) / max_abs(&want);
            assert!(
                effect > MIN_MASK_EFFECT,
                "{ctx}: the masks do not change the output ({effect:e}); the case tests nothing"
            );
        }
        want
    }
}

/// Runs `body` on every shape x flavour x seed.
fn for_all_cases(softmax: bool, mut body: impl FnMut(&mut Case)) {
    for shape in SHAPES {
        for flavour in FLAVOURS {
            for seed in SEEDS {
                let mut case = Case::new(shape, flavour, softmax, seed);
                body(&mut case);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn linear_bidirectional_matches_plain_attention() {
    for_all_cases(false, |case| {
        let rows = case.shape.all_rows();
        case.check("linear bidirectional", &rows, &HostMasks::default());
        // Token rows attending to token rows only.
        let tokens = case.shape.token_rows();
        let rows = AttentionRows {
            queries: tokens.clone(),
            keys: tokens,
        };
        case.check("linear bidirectional tokens", &rows, &HostMasks::default());
    });
}

#[test]
fn linear_causal_matches_plain_attention() {
    for_all_cases(false, |case| {
        let causal = HostMasks {
            causal: true,
            ..HostMasks::default()
        };
        case.check("linear causal", &case.shape.all_rows(), &causal);
        // Causality is on absolute row indices: token queries against every row.
        let rows = AttentionRows {
            queries: case.shape.token_rows(),
            keys: 0..case.shape.n_rows(),
        };
        case.check("linear causal, token queries", &rows, &causal);
    });
}

#[test]
fn softmax_bidirectional_matches_plain_attention() {
    for_all_cases(true, |case| {
        case.check(
            "softmax bidirectional",
            &case.shape.all_rows(),
            &HostMasks::default(),
        );
    });
}

#[test]
fn softmax_causal_matches_plain_attention() {
    for_all_cases(true, |case| {
        let causal = HostMasks {
            causal: true,
            ..HostMasks::default()
        };
        case.check("softmax causal", &case.shape.all_rows(), &causal);
        let tokens = case.shape.token_rows();
        let rows = AttentionRows {
            queries: tokens.clone(),
            keys: tokens,
        };
        case.check("softmax causal tokens", &rows, &causal);
        let rows = AttentionRows {
            queries: case.shape.token_rows(),
            keys: 0..case.shape.n_rows(),
        };
        case.check("softmax causal, token queries", &rows, &causal);
    });
}

#[test]
fn custom_multiplicative_masks_match_plain_attention() {
    for softmax in [false, true] {
        for_all_cases(softmax, |case| {
            let s = case.shape;
            for (causal, rows) in [
                (false, s.all_rows()),
                (true, s.all_rows()),
                (
                    false,
                    AttentionRows {
                        queries: 0..s.n_prefixes,
                        keys: s.token_rows(),
                    },
                ),
            ] {
                let n = s.batch_size * rows.queries.len() * rows.keys.len();
                let masks = HostMasks {
                    causal,
                    multiplicative: Some(multiplicative_mask(&mut case.rng, n)),
                    ..HostMasks::default()
                };
                case.check("multiplicative mask", &rows, &masks);
            }
        });
    }
}

#[test]
fn key_mask_is_the_multiplicative_mask_repeated_over_queries() {
    for softmax in [false, true] {
        for_all_cases(softmax, |case| {
            let s = case.shape;
            // The LinearDescent use: prefix queries, token keys, training-token mask.
            for rows in [
                AttentionRows {
                    queries: 0..s.n_prefixes,
                    keys: s.token_rows(),
                },
                s.all_rows(),
            ] {
                let (nq, nk) = (rows.queries.len(), rows.keys.len());
                let key_mask = multiplicative_mask(&mut case.rng, s.batch_size * nk);
                let repeated: Vec<f64> = (0..s.batch_size * nq * nk)
                    .map(|x| key_mask[(x / (nq * nk)) * nk + x % nk])
                    .collect();
                let with_key_mask = HostMasks {
                    key_mask: Some(key_mask),
                    ..HostMasks::default()
                };
                let want = case.check("key mask", &rows, &with_key_mask);
                let as_multiplicative = HostMasks {
                    multiplicative: Some(repeated),
                    ..HostMasks::default()
                };
                assert_close(
                    "key mask vs repeated multiplicative mask",
                    &case.run(&rows, &as_multiplicative, false),
                    &want,
                );
            }
        });
    }
}

#[test]
fn custom_additive_masks_match_plain_attention() {
    for softmax in [false, true] {
        for_all_cases(softmax, |case| {
            let s = case.shape;
            for (causal, rows) in [
                (false, s.all_rows()),
                (true, s.all_rows()),
                (
                    true,
                    AttentionRows {
                        queries: s.token_rows(),
                        keys: s.token_rows(),
                    },
                ),
            ] {
                let (nq, nk) = (rows.queries.len(), rows.keys.len());
                // Hard (MASKED_SCORE) entries only make sense before a softmax.
                let additive = additive_mask(&mut case.rng, s.batch_size, nq, nk, softmax);
                let masks = HostMasks {
                    causal,
                    additive: Some(additive),
                    ..HostMasks::default()
                };
                case.check("additive mask", &rows, &masks);
            }
        });
    }
}

#[test]
fn all_masks_together_match_plain_attention() {
    for softmax in [false, true] {
        for_all_cases(softmax, |case| {
            let s = case.shape;
            let rows = AttentionRows {
                queries: s.token_rows(),
                keys: 0..s.n_rows(),
            };
            let (nq, nk) = (rows.queries.len(), rows.keys.len());
            let masks = HostMasks {
                causal: true,
                transpose: false,
                multiplicative: Some(multiplicative_mask(&mut case.rng, s.batch_size * nq * nk)),
                additive: Some(additive_mask(&mut case.rng, s.batch_size, nq, nk, softmax)),
                key_mask: Some(multiplicative_mask(&mut case.rng, s.batch_size * nk)),
            };
            case.check("causal + additive + key + multiplicative", &rows, &masks);
        });
    }
}

/// Backward attention (§3.1 step 4): the score matrix is transposed after the softmax, then the
/// multiplicative mask is applied (the SelfAttentionBackward use: causal + transpose + mask).
#[test]
fn backward_attention_transpose_matches_plain_attention() {
    for softmax in [false, true] {
        for_all_cases(softmax, |case| {
            let s = case.shape;
            let tokens = s.token_rows();
            for rows in [
                s.all_rows(),
                AttentionRows {
                    queries: tokens.clone(),
                    keys: tokens.clone(),
                },
            ] {
                let n = rows.queries.len();
                let transpose_only = HostMasks {
                    transpose: true,
                    ..HostMasks::default()
                };
                case.check("transpose", &rows, &transpose_only);
                let masks = HostMasks {
                    causal: true,
                    transpose: true,
                    multiplicative: Some(multiplicative_mask(&mut case.rng, s.batch_size * n * n)),
                    additive: Some(additive_mask(&mut case.rng, s.batch_size, n, n, softmax)),
                    key_mask: None,
                };
                case.check("causal + transpose + masks", &rows, &masks);
            }
        });
    }
}

/// `restrict_prefixes` (§3.1 step 6): linear attention with token queries × prefix keys only equals
/// the full `(P+T) x (P+T)` attention whose non-prefix keys are masked out, on the token rows.
#[test]
fn restrict_prefixes_fast_path_equals_full_attention_restricted() {
    for_all_cases(false, |case| {
        let s = case.shape;
        let (b, n, p) = (s.batch_size, s.n_rows(), s.n_prefixes);
        let fast_rows = AttentionRows {
            queries: s.token_rows(),
            keys: 0..p,
        };
        let fast = case.check("restrict_prefixes", &fast_rows, &HostMasks::default());
        // Full computation, keys >= P masked (multiplicative 0), rows P.. kept.
        let prefix_keys: Vec<f64> = (0..b * n * n)
            .map(|x| if x % n < p { 1.0 } else { 0.0 })
            .collect();
        let full_masks = HostMasks {
            multiplicative: Some(prefix_keys),
            ..HostMasks::default()
        };
        let token_part = |full: Vec<f64>| -> Vec<f64> {
            let ds = s.d_sim();
            (0..b)
                .flat_map(|batch| full[(batch * n + p) * ds..(batch + 1) * n * ds].to_vec())
                .collect()
        };
        let full_reference = case
            .host
            .reference(&case.hidden, &s.all_rows(), &full_masks);
        assert_close(
            "restrict_prefixes vs full plain attention restricted",
            &fast,
            &token_part(full_reference),
        );
        for dense in [false, true] {
            let full_module = case.run(&s.all_rows(), &full_masks, dense);
            assert_close(
                "restrict_prefixes vs full module attention restricted",
                &case.run(&fast_rows, &HostMasks::default(), dense),
                &token_part(full_module),
            );
        }
    });
}

/// The same row restriction for softmax attention (the forward modules' "token rows × token rows"):
/// equal to the full attention with the other keys masked additively by [`MASKED_SCORE`].
#[test]
fn softmax_row_restriction_equals_full_attention_masked() {
    for_all_cases(true, |case| {
        let s = case.shape;
        let (b, n, p, ds) = (s.batch_size, s.n_rows(), s.n_prefixes, s.d_sim());
        let tokens = s.token_rows();
        let rows = AttentionRows {
            queries: tokens.clone(),
            keys: tokens,
        };
        let causal = HostMasks {
            causal: true,
            ..HostMasks::default()
        };
        let restricted = case.run(&rows, &causal, false);
        let prefix_columns: Vec<f64> = (0..b * n * n)
            .map(|x| if x % n < p { MASKED_SCORE } else { 0.0 })
            .collect();
        let full_masks = HostMasks {
            causal: true,
            additive: Some(prefix_columns),
            ..HostMasks::default()
        };
        let full = case.run(&s.all_rows(), &full_masks, false);
        let token_part: Vec<f64> = (0..b)
            .flat_map(|batch| full[(batch * n + p) * ds..(batch + 1) * n * ds].to_vec())
            .collect();
        assert_close(
            "softmax token x token vs full with prefix keys masked",
            &restricted,
            &token_part,
        );
    });
}
