//! Softmax self-attention modules (docs/construction.md §6.10–6.12; paper appendix J.2 for the
//! rotary, grouped-query variant of LLaMA-family models): the auxiliary model's attention forward
//! (aux heads packed into TinT heads), the value-only attention backward (scores recomputed from the
//! stored Q/K) and the `W_V` descent. One family serves every auxiliary: GPT-2/OPT multi-head
//! attention is the variant with `n_kv = H` key/value heads and no rotary embeddings
//! ([`AttentionVariant::multi_head`]).
//!
//! Packing: with `npart = D/hd`, `per = H/npart`, aux head `a` (query or KV) sits in TinT head region
//! `a / per` at head coords `[(a % per) h_a, (a % per + 1) h_a)`, so `c_proj` (out head `a / per`
//! sums its `per` heads) lays the aux head outputs out as dims `[0, D)`.
//!
//! GQA: `n_kv` key/value heads, each shared by `n_rep = H / n_kv` query heads (query head `i` reads
//! KV head `g = i / n_rep`; `n_kv = H`: `g = i`, plain multi-head). The K and V projections
//! `D → n_kv h_a` are `D × D` prefix blocks whose output rows `≥ n_kv h_a` are zero, so k and v are
//! `D`-wide with KV head `g` at coords `[g h_a, (g+1) h_a)`, laid out like the query heads. TinT head
//! `i < H` simulates query head `i`: its query is read from region `i / per` at offset
//! `(i % per) h_a`, its key and value from region `g / per` at offset `(g % per) h_a`.
//! * forward: head `i` writes its output at coords `(i % per) h_a` and `c_proj` sums it into output
//!   head `i / per`, so dims `[0, D)` hold the query heads concatenated (before `W_O`);
//! * backward: the value is `do` of query head `i`, written at coords `(g % per) h_a` and summed by
//!   `c_proj` into output head `g / per`: `dv` of KV head `g` is the sum over its `n_rep` query heads
//!   (the adjoint of sharing), in dims `[0, n_kv h_a)`.
//!
//! Rotary: the forward module rotates the q and k it computes ([`RotaryEmbedding`], position = token
//! index) before scoring them and storing them in memory; the backward scores the stored rotated
//! Q/K, so it needs no rotation of its own.

use burn::{
    module::Module,
    tensor::{backend::Backend, Tensor},
};

use crate::{
    attention::{
        AttentionMasks, AttentionRows, ContentProjection, PositionProjectionBuilder, Scoring,
        TintAttention, MASKED_SCORE,
    },
    context::SimContext,
    dims::TintDims,
    error::TintOpsError,
    gates::{GateKind, Gates},
    hsplit::{DimWiseBuilder, SplitWiseBuilder},
    layout,
    linear::{DescentUpdate, LinearBackwardDescent, LinearForward},
    options::TintOptions,
    rotary::RotaryEmbedding,
};

/// The three Q/K/V prefix blocks of an attention layer, each `[batch_size, P, Ds]`.
#[derive(Debug, Clone)]
pub struct QkvPrefixes<B: Backend> {
    /// `(W_Q, b_Q)` block.
    pub query: Tensor<B, 3>,
    /// `(W_K, b_K)` block.
    pub key: Tensor<B, 3>,
    /// `(W_V, b_V)` block.
    pub value: Tensor<B, 3>,
}

/// The auxiliary attention variant: KV heads and rotary base.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionVariant {
    /// Key/value heads `n_kv` (must divide the query heads `H`; `n_kv = H` is plain multi-head).
    pub n_kv_heads: usize,
    /// RoPE base `θ`; `None`: no rotary embeddings.
    pub rope_theta: Option<f64>,
}

impl AttentionVariant {
    /// Plain multi-head attention over `n_heads` heads (GPT-2, OPT): `n_kv = H`, no rotary.
    pub fn multi_head(n_heads: usize) -> Self {
        Self {
            n_kv_heads: n_heads,
            rope_theta: None,
        }
    }

    /// Checks the variant against `dims`.
    ///
    /// # Errors
    /// [`TintOpsError::BadOption`] when `n_kv_heads` is 0 or does not divide `H`.
    pub fn validate(&self, dims: &TintDims) -> Result<(), TintOpsError> {
        let h = dims.n_heads_aux();
        if self.n_kv_heads == 0 || !h.is_multiple_of(self.n_kv_heads) {
            return Err(TintOpsError::BadOption {
                name: "n_kv_heads",
                value: self.n_kv_heads as f64,
                reason: "must be positive and divide the auxiliary query heads H",
            });
        }
        Ok(())
    }
}

/// Which way the value path runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValuePath {
    /// Forward: query head `i` reads the value of KV head `g`, outputs at its own query slot.
    Forward,
    /// Backward: query head `i` reads `do` of query head `i`, outputs at the slot of KV head `g`.
    Backward,
}

/// Whether the attention backward runs before the `W_V` descent (the authors' code calls it
/// `backprop_through_attention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionBackprop {
    /// `dv` from the value-path attention backward (§6.11): the paper's construction.
    ThroughAttention,
    /// `dv = do`: the attention backward is skipped.
    Skip,
}

/// The softmax attention over `Hs` heads with q, k, v read from the `D`-wide regions starting at
/// heads `heads = [q, k, v]` (in units of `hd`), GQA-routed.
fn packed_softmax_attention<B: Backend>(
    dims: &TintDims,
    n_kv_heads: usize,
    heads: [usize; 3],
    path: ValuePath,
    options: &TintOptions,
    device: &B::Device,
) -> TintAttention<B> {
    let (hs, hd, h, ha, d) = (
        dims.n_heads_sim(),
        dims.head_dim_sim(),
        dims.n_heads_aux(),
        dims.head_dim_aux(),
        dims.d_model(),
    );
    let npart = d / hd;
    let per = h / npart;
    let n_rep = h / n_kv_heads;
    let dtype = options.float_dtype;
    // Aux head `a` (query or KV) sits in TinT region `a / per` at offset `(a % per) h_a`.
    let region = |a: usize| a / per;
    let offset = |a: usize| (a % per) * ha;
    let kv = |i: usize| i / n_rep;
    let mut q_route = DimWiseBuilder::zeros(hs, hd);
    let mut k_route = DimWiseBuilder::zeros(hs, hd);
    let mut v_route = DimWiseBuilder::zeros(hs, hd);
    let mut q_split = SplitWiseBuilder::zeros(hs, hd);
    let mut k_split = SplitWiseBuilder::zeros(hs, hd);
    let mut v_split = SplitWiseBuilder::zeros(hs, hd);
    let mut c_proj = DimWiseBuilder::zeros(hs, hd);
    for i in 0..h {
        let g = kv(i);
        q_route.set_all_coords(i, heads[0] + region(i), 1.0);
        k_route.set_all_coords(i, heads[1] + region(g), 1.0);
        for c in 0..ha {
            q_split.set(i, c, offset(i) + c, 1.0);
            k_split.set(i, c, offset(g) + c, 1.0);
        }
        match path {
            ValuePath::Forward => {
                v_route.set_all_coords(i, heads[2] + region(g), 1.0);
                for c in 0..ha {
                    v_split.set(i, offset(i) + c, offset(g) + c, 1.0);
                }
                c_proj.set_all_coords(region(i), i, 1.0);
            }
            ValuePath::Backward => {
                v_route.set_all_coords(i, heads[2] + region(i), 1.0);
                for c in 0..ha {
                    v_split.set(i, offset(g) + c, offset(i) + c, 1.0);
                }
                c_proj.set_all_coords(region(g), i, 1.0);
            }
        }
    }
    TintAttention {
        query: ContentProjection::new(q_route, q_split, dtype, device),
        key: ContentProjection::new(k_route, k_split, dtype, device),
        value: ContentProjection::new(v_route, v_split, dtype, device),
        // Position terms exist (parameter count) but λ = 0: positions enter through RoPE.
        positions: PositionProjectionBuilder::zeros(dims.position_dim(), hd, hs)
            .build(dtype, device),
        c_proj: c_proj.build(dtype, device),
        n_heads: hs,
        scoring: Scoring::Softmax {
            scale: 1.0 / (ha as f64).sqrt(),
        },
        causal_masks: Default::default(),
    }
}

/// Additive ICL mask `[B, T, T]`: `MASKED_SCORE` where `icl_mask = 0`.
fn icl_additive<B: Backend>(ctx: &SimContext<B>) -> Option<Tensor<B, 3>> {
    ctx.icl_mask
        .clone()
        .map(|icl| (icl.neg() + 1.0) * MASKED_SCORE)
}

/// AttentionForward (§6.10): token rows: dims `[0, D)` = the attention output (query heads
/// concatenated, before `W_O`), memory `[mem, mem+3D)` = `[Q_rot, K_rot, x]` (`mem = Ds - 3D`;
/// `Q`, `K` unrotated without rotary; `K_rot` zero beyond `n_kv h_a`); prefix rows = the Q block.
#[derive(Module, Debug)]
pub struct SelfAttentionForward<B: Backend> {
    /// Computes Q, K, V (used three times with the Q, K, V prefix blocks).
    pub linear: LinearForward<B>,
    /// RoPE on the computed q and k (`None`: no rotary).
    pub rotary: Option<RotaryEmbedding<B>>,
    /// GQA softmax attention over `Hs` heads, token rows only.
    pub attention: TintAttention<B>,
    /// Forward gate.
    pub gates: Gates<B>,
    /// `D`.
    pub d_model: usize,
    /// `Ds - 3D`.
    pub memory_index: usize,
}

impl<B: Backend> SelfAttentionForward<B> {
    /// Constructs the module.
    ///
    /// # Errors
    /// Invalid options or variant (see [`AttentionVariant::validate`], [`RotaryEmbedding::new`]).
    pub fn new(
        dims: &TintDims,
        variant: &AttentionVariant,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        variant.validate(dims)?;
        let npart = dims.d_model() / dims.head_dim_sim();
        let rotary = match variant.rope_theta {
            Some(theta) => Some(RotaryEmbedding::new(
                dims.d_model(),
                dims.head_dim_aux(),
                dims.max_seq_length(),
                theta,
                options.float_dtype,
                device,
            )?),
            None => None,
        };
        Ok(Self {
            linear: LinearForward::new(dims, None, options, device)?,
            rotary,
            attention: packed_softmax_attention(
                dims,
                variant.n_kv_heads,
                [0, npart, 2 * npart],
                ValuePath::Forward,
                options,
                device,
            ),
            gates: Gates::new(GateKind::ForwardBackward, dims, options, device),
            d_model: dims.d_model(),
            memory_index: dims.attn_memory_index(),
        })
    }

    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` (its prefix rows are ignored), prefix blocks
    ///   `[batch_size, P, Ds]` (K, V blocks zero beyond output row `n_kv h_a`) → `[batch_size, P + T, Ds]`
    pub fn forward(
        &self,
        state: Tensor<B, 3>,
        prefixes: &QkvPrefixes<B>,
        ctx: &SimContext<B>,
    ) -> Tensor<B, 3> {
        let [batch_size, n_rows, ds] = state.dims();
        let (p, d, mem) = (ctx.n_prefixes, self.d_model, self.memory_index);
        let t = n_rows - p;
        let project = |block: &Tensor<B, 3>| {
            if self.linear.is_structured() {
                // Dims `[0, D)` of the structured token rows are `W x + b` (the rest is zeros
                // and the memory): compute them alone, without assembling the `[P + T, Ds]`
                // input or the `Ds`-wide output.
                let x = layout::token_rows(state.clone(), p).narrow(2, 0, d);
                return self.linear.structured_product(block, x);
            }
            let input = layout::with_prefix_rows(state.clone(), block.clone());
            self.linear
                .forward_tokens(input, ctx, false)
                .narrow(2, 0, d) // [B, T, D]
        };
        let rotate = |x: Tensor<B, 3>| match &self.rotary {
            Some(rotary) => rotary.forward(x, ctx.position_index.clone().narrow(0, p, t)),
            None => x,
        };
        // The three projections are independent (parallel tasks on CPU backends).
        let blocks = [&prefixes.query, &prefixes.key, &prefixes.value];
        let mut qkv = crate::branches::map_in_order::<B, _, _>(&state.device(), 3, |i| {
            let projected = project(blocks[i]);
            if i < 2 {
                rotate(projected)
            } else {
                projected
            }
        })
        .into_iter();
        let (Some(q), Some(k), Some(v)) = (qkv.next(), qkv.next(), qkv.next()) else {
            unreachable!("map_in_order returns one result per index");
        };
        let x = layout::token_rows(state.clone(), p).narrow(2, 0, d);
        let zeros = Tensor::zeros(
            [batch_size, t, ds - 3 * d],
            (&state.device(), state.dtype()),
        );
        let qkv_rows = Tensor::cat(vec![q.clone(), k.clone(), v, zeros], 2);
        let input = layout::join_rows(prefixes.query.clone(), qkv_rows);
        let masks = AttentionMasks {
            causal: true,
            additive: icl_additive(ctx),
            ..AttentionMasks::none()
        };
        let rows = AttentionRows {
            queries: p..n_rows,
            keys: p..n_rows,
        };
        let out = self
            .attention
            .forward(input.clone(), ctx.position_index.clone(), rows, masks);
        let out = out.slice_assign(
            [0..batch_size, 0..t, mem..mem + 3 * d],
            Tensor::cat(vec![q, k, x], 2),
        );
        self.gates.combine(input, None, Some(out), ctx)
    }
}

/// AttentionBackward (§6.11), value path only: token rows `dv_j = Σ_{i, query heads of g} a[i,j]
/// M[j,i] do_i` per KV head `g` in dims `[0, n_kv h_a)` (`a` recomputed from the stored rotated
/// `[Q, K]`, `M[j,i] = 1` iff `i <= j` or `i` is a training token); memory `[mem, Ds)` passes
/// through; prefix rows unchanged.
#[derive(Module, Debug)]
pub struct SelfAttentionBackward<B: Backend> {
    /// Softmax attention: q from memory `Q`, k from memory `K`, v from the signal; transposed scores.
    pub attention: TintAttention<B>,
    /// Forward/backward gate.
    pub gates: Gates<B>,
    /// `Ds - 3D`.
    pub memory_index: usize,
}

impl<B: Backend> SelfAttentionBackward<B> {
    /// Constructs the module.
    ///
    /// # Errors
    /// Invalid options or variant.
    pub fn new(
        dims: &TintDims,
        variant: &AttentionVariant,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        options.validate()?;
        variant.validate(dims)?;
        let hd = dims.head_dim_sim();
        let mem = dims.attn_memory_index();
        let npart = dims.d_model() / hd;
        Ok(Self {
            attention: packed_softmax_attention(
                dims,
                variant.n_kv_heads,
                [mem / hd, mem / hd + npart, 0],
                ValuePath::Backward,
                options,
                device,
            ),
            gates: Gates::new(GateKind::ForwardBackward, dims, options, device),
            memory_index: mem,
        })
    }

    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let [batch_size, n_rows, ds] = state.dims();
        let p = ctx.n_prefixes;
        let t = n_rows - p;
        let mem = self.memory_index;
        // M[j, i] = 1 iff i <= j or i is a training token.
        let causal = Tensor::<B, 2>::ones([t, t], (&state.device(), state.dtype())).tril(0);
        let mask =
            (causal.unsqueeze::<3>() + ctx.train_mask.clone().unsqueeze_dim::<3>(1)).clamp_max(1.0);
        let masks = AttentionMasks {
            causal: true,
            transpose_scores: true,
            multiplicative: Some(mask),
            additive: icl_additive(ctx),
            key_mask: None,
        };
        let rows = AttentionRows {
            queries: p..n_rows,
            keys: p..n_rows,
        };
        let out = self
            .attention
            .forward(state.clone(), ctx.position_index.clone(), rows, masks);
        let out = out.slice_assign(
            [0..batch_size, 0..t, mem..ds],
            layout::token_memory(state.clone(), p, mem),
        );
        self.gates.combine(state, None, Some(out), ctx)
    }
}

/// AttentionBackward_Descent (§6.12): [`SelfAttentionBackward`] (skipped with
/// [`AttentionBackprop::Skip`]: `dv = do`), then [`LinearBackwardDescent`] with the V block in the
/// prefix rows and `x` at `Ds - 3D + 2D`: token rows `da = W_Vᵀ dv`, prefix rows
/// `W_V ← W_V - η Σ_train dv xᵀ` (rows `≥ n_kv h_a` stay 0 since `dv` is 0 there). The bias slot
/// is stepped as in [`LinearBackwardDescent`]; bias-free models restore it with
/// [`crate::bias_free::keep_bias`].
#[derive(Module, Debug)]
pub struct SelfAttentionBackwardDescent<B: Backend> {
    /// Value-path attention backward.
    pub backward: SelfAttentionBackward<B>,
    /// `W_V` backward + descent.
    pub value_descent: LinearBackwardDescent<B>,
    /// Whether the attention backward runs.
    #[module(skip)]
    pub backprop: AttentionBackprop,
}

impl<B: Backend> SelfAttentionBackwardDescent<B> {
    /// Constructs the module.
    ///
    /// # Errors
    /// Invalid options or variant.
    pub fn new(
        dims: &TintDims,
        variant: &AttentionVariant,
        backprop: AttentionBackprop,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        Self::with_bias_step_scale(dims, variant, backprop, 1.0, options, device)
    }

    /// [`SelfAttentionBackwardDescent::new`] with the `b_V` step scaled by `bias_step_scale`
    /// (0 for a bias-free value projection: the bias slot never moves).
    ///
    /// # Errors
    /// Invalid options, variant or scale.
    pub fn with_bias_step_scale(
        dims: &TintDims,
        variant: &AttentionVariant,
        backprop: AttentionBackprop,
        bias_step_scale: f64,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        let x_memory = dims.attn_memory_index() + 2 * dims.d_model();
        Ok(Self {
            backward: SelfAttentionBackward::new(dims, variant, options, device)?,
            value_descent: LinearBackwardDescent::with_bias_step_scale(
                dims,
                x_memory,
                DescentUpdate::WeightAndBias,
                bias_step_scale,
                options,
                device,
            )?,
            backprop,
        })
    }

    /// `state` prefix rows hold the V block; the output's prefix rows hold the updated V block.
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let state = match self.backprop {
            AttentionBackprop::ThroughAttention => self.backward.forward(state, ctx),
            AttentionBackprop::Skip => state,
        };
        self.value_descent.forward(state, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        prefix,
        rotary::rotary_angles,
        testing::{context_in, max_abs_diff, options_in, random, rounded, test_dims, TestBackend},
    };
    use burn::tensor::activation::softmax;
    use burn::tensor::{DType, TensorData};

    /// f64 softmax attention and rotations on O(1) values: round-off ~1e-15.
    const F64_TOL: f64 = 1e-10;
    /// f32 (eps 1.2e-7): q, k, v are sums of ≤ 16 products of O(1) values, rotated (two more
    /// products), then the softmax and value sums keep that relative round-off; the largest error
    /// seen over repeated random runs was ~1.5e-6, so 2e-5 keeps a >10x margin and still catches
    /// any routing error (O(1)).
    const F32_TOL: f64 = 2e-5;
    const BATCH: usize = 2;
    const THETA: f64 = 500.0;

    /// Grouped-query cases with rotary (per = H / (D / hd) ∈ {1, 2, 4}, n_rep ∈ {1, 2, 4}) and
    /// the multi-head variant of GPT-2/OPT (n_kv = H, no rotary) on every shared test shape.
    fn cases() -> Vec<(TintDims, AttentionVariant)> {
        let dims = |d, h, ds, p, hs, tmax, t| TintDims::new(d, h, ds, p, hs, tmax, t).unwrap();
        let gqa = |n_kv_heads| AttentionVariant {
            n_kv_heads,
            rope_theta: Some(THETA),
        };
        let mut cases = vec![
            (dims(16, 4, 80, 4, 20, 9, 7), gqa(2)), // hd = h_a = 4: per = 1, n_rep = 2
            (dims(16, 4, 80, 4, 5, 9, 7), gqa(2)),  // hd = 16: per = 4 (all heads in one region)
            (dims(8, 4, 32, 4, 8, 10, 6), gqa(2)),  // hd = 4, h_a = 2: per = 2
            (dims(8, 4, 32, 4, 8, 10, 6), gqa(1)),  // multi-query
            (dims(16, 4, 80, 4, 20, 9, 7), gqa(4)), // n_kv = H: plain multi-head with rotary
        ];
        // npart = D/hd = 2 > 1: two aux heads packed per TinT head group.
        let mut shapes = test_dims();
        shapes.push(dims(8, 4, 32, 4, 8, 10, 6));
        for shape in shapes {
            cases.push((shape, AttentionVariant::multi_head(shape.n_heads_aux())));
        }
        cases
    }

    fn heads(x: Tensor<TestBackend, 3>, n: usize) -> Tensor<TestBackend, 4> {
        let [b, t, w] = x.dims();
        x.reshape([b, t, n, w / n]).swap_dims(1, 2)
    }

    fn merge(x: Tensor<TestBackend, 4>) -> Tensor<TestBackend, 3> {
        let [b, h, t, ha] = x.dims();
        x.swap_dims(1, 2).reshape([b, t, h * ha])
    }

    /// Plain RoPE (HF rotate_half) on `[B, T, n · h_a]`, position = token index (identity without
    /// rotary).
    fn rope(
        x: Tensor<TestBackend, 3>,
        ha: usize,
        variant: &AttentionVariant,
    ) -> Tensor<TestBackend, 3> {
        let Some(theta) = variant.rope_theta else {
            return x;
        };
        let [b, t, w] = x.dims();
        let device = Default::default();
        let (cos, sin) = rotary_angles(t, ha, theta);
        let table = |v: Vec<f64>| {
            Tensor::<TestBackend, 2>::from_data(TensorData::new(v, [t, ha]), (&device, DType::F64))
                .reshape([1, 1, t, ha])
        };
        let xh = heads(x, w / ha); // [B, n, T, ha]
        let x1 = xh.clone().narrow(3, 0, ha / 2);
        let x2 = xh.clone().narrow(3, ha / 2, ha / 2);
        let rotated = Tensor::cat(vec![x2.neg(), x1], 3);
        let _ = b;
        merge(xh * table(cos) + rotated * table(sin))
    }

    /// `[B, T, n_kv h_a]` → `[B, H, T, h_a]`: query head `i` reads KV head `i / n_rep`.
    fn repeat_kv(x: Tensor<TestBackend, 3>, n_kv: usize, n_rep: usize) -> Tensor<TestBackend, 4> {
        let xh = heads(x, n_kv);
        let [b, _, t, ha] = xh.dims();
        xh.unsqueeze_dim::<5>(2)
            .repeat_dim(2, n_rep)
            .reshape([b, n_kv * n_rep, t, ha])
    }

    /// Causal softmax probabilities `[B, H, i, j]` of rotated q `[B, T, D]` and KV-layout k.
    fn probs(
        q: Tensor<TestBackend, 3>,
        k: Tensor<TestBackend, 3>,
        h: usize,
        n_kv: usize,
    ) -> Tensor<TestBackend, 4> {
        let [_, t, d] = q.dims();
        let ha = d / h;
        let keys = repeat_kv(k.narrow(2, 0, n_kv * ha), n_kv, h / n_kv);
        let scores = heads(q, h).matmul(keys.swap_dims(2, 3)) / (ha as f64).sqrt();
        let upper =
            Tensor::<TestBackend, 2>::ones([t, t], (&Default::default(), scores.dtype())).triu(1);
        softmax(scores + upper.reshape([1, 1, t, t]) * -1e30, 3)
    }

    /// `[B, D, D]` random weight whose output rows `>= rows` are 0 (a padded `D → rows` map).
    fn padded_weight(d: usize, rows: usize, dtype: DType) -> Tensor<TestBackend, 3> {
        let w = rounded(random([BATCH, d, d], 0.5), dtype);
        let keep = Tensor::<TestBackend, 1>::from_data(
            TensorData::new(
                (0..d).map(|r| if r < rows { 1.0 } else { 0.0 }).collect(),
                [d],
            ),
            (&Default::default(), DType::F64),
        );
        w * keep.reshape([1, d, 1])
    }

    fn padded_bias(d: usize, rows: usize, dtype: DType) -> Tensor<TestBackend, 2> {
        let b = rounded(random([BATCH, d], 0.5), dtype);
        let zeros = Tensor::zeros([BATCH, d - rows], (&Default::default(), DType::F64));
        Tensor::cat(vec![b.narrow(1, 0, rows), zeros], 1)
    }

    fn forward_case(dtype: DType, tol: f64) {
        let device = Default::default();
        for (dims, variant) in cases() {
            let n_kv = variant.n_kv_heads;
            let (d, p, h, mem) = (
                dims.d_model(),
                dims.n_prefixes(),
                dims.n_heads_aux(),
                dims.attn_memory_index(),
            );
            let ha = dims.head_dim_aux();
            let module = SelfAttentionForward::<TestBackend>::new(
                &dims,
                &variant,
                &options_in(dtype),
                &device,
            )
            .unwrap();
            let ctx = context_in(&dims, BATCH, dtype);
            let (wq, bq) = (padded_weight(d, d, dtype), padded_bias(d, d, dtype));
            let (wk, bk) = (
                padded_weight(d, n_kv * ha, dtype),
                padded_bias(d, n_kv * ha, dtype),
            );
            let (wv, bv) = (
                padded_weight(d, n_kv * ha, dtype),
                padded_bias(d, n_kv * ha, dtype),
            );
            let block = |w: &Tensor<TestBackend, 3>, b: &Tensor<TestBackend, 2>| {
                prefix::write_linear(w.clone(), b.clone(), &dims).unwrap()
            };
            let state = rounded(random([BATCH, dims.n_rows(), dims.d_sim()], 1.0), dtype);
            let query_block = block(&wq, &bq).cast(dtype).cast(DType::F64);
            let out = module
                .forward(
                    state.clone().cast(dtype),
                    &QkvPrefixes {
                        query: block(&wq, &bq).cast(dtype),
                        key: block(&wk, &bk).cast(dtype),
                        value: block(&wv, &bv).cast(dtype),
                    },
                    &ctx,
                )
                .cast(DType::F64);
            let x = layout::token_rows(state, p).narrow(2, 0, d);
            let lin = |w: Tensor<TestBackend, 3>, b: Tensor<TestBackend, 2>| {
                x.clone().matmul(w.swap_dims(1, 2)) + b.unsqueeze_dim(1)
            };
            let q = rope(lin(wq, bq), ha, &variant);
            let k = rope(lin(wk, bk), ha, &variant);
            let v = lin(wv, bv);
            let values = repeat_kv(v.narrow(2, 0, n_kv * ha), n_kv, h / n_kv);
            let expected = merge(probs(q.clone(), k.clone(), h, n_kv).matmul(values));
            let out_tok = layout::token_rows(out.clone(), p);
            let err = max_abs_diff(out_tok.clone().narrow(2, 0, d), expected);
            let what = format!(
                "{dtype:?}, D = {d}, Hs = {}, {variant:?}",
                dims.n_heads_sim()
            );
            assert!(err < tol, "{what}: output err {err}");
            let memory = Tensor::cat(vec![q, k, x], 2);
            let err = max_abs_diff(out_tok.narrow(2, mem, 3 * d), memory);
            assert!(err < tol, "{what}: memory [Q_rot, K_rot, x] err {err}");
            assert_eq!(
                max_abs_diff(out.narrow(1, 0, p), query_block),
                0.0,
                "{what}: prefix rows = Q block"
            );
        }
    }

    #[test]
    fn forward_matches_plain_causal_attention_multi_head_and_grouped_query() {
        forward_case(DType::F64, F64_TOL);
    }

    #[test]
    fn forward_in_f32_matches_plain_causal_attention_multi_head_and_grouped_query() {
        forward_case(DType::F32, F32_TOL);
    }

    fn backward_descent_case(dtype: DType, tol: f64) {
        let device = Default::default();
        let eta = 0.1;
        for ((dims, variant), backprop) in cases().into_iter().flat_map(|case| {
            [AttentionBackprop::ThroughAttention, AttentionBackprop::Skip].map(|b| (case, b))
        }) {
            let n_kv = variant.n_kv_heads;
            let (d, p, h, mem, ds) = (
                dims.d_model(),
                dims.n_prefixes(),
                dims.n_heads_aux(),
                dims.attn_memory_index(),
                dims.d_sim(),
            );
            let (ha, t) = (dims.head_dim_aux(), dims.seq_length());
            let options = options_in(dtype).with_inner_lr(eta);
            let module = SelfAttentionBackwardDescent::<TestBackend>::new(
                &dims, &variant, backprop, &options, &device,
            )
            .unwrap();
            let ctx = context_in(&dims, BATCH, dtype);
            let train_mask = ctx.train_mask.clone().cast(DType::F64);
            let wv = padded_weight(d, n_kv * ha, dtype);
            let bv = padded_bias(d, n_kv * ha, dtype);
            // Stored rotated Q and K (K: KV layout, junk beyond n_kv h_a must be ignored).
            let (q, k, x, d_out) = (
                rounded(random([BATCH, t, d], 1.0), dtype),
                rounded(random([BATCH, t, d], 1.0), dtype),
                rounded(random([BATCH, t, d], 1.0), dtype),
                rounded(random([BATCH, t, d], 1.0), dtype),
            );
            let junk = rounded(random([BATCH, t, mem - d], 1.0), dtype);
            let tokens = Tensor::cat(
                vec![d_out.clone(), junk, q.clone(), k.clone(), x.clone()],
                2,
            );
            assert_eq!(tokens.dims()[2], ds);
            let state = layout::join_rows(
                prefix::write_linear(wv.clone(), bv.clone(), &dims).unwrap(),
                tokens,
            );
            let out = module.forward(state.cast(dtype), &ctx).cast(DType::F64);
            // dv_j (per query head) = Σ_i a[i,j] M[j,i] do_i; KV head g sums its query heads.
            let a = probs(q, k, h, n_kv); // [B, H, i, j]
            let tril = Tensor::<TestBackend, 2>::ones([t, t], (&device, a.dtype())).tril(0);
            let m =
                (tril.unsqueeze::<3>() + train_mask.clone().unsqueeze_dim::<3>(1)).clamp_max(1.0);
            let weights = a.swap_dims(2, 3) * m.unsqueeze_dim(1); // [B, H, j, i]
            let dv_rep = weights.matmul(heads(d_out.clone(), h)); // [B, H, j, ha]
            let dv_kv = dv_rep
                .reshape([BATCH, n_kv, h / n_kv, t, ha])
                .sum_dim(2)
                .reshape([BATCH, n_kv, t, ha]);
            let pad = Tensor::zeros([BATCH, t, d - n_kv * ha], (&device, DType::F64));
            let dv = match backprop {
                AttentionBackprop::ThroughAttention => Tensor::cat(vec![merge(dv_kv), pad], 2),
                AttentionBackprop::Skip => d_out,
            };
            let da = dv.clone().matmul(wv.clone());
            let out_tok = layout::token_rows(out.clone(), p);
            let what = format!(
                "{dtype:?}, D = {d}, Hs = {}, {variant:?}, {backprop:?}",
                dims.n_heads_sim()
            );
            let err = max_abs_diff(out_tok.narrow(2, 0, d), da);
            assert!(err < tol, "{what}: da err {err}");
            let masked = dv * train_mask.unsqueeze_dim(2);
            let new_w = wv - masked.clone().swap_dims(1, 2).matmul(x) * eta;
            let new_b = bv - masked.sum_dim(1).squeeze_dim(1) * eta;
            let (got_w, got_b) = prefix::read_linear(out.narrow(1, 0, p), &dims).unwrap();
            let (err_w, err_b) = (max_abs_diff(got_w, new_w), max_abs_diff(got_b, new_b));
            assert!(
                err_w < tol && err_b < tol,
                "{what}: W_V err {err_w}, b_V err {err_b}"
            );
        }
    }

    #[test]
    fn backward_descent_matches_value_only_backward_summed_over_query_groups_and_w_v_step() {
        backward_descent_case(DType::F64, F64_TOL);
    }

    #[test]
    fn backward_descent_in_f32_matches_value_only_backward_and_w_v_step() {
        backward_descent_case(DType::F32, F32_TOL);
    }

    #[test]
    fn kv_heads_must_divide_query_heads() {
        let device = Default::default();
        let dims = TintDims::new(16, 4, 80, 4, 20, 9, 7).unwrap();
        let options = options_in(DType::F64);
        for n_kv in [0, 3, 8] {
            let variant = AttentionVariant {
                n_kv_heads: n_kv,
                rope_theta: Some(THETA),
            };
            assert!(matches!(
                SelfAttentionForward::<TestBackend>::new(&dims, &variant, &options, &device),
                Err(TintOpsError::BadOption {
                    name: "n_kv_heads",
                    ..
                })
            ));
            assert!(matches!(
                SelfAttentionBackwardDescent::<TestBackend>::new(
                    &dims,
                    &variant,
                    AttentionBackprop::ThroughAttention,
                    &options,
                    &device
                ),
                Err(TintOpsError::BadOption {
                    name: "n_kv_heads",
                    ..
                })
            ));
        }
        let variant = AttentionVariant {
            n_kv_heads: 2,
            rope_theta: Some(-1.0),
        };
        assert!(matches!(
            SelfAttentionForward::<TestBackend>::new(&dims, &variant, &options, &device),
            Err(TintOpsError::BadOption {
                name: "rope_theta",
                ..
            })
        ));
    }
}
