//! The decoder block shared by GPT-2 and OPT: attention and MLP sublayers with residuals, LayerNorm
//! before (pre-LN) or after (post-LN) each sublayer.

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::{backend::Backend, Tensor};
use tint_branches::{on_worker, runs_in_parallel};

use crate::activation::Activation;
use crate::attention::CausalSelfAttention;
use crate::layer_norm::LayerNorm;
use crate::params::{map_layer_norm, map_linear, ParamGroup, ParamMapper};
use crate::trace::LayerTrace;

/// Where the LayerNorms of a block sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormPlacement {
    /// `h + f(LN(h))` (GPT-2, OPT with `do_layer_norm_before`).
    PreLn,
    /// `LN(h + f(h))` (OPT-350m).
    PostLn,
}

/// One decoder block. Linear weights are `[d_input, d_output]`.
#[derive(Module, Debug)]
pub struct DecoderBlock<B: Backend> {
    /// First LayerNorm (GPT-2 `ln_1`, OPT `self_attn_layer_norm`).
    pub ln1: LayerNorm<B>,
    /// Causal self-attention.
    pub attn: CausalSelfAttention<B>,
    /// Second LayerNorm (GPT-2 `ln_2`, OPT `final_layer_norm` of the layer).
    pub ln2: LayerNorm<B>,
    /// MLP up projection `W_fc`, `[d_model, d_ff]` (GPT-2 `mlp.c_fc`, OPT `fc1`).
    pub fc: Linear<B>,
    /// MLP down projection `W_proj`, `[d_ff, d_model]` (GPT-2 `mlp.c_proj`, OPT `fc2`).
    pub proj: Linear<B>,
}

impl<B: Backend> DecoderBlock<B> {
    /// Runs the block and keeps every intermediate activation.
    ///
    /// # Shapes
    ///
    /// - input: `[batch_size, seq_length, d_model]`
    /// - output: see [`LayerTrace`]
    pub fn forward_traced(
        &self,
        input: Tensor<B, 3>,
        activation: Activation,
        placement: NormPlacement,
    ) -> LayerTrace<B> {
        match placement {
            NormPlacement::PreLn => {
                let ln1_output = self.ln1.forward(input.clone());
                let attn = self.attn.forward_traced(ln1_output.clone(), None);
                let h_mid = input.clone() + attn.output.clone();
                let ln2_output = self.ln2.forward(h_mid.clone());
                let (mlp_pre_activation, mlp_activation, mlp_output) =
                    self.mlp(ln2_output.clone(), activation);
                let block_output = h_mid.clone() + mlp_output.clone();
                LayerTrace {
                    block_input: input,
                    ln1_output,
                    attn_probs: attn.probs,
                    attn_context: attn.context,
                    attn_output: attn.output,
                    h_mid,
                    ln2_output,
                    mlp_pre_activation,
                    mlp_activation,
                    mlp_output,
                    block_output,
                }
            }
            NormPlacement::PostLn => {
                let attn = self.attn.forward_traced(input.clone(), None);
                let h_mid = self.ln1.forward(input.clone() + attn.output.clone());
                let (mlp_pre_activation, mlp_activation, mlp_output) =
                    self.mlp(h_mid.clone(), activation);
                let block_output = self.ln2.forward(h_mid.clone() + mlp_output.clone());
                LayerTrace {
                    block_input: input,
                    ln1_output: h_mid.clone(),
                    attn_probs: attn.probs,
                    attn_context: attn.context,
                    attn_output: attn.output,
                    h_mid,
                    ln2_output: block_output.clone(),
                    mlp_pre_activation,
                    mlp_activation,
                    mlp_output,
                    block_output,
                }
            }
        }
    }

    /// The MLP sublayer: pre-activation `x W_fc + b`, activation, output `a W_proj + b`. Each token
    /// row independently, so on CPU backends two halves of the `batch_size · seq_length` rows run as
    /// parallel tasks (`tint_branches`) and give the same values as all rows at once.
    ///
    /// # Shapes
    ///
    /// - input: `[batch_size, seq_length, d_model]`
    /// - output: (`[batch_size, seq_length, d_ff]`, the same, `[batch_size, seq_length, d_model]`)
    fn mlp(
        &self,
        input: Tensor<B, 3>,
        activation: Activation,
    ) -> (Tensor<B, 3>, Tensor<B, 3>, Tensor<B, 3>) {
        let [batch_size, seq_length, d_model] = input.dims();
        let n_rows = batch_size * seq_length;
        let rows = |x: Tensor<B, 2>| {
            let pre_activation = self.fc.forward(x);
            let activated = activation.forward(pre_activation.clone());
            let output = self.proj.forward(activated.clone());
            (pre_activation, activated, output)
        };
        let x = input.reshape([n_rows, d_model]);
        let (pre_activation, activated, output) =
            if n_rows > 1 && runs_in_parallel::<B>(&x.device()) {
                let half = n_rows / 2;
                let (a, b) = rayon::join(
                    || rows(x.clone().narrow(0, 0, half)),
                    || rows(x.clone().narrow(0, half, n_rows - half)),
                );
                (
                    Tensor::cat(vec![a.0, b.0], 0),
                    Tensor::cat(vec![a.1, b.1], 0),
                    Tensor::cat(vec![a.2, b.2], 0),
                )
            } else {
                rows(x)
            };
        let d_ff = pre_activation.dims()[1];
        (
            pre_activation.reshape([batch_size, seq_length, d_ff]),
            activated.reshape([batch_size, seq_length, d_ff]),
            output.reshape([batch_size, seq_length, d_model]),
        )
    }

    /// Runs the block.
    ///
    /// # Shapes
    ///
    /// - input: `[batch_size, seq_length, d_model]`
    /// - output: `[batch_size, seq_length, d_model]`
    pub fn forward(
        &self,
        input: Tensor<B, 3>,
        activation: Activation,
        placement: NormPlacement,
    ) -> Tensor<B, 3> {
        self.forward_traced(input, activation, placement)
            .block_output
    }

    /// Visits every parameter of block `layer` (names under `blocks.{layer}`).
    pub fn map_named_params<M: ParamMapper<B>>(self, layer: usize, mapper: &mut M) -> Self {
        let p = format!("blocks.{layer}");
        let l = Some(layer);
        let attn = self.attn;
        DecoderBlock {
            ln1: map_layer_norm(self.ln1, &format!("{p}.ln1"), l, mapper),
            attn: CausalSelfAttention {
                query: map_linear(
                    attn.query,
                    &format!("{p}.attn.query"),
                    l,
                    ParamGroup::AttnQuery,
                    mapper,
                ),
                key: map_linear(
                    attn.key,
                    &format!("{p}.attn.key"),
                    l,
                    ParamGroup::AttnKey,
                    mapper,
                ),
                value: map_linear(
                    attn.value,
                    &format!("{p}.attn.value"),
                    l,
                    ParamGroup::AttnValue,
                    mapper,
                ),
                output: map_linear(
                    attn.output,
                    &format!("{p}.attn.output"),
                    l,
                    ParamGroup::AttnOutput,
                    mapper,
                ),
                n_heads: attn.n_heads,
                n_kv_heads: attn.n_kv_heads,
                head_dim: attn.head_dim,
            },
            ln2: map_layer_norm(self.ln2, &format!("{p}.ln2"), l, mapper),
            fc: map_linear(self.fc, &format!("{p}.fc"), l, ParamGroup::Mlp, mapper),
            proj: map_linear(self.proj, &format!("{p}.proj"), l, ParamGroup::Mlp, mapper),
        }
    }
}

/// Runs `blocks` bottom to top on `hidden`: the last block's output, and every block's trace when
/// `keep_traces`. On CPU backends the whole stack runs on a rayon worker (`tint_branches::on_worker`),
/// so the blocks' parallel halves and the backend's parallel kernels fork from it.
///
/// # Shapes
///
/// - hidden: `[batch_size, seq_length, d_model]`
/// - output: (traces, `[batch_size, seq_length, d_model]`)
pub(crate) fn run_blocks<B: Backend>(
    blocks: &[DecoderBlock<B>],
    hidden: Tensor<B, 3>,
    activation: Activation,
    placement: NormPlacement,
    keep_traces: bool,
) -> (Vec<LayerTrace<B>>, Tensor<B, 3>) {
    let device = hidden.device();
    on_worker::<B, _, _>(&device, move || {
        let mut hidden = hidden;
        let mut layers = Vec::with_capacity(blocks.len());
        for block in blocks {
            let trace = block.forward_traced(hidden, activation, placement);
            hidden = trace.block_output.clone();
            if keep_traces {
                layers.push(trace);
            }
        }
        (layers, hidden)
    })
}
