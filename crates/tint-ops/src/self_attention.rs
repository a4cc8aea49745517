//! Softmax self-attention modules (docs/construction.md §6.10–6.12): the auxiliary model's attention forward
//! (aux heads packed into TinT heads), the value-only attention backward and the `W_V` descent.
//!
//! TinT head `i < H` simulates aux head `i`: with `npart = D/hd`, `per = H/npart`, `pi = i / per`,
//! `r = i % per`, its query/key are the aux head's `h_a` coordinates (placed at head coords
//! `[0, h_a)`) and its value sits at head coords `[r h_a, (r+1) h_a)`, so `c_proj` (out head
//! `pi` = Σ_r head `pi·per + r`) lays the aux head outputs out as dims `[0, D)`.

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
    linear::{LinearDescentBackward, LinearForward},
    options::TintOptions,
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

/// Builds the softmax attention over `Hs` heads whose q, k, v read the `D`-wide regions starting
/// at heads `q_head`, `k_head`, `v_head` (in units of `hd`).
fn packed_softmax_attention<B: Backend>(
    dims: &TintDims,
    heads: [usize; 3],
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
    let dtype = options.float_dtype;
    let route = |start_head: usize| {
        let mut dim_wise = DimWiseBuilder::zeros(hs, hd);
        for i in 0..h {
            dim_wise.set_all_coords(i, start_head + i / per, 1.0);
        }
        dim_wise
    };
    let mut qk_split = SplitWiseBuilder::zeros(hs, hd);
    let mut v_split = SplitWiseBuilder::zeros(hs, hd);
    for i in 0..h {
        let r = i % per;
        for c in 0..ha {
            qk_split.set(i, c, r * ha + c, 1.0);
            v_split.set(i, r * ha + c, r * ha + c, 1.0);
        }
    }
    let mut c_proj = DimWiseBuilder::zeros(hs, hd);
    for i in 0..h {
        c_proj.set_all_coords(i / per, i, 1.0);
    }
    TintAttention {
        query: ContentProjection::new(route(heads[0]), qk_split.clone(), dtype, device),
        key: ContentProjection::new(route(heads[1]), qk_split, dtype, device),
        value: ContentProjection::new(route(heads[2]), v_split, dtype, device),
        // Position terms exist (parameter count) but λ = 0.
        positions: PositionProjectionBuilder::zeros(dims.position_dim(), hd, hs)
            .build(dtype, device),
        c_proj: c_proj.build(dtype, device),
        n_heads: hs,
        scoring: Scoring::Softmax {
            scale: 1.0 / (ha as f64).sqrt(),
        },
    }
}

/// Additive ICL mask `[B, T, T]`: `MASKED_SCORE` where `icl_mask = 0`.
fn icl_additive<B: Backend>(ctx: &SimContext<B>) -> Option<Tensor<B, 3>> {
    ctx.icl_mask
        .clone()
        .map(|icl| (icl.neg() + 1.0) * MASKED_SCORE)
}

/// AttentionForward (§6.10): token rows: dims `[0, D)` = the aux attention output (heads
/// concatenated, before the aux `c_proj`), memory `[mem, mem+3D)` = `[Q, K, x]` (`mem = Ds - 3D`);
/// prefix rows = the Q block.
#[derive(Module, Debug)]
pub struct SelfAttentionForward<B: Backend> {
    /// Computes Q, K, V (used three times with the Q, K, V prefix blocks).
    pub linear: LinearForward<B>,
    /// Softmax attention over `Hs` heads, token rows only.
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
    /// Invalid options.
    pub fn new(
        dims: &TintDims,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        let npart = dims.d_model() / dims.head_dim_sim();
        Ok(Self {
            linear: LinearForward::new(dims, None, options, device)?,
            attention: packed_softmax_attention(dims, [0, npart, 2 * npart], options, device),
            gates: Gates::new(GateKind::ForwardBackward, dims, options, device),
            d_model: dims.d_model(),
            memory_index: dims.attn_memory_index(),
        })
    }

    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` (its prefix rows are ignored), prefix blocks
    ///   `[batch_size, P, Ds]` → `[batch_size, P + T, Ds]`
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
            let input = layout::with_prefix_rows(state.clone(), block.clone());
            self.linear
                .forward_tokens(input, ctx, false)
                .narrow(2, 0, d) // [B, T, D]
        };
        let q = project(&prefixes.query);
        let k = project(&prefixes.key);
        let v = project(&prefixes.value);
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

/// AttentionBackward (§6.11), value path only: token rows `dv_j = Σ_i a[i,j] M[j,i] do_i` per aux
/// head in dims `[0, D)` (`a` recomputed from the stored `[Q, K]`, `do` = dims `[0, D)`,
/// `M[j,i] = 1` iff `i <= j` or `i` is a training token); memory `[mem, Ds)` passes through; prefix
/// rows unchanged.
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
    /// Invalid options.
    pub fn new(
        dims: &TintDims,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        options.validate()?;
        let hd = dims.head_dim_sim();
        let mem = dims.attn_memory_index();
        let npart = dims.d_model() / hd;
        Ok(Self {
            attention: packed_softmax_attention(
                dims,
                [mem / hd, mem / hd + npart, 0],
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
        // M[j, i] = 1 iff i <= j or i is a training token (attention_mask, token block).
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

/// AttentionBackward_Descent (§6.12): [`SelfAttentionBackward`] (skipped when
/// `backprop_through_attention` is false: `dv = do`), then [`LinearDescentBackward`] with the V
/// block in the prefix rows and `x` at `Ds - 3D + 2D`: token rows `da = W_Vᵀ dv`, prefix rows
/// `W_V ← W_V - η Σ_train dv xᵀ`, `b_V ← b_V - η Σ_train dv`.
#[derive(Module, Debug)]
pub struct SelfAttentionBackwardDescent<B: Backend> {
    /// Value-path attention backward.
    pub backward: SelfAttentionBackward<B>,
    /// `W_V` backward + descent.
    pub value_descent: LinearDescentBackward<B>,
    /// Whether the attention backward runs (`backprop_through_attention`).
    pub backprop_through_attention: bool,
}

impl<B: Backend> SelfAttentionBackwardDescent<B> {
    /// Constructs the module.
    ///
    /// # Errors
    /// Invalid options.
    pub fn new(
        dims: &TintDims,
        backprop_through_attention: bool,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        let x_memory = dims.attn_memory_index() + 2 * dims.d_model();
        Ok(Self {
            backward: SelfAttentionBackward::new(dims, options, device)?,
            value_descent: LinearDescentBackward::new(dims, x_memory, false, options, device)?,
            backprop_through_attention,
        })
    }

    /// `state` prefix rows hold the V block; the output's prefix rows hold the updated V block.
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`
    pub fn forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3> {
        let state = if self.backprop_through_attention {
            self.backward.forward(state, ctx)
        } else {
            state
        };
        self.value_descent.forward(state, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        prefix,
        testing::{context_in, max_abs_diff, options_in, random, rounded, test_dims, TestBackend},
    };
    use burn::tensor::activation::softmax;
    use burn::tensor::DType;

    /// f64 softmax attention over a handful of O(1) scores: round-off ~1e-15.
    const F64_TOL: f64 = 1e-10;
    /// f32 (eps 1.2e-7): q, k, v are sums of ≤ 16 products of O(1) values, the softmax and the
    /// value sums keep that relative round-off; the largest error seen over repeated random runs
    /// was 1.5e-6, so 2e-5 keeps a >10x margin and still catches any construction error.
    const F32_TOL: f64 = 2e-5;
    const BATCH: usize = 2;

    /// Plain multi-head causal attention probabilities `a[b, h, i, j]`.
    fn probs(
        q: Tensor<TestBackend, 3>,
        k: Tensor<TestBackend, 3>,
        n_heads: usize,
    ) -> Tensor<TestBackend, 4> {
        let [b, t, d] = q.dims();
        let ha = d / n_heads;
        let split = |x: Tensor<TestBackend, 3>| x.reshape([b, t, n_heads, ha]).swap_dims(1, 2);
        let scores = split(q).matmul(split(k).swap_dims(2, 3)) / (ha as f64).sqrt();
        let upper =
            Tensor::<TestBackend, 2>::ones([t, t], (&Default::default(), scores.dtype())).triu(1);
        softmax(scores + upper.reshape([1, 1, t, t]) * -1e30, 3)
    }

    fn heads(x: Tensor<TestBackend, 3>, n_heads: usize) -> Tensor<TestBackend, 4> {
        let [b, t, d] = x.dims();
        x.reshape([b, t, n_heads, d / n_heads]).swap_dims(1, 2)
    }

    fn merge(x: Tensor<TestBackend, 4>) -> Tensor<TestBackend, 3> {
        let [b, h, t, ha] = x.dims();
        x.swap_dims(1, 2).reshape([b, t, h * ha])
    }

    fn all_dims() -> Vec<TintDims> {
        let mut dims = test_dims();
        // npart = D/hd = 2 > 1: two aux heads packed per TinT head group.
        dims.push(TintDims::new(8, 4, 32, 4, 8, 10, 6).unwrap());
        dims
    }

    /// SelfAttentionForward in `dtype` on inputs rounded to `dtype`; the reference is f64 math.
    fn attention_forward_case(dtype: DType, tol: f64) {
        let device = Default::default();
        for dims in all_dims() {
            let (d, p, h, mem) = (
                dims.d_model(),
                dims.n_prefixes(),
                dims.n_heads_aux(),
                dims.attn_memory_index(),
            );
            let t = dims.seq_length();
            let module =
                SelfAttentionForward::<TestBackend>::new(&dims, &options_in(dtype), &device)
                    .unwrap();
            let ctx = context_in(&dims, BATCH, dtype);
            let block = || {
                let w = rounded(random([BATCH, d, d], 0.5), dtype);
                let b = rounded(random([BATCH, d], 0.5), dtype);
                (
                    prefix::write_linear(w.clone(), b.clone(), &dims).unwrap(),
                    w,
                    b,
                )
            };
            let (pq, wq, bq) = block();
            let (pk, wk, bk) = block();
            let (pv, wv, bv) = block();
            let state = rounded(random([BATCH, dims.n_rows(), dims.d_sim()], 1.0), dtype);
            let out = module
                .forward(
                    state.clone().cast(dtype),
                    &QkvPrefixes {
                        query: pq.clone().cast(dtype),
                        key: pk.cast(dtype),
                        value: pv.cast(dtype),
                    },
                    &ctx,
                )
                .cast(DType::F64);
            let x = layout::token_rows(state, p).narrow(2, 0, d);
            let lin = |w: Tensor<TestBackend, 3>, b: Tensor<TestBackend, 2>| {
                x.clone().matmul(w.swap_dims(1, 2)) + b.unsqueeze_dim(1)
            };
            let (q, k, v) = (lin(wq, bq), lin(wk, bk), lin(wv, bv));
            let expected = merge(probs(q.clone(), k.clone(), h).matmul(heads(v, h)));
            let out_tok = layout::token_rows(out.clone(), p);
            let err = max_abs_diff(out_tok.clone().narrow(2, 0, d), expected);
            assert!(err < tol, "{dtype:?}, S = {}, H = {h}: {err}", dims.stack());
            let memory = Tensor::cat(vec![q, k, x], 2);
            assert!(max_abs_diff(out_tok.narrow(2, mem, 3 * d), memory) < tol);
            assert_eq!(
                max_abs_diff(out.narrow(1, 0, p), pq),
                0.0,
                "prefix rows = Q block"
            );
            let _ = t;
        }
    }

    #[test]
    fn attention_forward_matches_causal_multi_head_attention() {
        attention_forward_case(DType::F64, F64_TOL);
    }

    #[test]
    fn attention_forward_in_f32_matches_causal_multi_head_attention() {
        attention_forward_case(DType::F32, F32_TOL);
    }

    /// SelfAttentionBackwardDescent in `dtype` on inputs rounded to `dtype`; f64 reference.
    fn attention_backward_descent_case(dtype: DType, tol: f64) {
        let device = Default::default();
        let eta = 0.1;
        for dims in all_dims() {
            let (d, p, h, mem, ds) = (
                dims.d_model(),
                dims.n_prefixes(),
                dims.n_heads_aux(),
                dims.attn_memory_index(),
                dims.d_sim(),
            );
            let t = dims.seq_length();
            let options = options_in(dtype).with_inner_lr(eta);
            let module =
                SelfAttentionBackwardDescent::<TestBackend>::new(&dims, true, &options, &device)
                    .unwrap();
            let ctx = context_in(&dims, BATCH, dtype);
            let train_mask = ctx.train_mask.clone().cast(DType::F64);
            let wv = rounded(random([BATCH, d, d], 0.5), dtype);
            let bv = rounded(random([BATCH, d], 0.5), dtype);
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
            // Reference (docs/construction.md §9.2): dv_j = Σ_i a[i,j] M[j,i] do_i, M[j,i] = 1[i <= j or train_i].
            let a = probs(q, k, h); // [B, H, i, j]
            let tril = Tensor::<TestBackend, 2>::ones([t, t], (&device, a.dtype())).tril(0);
            let m =
                (tril.unsqueeze::<3>() + train_mask.clone().unsqueeze_dim::<3>(1)).clamp_max(1.0); // [B, j, i]
            let weights = a.swap_dims(2, 3) * m.unsqueeze_dim(1); // [B, H, j, i]
            let dv = merge(weights.matmul(heads(d_out, h)));
            let da = dv.clone().matmul(wv.clone());
            let out_tok = layout::token_rows(out.clone(), p);
            let err = max_abs_diff(out_tok.narrow(2, 0, d), da);
            assert!(
                err < tol,
                "{dtype:?}, S = {}, H = {h}: da err {err}",
                dims.stack()
            );
            let masked = dv * train_mask.unsqueeze_dim(2);
            let new_w = wv - masked.clone().swap_dims(1, 2).matmul(x) * eta;
            let new_b = bv - masked.sum_dim(1).squeeze_dim(1) * eta;
            let (got_w, got_b) = prefix::read_linear(out.narrow(1, 0, p), &dims).unwrap();
            let (err_w, err_b) = (max_abs_diff(got_w, new_w), max_abs_diff(got_b, new_b));
            assert!(
                err_w < tol && err_b < tol,
                "{dtype:?}, S = {}: W_V err {err_w}, b_V err {err_b}",
                dims.stack()
            );
        }
    }

    #[test]
    fn attention_backward_descent_matches_value_only_backward_and_w_v_step() {
        attention_backward_descent_case(DType::F64, F64_TOL);
    }

    #[test]
    fn attention_backward_descent_in_f32_matches_value_only_backward_and_w_v_step() {
        attention_backward_descent_case(DType::F32, F32_TOL);
    }
}
