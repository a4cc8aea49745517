//! Analytic FLOP counts (2 per multiply-add) of the auxiliary-model math that one TinT step, a
//! dynamic-evaluation call or a plain forward performs, per sequence: the "model FLOPs" that
//! `cargo xtask bench` divides by the measured time (docs/performance.md).
//!
//! The counts are of the auxiliary model's math (docs/construction.md §7 loss gradient, §9 the
//! simulated update), not of the wider simulator network: the simulator and the functional
//! reference are charged the same count, so a simulator's GFLOP/s is model FLOPs per second.
//! Elementwise work (norms, activations, softmax, rotary, gating) is not counted.

use crate::llama::param_count::LlamaSizes;
use crate::params::AuxDims;

/// Analytic FLOP counts of a GPT-2 / OPT model's math, per sequence of `T` tokens, with every
/// layer updated.
///
/// Counted: every matmul of the model math (`Q, K, V, O, fc, proj` projections; attention scores
/// and value sums over the full `T x T` matrix; the tied LM head `T x D x V`). Not counted:
/// LayerNorm, activation, softmax and other elementwise work (O(T D) per layer, < 1% at the bench
/// sizes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepFlops {
    /// One forward pass of the auxiliary model, with logits.
    pub forward: f64,
    /// The loss gradient of docs/construction.md §7 (prediction kind): `softmax · E` over the
    /// forward's logits (every execution reads them from the pass; none computes them again).
    pub loss_gradient: f64,
    /// The approximate backward of docs/construction.md §9.2: input gradients of proj, fc, O, V,
    /// the value-only attention backward, and the weight gradients of the four updated matrices.
    pub backward: f64,
}

impl StepFlops {
    /// Counts for a model of `dims` sizes with `seq_length` tokens.
    pub fn new(dims: &AuxDims, seq_length: usize) -> Self {
        let (t, d, di, v, l) = (
            seq_length as f64,
            dims.d_model as f64,
            dims.d_inner as f64,
            dims.vocab_size as f64,
            dims.n_layers as f64,
        );
        let projections = 2.0 * t * (4.0 * d * d + 2.0 * d * di);
        let attention = 2.0 * 2.0 * t * t * d;
        let head = 2.0 * t * d * v;
        let input_grads = 2.0 * t * (2.0 * d * di + 2.0 * d * d);
        let weight_grads = input_grads;
        let attention_backward = 2.0 * t * t * d;
        Self {
            forward: l * (projections + attention) + head,
            loss_gradient: head,
            backward: l * (input_grads + weight_grads + attention_backward),
        }
    }

    /// One TinT step (= one functional-reference step): first forward, loss gradient, backward,
    /// final forward.
    pub fn tint_step(&self) -> f64 {
        2.0 * self.forward + self.loss_gradient + self.backward
    }
}

/// FLOPs of one dynamic-evaluation call per sequence of a GPT-2 / OPT model: forward + backward
/// (≈ 2× forward, all weight and input gradients) on the `train_length` training tokens, then a
/// forward over the whole `seq_length` sequence.
pub fn dyn_eval_flops(dims: &AuxDims, train_length: usize, seq_length: usize) -> f64 {
    3.0 * StepFlops::new(dims, train_length).forward + StepFlops::new(dims, seq_length).forward
}

/// Analytic FLOP counts (2 per multiply-add) of a LLaMA-family model's math, per sequence, with
/// the top `updated` of `sizes.n_layers` layers updated (docs/construction.md §9, docs/tint-llama.md).
///
/// Counted: every matmul (`Q`, `O`: `D x D`; `K`, `V`: `D x Dkv` with `Dkv = n_kv · head_dim`
/// (GQA); SwiGLU gate, up, down: `D x Di` each; attention scores and value sums over the full
/// `T x T` matrix, `D` wide; the head `T x D x V`). Not counted: RMSNorm, rotary, SwiGLU gating,
/// softmax and other elementwise work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LlamaStepFlops {
    /// One layer's forward: `2T(2D² + 2D·Dkv + 3D·Di) + 4T²D`.
    pub layer_forward: f64,
    /// The LM head (logits): `2TDV`.
    pub head: f64,
    /// One updated layer's approximate backward (docs/construction.md §9.2): input gradients of
    /// down, gate, up, `O`, `V` (`2T(3D·Di + D² + D·Dkv)`), as much again for their weight
    /// gradients, and the value-only attention backward `2T²D`.
    pub layer_backward: f64,
    /// Layers of the model.
    pub n_layers: f64,
    /// Updated (top) layers.
    pub updated: f64,
}

impl LlamaStepFlops {
    /// Counts for `sizes` with `seq_length` tokens and the top `updated` layers updated (at most
    /// all of them).
    pub fn new(sizes: &LlamaSizes, seq_length: usize, updated: usize) -> Self {
        let (t, d, di, v) = (
            seq_length as f64,
            sizes.d_model as f64,
            sizes.d_ff as f64,
            sizes.vocab_size as f64,
        );
        let dkv = (sizes.n_kv_heads * sizes.head_dim) as f64;
        let input_grads = 2.0 * t * (3.0 * d * di + d * d + d * dkv);
        Self {
            layer_forward: 2.0 * t * (2.0 * d * d + 2.0 * d * dkv + 3.0 * d * di)
                + 2.0 * 2.0 * t * t * d,
            head: 2.0 * t * d * v,
            layer_backward: 2.0 * input_grads + 2.0 * t * t * d,
            n_layers: sizes.n_layers as f64,
            updated: updated.min(sizes.n_layers) as f64,
        }
    }

    /// A plain forward with logits.
    pub fn forward(&self) -> f64 {
        self.n_layers * self.layer_forward + self.head
    }

    /// One TinT step (= one LLaMA reference step): the forward, the loss gradient (`2TDV`:
    /// `softmax · E` over the forward's logits), the backward of the updated layers, and the final
    /// forward of the updated layers and the head (the layers below are unchanged and not
    /// recomputed).
    pub fn tint_step(&self) -> f64 {
        self.forward()
            + self.head
            + self.updated * self.layer_backward
            + self.updated * self.layer_forward
            + self.head
    }
}

/// FLOPs of one LLaMA dynamic-evaluation call per sequence with the top `updated` layers
/// trained: a forward on the `T/2` training tokens, its backward (the head's input gradient `2TDV`,
/// then about 2 forwards' worth for each trained layer: input and weight gradients of all seven
/// matrices and the full attention backward; nothing below the trained layers), then a forward on
/// all `T` tokens.
pub fn llama_dyn_eval_flops(sizes: &LlamaSizes, seq_length: usize, updated: usize) -> f64 {
    let train = LlamaStepFlops::new(sizes, seq_length / 2, updated);
    let all = LlamaStepFlops::new(sizes, seq_length, updated);
    train.forward() + train.head + 2.0 * train.updated * train.layer_forward + all.forward()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Every count below is a sum of products of small integers, exact in f64: the tests compare
    // with `assert_eq!` (tolerance 0).

    #[test]
    fn step_flops_match_a_hand_count() {
        // D = 2, Di = 8, V = 3, L = 1, T = 4 by hand:
        // projections 2·4·(4·4 + 2·2·8) = 384, attention 4·16·2 = 128, head 2·4·2·3 = 48;
        // forward 384 + 128 + 48 = 560; loss gradient 48;
        // backward: input grads 2·4·(2·2·8 + 2·4) = 320, weight grads 320, attention 2·16·2 = 64.
        let dims = AuxDims {
            d_model: 2,
            n_heads: 1,
            n_layers: 1,
            d_inner: 8,
            vocab_size: 3,
            n_positions: 4,
        };
        let flops = StepFlops::new(&dims, 4);
        assert_eq!(flops.forward, 560.0);
        assert_eq!(flops.loss_gradient, 48.0);
        assert_eq!(flops.backward, 704.0);
        assert_eq!(flops.tint_step(), 2.0 * 560.0 + 48.0 + 704.0);
        // dyn: 3 forwards on T = 2 (projections 192, attention 32, head 24) + one on T = 4.
        assert_eq!(dyn_eval_flops(&dims, 2, 4), 3.0 * 248.0 + 560.0);
    }

    #[test]
    fn llama_step_flops_match_a_hand_count() {
        // D = 2, 2 heads of 1, 1 KV head (Dkv = 1), Di = 4, V = 3, 2 layers (top 1 updated), T = 4:
        // layer forward 2·4·(2·4 + 2·2 + 3·2·4) + 4·16·2 = 288 + 128 = 416; head 2·4·2·3 = 48;
        // backward: input grads 2·4·(3·2·4 + 4 + 2) = 240, weight grads 240, attention 2·16·2 = 64.
        let sizes = LlamaSizes {
            d_model: 2,
            n_heads: 2,
            n_kv_heads: 1,
            head_dim: 1,
            d_ff: 4,
            n_layers: 2,
            vocab_size: 3,
            tied: true,
            max_positions: 8,
        };
        let flops = LlamaStepFlops::new(&sizes, 4, 1);
        assert_eq!(flops.layer_forward, 416.0);
        assert_eq!(flops.head, 48.0);
        assert_eq!(flops.layer_backward, 544.0);
        assert_eq!(flops.forward(), 2.0 * 416.0 + 48.0);
        // forward + loss gradient 48 + backward 544 + final forward of the top layer and head.
        assert_eq!(flops.tint_step(), 880.0 + 48.0 + 544.0 + 416.0 + 48.0);
        // dyn: T = 2 training tokens: layer forward 2·2·36 + 4·4·2 = 176, head 24, forward 376;
        // + head input gradient 24 + 2 × 176 for the trained layer + the forward on T = 4.
        assert_eq!(
            llama_dyn_eval_flops(&sizes, 4, 1),
            376.0 + 24.0 + 352.0 + 880.0
        );
        // With every layer updated the step is 2 forwards + loss gradient + backward, as the GPT-2
        // count.
        let all = LlamaStepFlops::new(&sizes, 4, 2);
        assert_eq!(
            all.tint_step(),
            2.0 * all.forward() + all.head + 2.0 * all.layer_backward
        );
        // More updated layers than the model has count as all of them.
        assert_eq!(LlamaStepFlops::new(&sizes, 4, 9), all);
    }
}
