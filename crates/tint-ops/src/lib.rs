//! TinT primitives: the building blocks of the Trainable Transformer in Transformer construction
//! (docs/construction.md §1.2, §2, §3, §6; paper appendix C–G), as burn modules whose weights are
//! **constructed** from the spec, never trained.
//!
//! A TinT "state" is a `[batch_size, n_rows, d_sim]` tensor with `n_rows = P + T`: rows `0..P` are the
//! prefix rows (they hold one `D x D` weight + bias of the simulated auxiliary model, §2.5), rows
//! `P..P+T` are the token rows (signal in dims `[0, D)`, stored activations in memory regions, §2.4).
//! Every module here maps a state to a state (`[B, P+T, Ds] -> [B, P+T, Ds]`) by running the
//! constructed TinT layers on the `Ds`-wide rows; the tests check each one against the plain math
//! it simulates (`W x + b`, `Wᵀ dy`, `W - η Σ dy xᵀ`, LayerNorm, first-order backward, ...).
//!
//! # Crate map
//!
//! | module | what it holds |
//! |---|---|
//! | [`error`] | [`TintOpsError`]: every invalid hyper-parameter / shape, naming the rule and values |
//! | [`dims`] | [`TintDims`]: `(D, H, Ds, P, Hs, Tmax, T)` validated against §1.2, derived sizes (`S`, `nl`, `hd`, `Pd`) |
//! | [`layout`] | memory-region indices (§2.4), row/position layout (§2.1–2.2), state surgery helpers |
//! | [`context`] | [`SimContext`]: per-call inputs (row → one-hot position index, training-token mask, ICL mask) |
//! | [`options`] | [`TintOptions`]: float dtype, gate mode, finite-difference scale / exact derivatives, LN ε, η, activation |
//! | [`prefix`] | write a `D x D` weight + bias into `[P, Ds]` prefix rows (stacking, §2.5) and read it back |
//! | [`hsplit`] | [`SplitWise`] (`nf` blocks, `nx x nx` each) and [`DimWise`] (`nx` coordinates, `nf x nf` each) ops (§3.2) |
//! | [`segment`] | [`hsplit::Segment`]: one run of output columns of an H-split op (copy, zero, sum, gather, matmul block); on burn-flex a plan runs as one pass per output row (private modules `flex_segments`, `flex_position`, `flex_norm`, `flex_activation`, behind `flex_host`; the generic form stays the reference) |
//! | [`gates`] | [`Gates`]: forward/backward and descent gates, exact 0/1 selections or tanh form (§3.3) |
//! | [`group_norm`] | the group norm over the first `D` dims (§3.4) and [`NormKind`] (LayerNorm or RMSNorm) |
//! | [`attention`] | [`TintAttention`]: TinT multi-head attention (§3.1): q/k/v projections, one-hot position terms with per-head λ gates, linear or softmax scores, causal / custom masks, backward transpose, row restriction |
//! | [`linear`] | [`LinearForward`], [`LinearBackward`], [`LinearDescent`], [`LinearBackwardDescent`] (§6.1–6.4) |
//! | [`norm`] | [`NormForward`], [`NormBackward`] (§6.5–6.6): LayerNorm and RMSNorm, forward and first-order backward |
//! | [`layer_norm`] | [`LayerNormBackwardDescent`] (§6.6–6.7): the LayerNorm backward with the bias-only descent |
//! | [`precision`] | [`precision::in_float64`]: the constructed execution's first-order differences in float64 arithmetic on float32 states |
//! | [`difference`] | the first-order differences `s (f(x + v/s) - f(x))` of the norm and activation backward in cancellation-free form |
//! | [`mask_cache`] | [`mask_cache::CausalMaskCache`]: the causal masks of a `TintAttention`, built once per row ranges and kept on the device |
//! | [`branches`] | (the `tint-branches` crate, re-exported) independent parts of a step (MLP chunks, backward/descent halves, Q/K/V, head halves) as parallel rayon tasks on CPU backends, combined in loop order |
//! | [`activation`] | [`ActivationForward`], [`ActivationBackward`] (§6.8–6.9), `gelu_new` and `relu` |
//! | [`self_attention`] | [`SelfAttentionForward`], [`SelfAttentionBackward`], [`SelfAttentionBackwardDescent`] (§6.10–6.12): multi-head (GPT-2, OPT) and rotary grouped-query attention (LLaMA), one family ([`AttentionVariant`]) |
//! | [`rotary`] | [`rotary::RotaryEmbedding`]: RoPE (HF `rotate_half`) on the q/k of the attention forward |
//! | [`bias_free`] | [`bias_free::keep_bias`]: bias-free linear layers keep their (zero) bias slot through descent |
//! | [`param_count`] | closed forms of docs/construction.md §11 (`G`, `Q1`, `LF`, `LB`, ...) |
//!
//! # How a module is built and applied
//!
//! ```text
//! let dims = TintDims::new(d_model, n_heads_aux, d_sim, n_prefixes, n_heads_sim, max_seq_length, seq_length)?;
//! let options = TintOptions::default().with_float_dtype(DType::F64);      // exact 0/1 gates by default
//! let ctx = SimContext::new(&dims, train_mask /* [B, T] 0/1 */, &device)?;
//! let lin = LinearForward::new(&dims, Some(dims.linear_memory_index()), &options, &device)?;
//! let prefix = prefix::write_linear(weight /* [D, D] out x in */, bias /* [D] */, &dims)?;   // [P, Ds]
//! let state = layout::with_prefix_rows(state, prefix.unsqueeze::<3>().repeat_dim(0, batch_size));
//! let out = lin.forward(state, &ctx);   // token rows: [W x + b, 0.., x at memory], prefix rows kept
//! ```
//!
//! * Constructors take the validated [`TintDims`], the [`TintOptions`] and a device, and return
//!   `Result<_, TintOpsError>` (bad memory indices etc. are errors, never panics in a kernel).
//! * `forward(&self, state: Tensor<B, 3>, ctx: &SimContext<B>) -> Tensor<B, 3>` for every state module;
//!   descent-type modules return the state whose prefix rows hold the **updated** block.
//!   [`SelfAttentionForward`] additionally takes the Q, K, V prefix blocks.
//! * All weights exist as `Param`s with the shapes of the official code, so `Module::num_params()`
//!   equals the §11 closed forms ([`param_count`]). The forward passes exploit the constructed
//!   structure: one-hot positions are row gathers, split-wise ops are batched `[nf, nx, nx]` matmuls,
//!   dimension-wise ops are batched `[nx, nf, nf]` matmuls, identity / all-zero / block-selection ops are
//!   recognised at construction and applied as copies / selections (`forward_dense` runs the matmul
//!   anyway; tests check both agree), linear prefix attention computes token queries x prefix keys
//!   only, softmax attention computes token x token only (prefix columns are always masked).
//! * [`Execution`] ([`TintOptions::execution`]): `Constructed` (default) evaluates every module from
//!   its stored weights (the linear modules' attention over the prefix rows, the shift maps, the gates
//!   from their stored weights, `tanh` with [`GateMode::Tanh`] or its hard limit); `Structured` is the
//!   proven-equal shortcut (`W, b` read from the prefix rows into one matmul, differences applied
//!   directly, gates as 0/1 row selections). See docs/construction.md §15, "Executions".
//! * f64 works end to end (construct with `DType::F64`, feed f64 states).
#![warn(missing_docs)]

pub mod activation;
pub mod attention;
pub mod bias_free;
pub use tint_branches as branches;
pub mod context;
pub mod difference;
pub mod dims;
pub mod error;
mod flex_activation;
mod flex_host;
mod flex_norm;
mod flex_position;
mod flex_segments;
pub mod gates;
pub mod glu;
pub mod group_norm;
mod host;
pub mod hsplit;
pub mod layer_norm;
pub mod layout;
pub mod linear;
pub mod mask_cache;
pub mod mlp_chunk;
pub mod norm;
pub mod options;
pub mod param_count;
pub mod precision;
pub mod prefix;
pub mod rotary;
pub mod segment;
pub mod self_attention;
#[cfg(test)]
mod testing;

pub use activation::{ActivationBackward, ActivationForward};
pub use attention::{AttentionMasks, AttentionRows, Scoring, TintAttention};
pub use context::SimContext;
pub use dims::TintDims;
pub use error::TintOpsError;
pub use gates::{GateKind, Gates};
pub use group_norm::NormKind;
pub use hsplit::{DimWise, SplitWise};
pub use layer_norm::LayerNormBackwardDescent;
pub use linear::{
    DescentUpdate, LinearBackward, LinearBackwardDescent, LinearDescent, LinearForward,
};
pub use norm::{NormBackward, NormForward};
pub use options::{ActivationKind, Derivative, Execution, GateMode, TintOptions};
pub use self_attention::{
    AttentionBackprop, AttentionVariant, QkvPrefixes, SelfAttentionBackward,
    SelfAttentionBackwardDescent, SelfAttentionForward,
};
