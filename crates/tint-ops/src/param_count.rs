//! Closed-form parameter counts of docs/construction.md §11 (per module), as functions of [`TintDims`].

use crate::dims::TintDims;

/// `G = 2 (Pd + 1)`: gates.
pub fn gates(dims: &TintDims) -> usize {
    2 * (dims.position_dim() + 1)
}

/// `Q1 = Ds P + Ds nl + 2 Ds`: linear-attention q/k/v projection (split-wise + dim-wise, blocks `P`).
pub fn linear_qkv(dims: &TintDims) -> usize {
    let ds = dims.d_sim();
    ds * dims.n_prefixes() + ds * dims.n_linear_heads() + 2 * ds
}

/// `Q2 = Ds D + Ds Ds/D + 2 Ds`: projection with conv dim `D`.
pub fn linear_qkv_conv_d(dims: &TintDims) -> usize {
    let (ds, d) = (dims.d_sim(), dims.d_model());
    ds * d + ds * ds / d + 2 * ds
}

/// `Q3 = Ds hd + Ds Hs + 2 Ds`: softmax-attention projection.
pub fn softmax_qkv(dims: &TintDims) -> usize {
    let ds = dims.d_sim();
    ds * dims.head_dim_sim() + ds * dims.n_heads_sim() + 2 * ds
}

/// `PP1 = Pd 3P + 3P + 4 nl`.
pub fn linear_positions(dims: &TintDims) -> usize {
    let p = dims.n_prefixes();
    dims.position_dim() * 3 * p + 3 * p + 4 * dims.n_linear_heads()
}

/// `PP3 = Pd 3hd + 3hd + 4 Hs`.
pub fn softmax_positions(dims: &TintDims) -> usize {
    let hd = dims.head_dim_sim();
    dims.position_dim() * 3 * hd + 3 * hd + 4 * dims.n_heads_sim()
}

/// `C1 = Ds nl + Ds`.
pub fn linear_c_proj(dims: &TintDims) -> usize {
    dims.d_sim() * dims.n_linear_heads() + dims.d_sim()
}

/// `C3 = Ds Hs + Ds`.
pub fn softmax_c_proj(dims: &TintDims) -> usize {
    dims.d_sim() * dims.n_heads_sim() + dims.d_sim()
}

/// `LF = G + 3 Q1 + PP1 + C1 + (Ds D + Ds) + (Ds Ds/D + Ds)`.
pub fn linear_forward(dims: &TintDims) -> usize {
    let (ds, d) = (dims.d_sim(), dims.d_model());
    gates(dims)
        + 3 * linear_qkv(dims)
        + linear_positions(dims)
        + linear_c_proj(dims)
        + (ds * d + ds)
        + (ds * ds / d + ds)
}

/// `LB = G + Q2 + 2 Q1 + PP1 + C1` (= LinearDescent).
pub fn linear_backward(dims: &TintDims) -> usize {
    gates(dims)
        + linear_qkv_conv_d(dims)
        + 2 * linear_qkv(dims)
        + linear_positions(dims)
        + linear_c_proj(dims)
}

/// `LDB = 2 LB`.
pub fn linear_descent_backward(dims: &TintDims) -> usize {
    2 * linear_backward(dims)
}

/// `LNF = LF + G`.
pub fn layer_norm_forward(dims: &TintDims) -> usize {
    linear_forward(dims) + gates(dims)
}

/// `LNB = 2 LB + G + 2 (Ds Hs + Ds)`.
pub fn layer_norm_descent_backward(dims: &TintDims) -> usize {
    2 * linear_backward(dims) + gates(dims) + 2 * softmax_c_proj(dims)
}

/// `AF = LF + G + 3 Q3 + PP3 + C3`.
pub fn attention_forward(dims: &TintDims) -> usize {
    linear_forward(dims)
        + gates(dims)
        + 3 * softmax_qkv(dims)
        + softmax_positions(dims)
        + softmax_c_proj(dims)
}

/// `AB = G + 3 Q3 + PP3 + C3 + LDB`.
pub fn attention_backward_descent(dims: &TintDims) -> usize {
    gates(dims)
        + 3 * softmax_qkv(dims)
        + softmax_positions(dims)
        + softmax_c_proj(dims)
        + linear_descent_backward(dims)
}

/// `ACF = G + (Ds Hs + Ds) + (Ds hd + Ds)`.
pub fn activation_forward(dims: &TintDims) -> usize {
    let ds = dims.d_sim();
    gates(dims) + (ds * dims.n_heads_sim() + ds) + (ds * dims.head_dim_sim() + ds)
}

/// `ACB = 2 (Ds Hs + Ds)`.
pub fn activation_backward(dims: &TintDims) -> usize {
    2 * softmax_c_proj(dims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        activation::{ActivationBackward, ActivationForward},
        gates::{GateKind, Gates},
        group_norm::NormKind,
        layer_norm::LayerNormBackwardDescent,
        linear::{
            DescentUpdate, LinearBackward, LinearBackwardDescent, LinearDescent, LinearForward,
        },
        norm::NormForward,
        self_attention::{
            AttentionBackprop, AttentionVariant, SelfAttentionBackwardDescent, SelfAttentionForward,
        },
        testing::{f64_options, test_dims, TestBackend},
    };
    use burn::module::Module;

    #[test]
    fn module_parameter_counts_equal_the_closed_forms() {
        let device = Default::default();
        let o = f64_options();
        for dims in test_dims() {
            let mem = dims.linear_memory_index();
            type Tb = TestBackend;
            assert_eq!(
                Gates::<Tb>::new(GateKind::Descent, &dims, &o, &device).num_params(),
                gates(&dims)
            );
            assert_eq!(
                LinearForward::<Tb>::new(&dims, Some(mem), &o, &device)
                    .unwrap()
                    .num_params(),
                linear_forward(&dims)
            );
            assert_eq!(
                LinearBackward::<Tb>::new(&dims, Some(mem), &o, &device)
                    .unwrap()
                    .num_params(),
                linear_backward(&dims)
            );
            assert_eq!(
                LinearDescent::<Tb>::new(&dims, mem, DescentUpdate::WeightAndBias, &o, &device)
                    .unwrap()
                    .num_params(),
                linear_backward(&dims)
            );
            assert_eq!(
                LinearBackwardDescent::<Tb>::new(
                    &dims,
                    mem,
                    DescentUpdate::WeightAndBias,
                    &o,
                    &device
                )
                .unwrap()
                .num_params(),
                linear_descent_backward(&dims)
            );
            assert_eq!(
                NormForward::<Tb>::new(NormKind::Layer, &dims, &o, &device)
                    .unwrap()
                    .num_params(),
                layer_norm_forward(&dims)
            );
            assert_eq!(
                LayerNormBackwardDescent::<Tb>::new(&dims, &o, &device)
                    .unwrap()
                    .num_params(),
                layer_norm_descent_backward(&dims)
            );
            assert_eq!(
                SelfAttentionForward::<Tb>::new(
                    &dims,
                    &AttentionVariant::multi_head(dims.n_heads_aux()),
                    &o,
                    &device
                )
                .unwrap()
                .num_params(),
                attention_forward(&dims)
            );
            assert_eq!(
                SelfAttentionBackwardDescent::<Tb>::new(
                    &dims,
                    &AttentionVariant::multi_head(dims.n_heads_aux()),
                    AttentionBackprop::ThroughAttention,
                    &o,
                    &device
                )
                .unwrap()
                .num_params(),
                attention_backward_descent(&dims)
            );
            assert_eq!(
                ActivationForward::<Tb>::new(&dims, &o, &device)
                    .unwrap()
                    .num_params(),
                activation_forward(&dims)
            );
            assert_eq!(
                ActivationBackward::<Tb>::new(&dims, &o, &device)
                    .unwrap()
                    .num_params(),
                activation_backward(&dims)
            );
        }
    }

    #[test]
    fn gpt2_block_counts_match_the_spec_values() {
        // docs/construction.md §11: GPT-2 settings, FB = 53,861,988 and BB = 64,514,958.
        let dims = TintDims::new(768, 12, 3072, 256, 12, 1024, 1024).unwrap();
        let (p, ds) = (dims.n_prefixes(), dims.d_sim());
        let forward_block = 2 * layer_norm_forward(&dims)
            + attention_forward(&dims)
            + 3 * linear_forward(&dims)
            + activation_forward(&dims)
            + 18 * p * ds;
        let backward_block = 3 * linear_descent_backward(&dims)
            + activation_backward(&dims)
            + 2 * layer_norm_descent_backward(&dims)
            + attention_backward_descent(&dims);
        assert_eq!(forward_block, 53_861_988);
        assert_eq!(backward_block, 64_514_958);
    }
}
