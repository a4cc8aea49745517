//! Conversion of a loaded [`tint_aux::AuxModel`] into the simulator's [`AuxParams`].

use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_aux::block::DecoderBlock;
use tint_aux::layer_norm::LayerNorm;
use tint_aux::AuxModel;

use crate::error::SimError;
use crate::params::{Activation, AuxParams, LayerNormParams, LayerParams, NormPlacement};

/// OPT's learned positions start at row 2 of the table.
const OPT_POSITION_OFFSET: usize = 2;

fn ln_params<B: Backend>(ln: &LayerNorm<B>) -> LayerNormParams<B> {
    LayerNormParams {
        gamma: ln.gamma.val().unsqueeze_dims(&[0, 1]),
        beta: ln.beta.val().unsqueeze_dims(&[0, 1]),
    }
}

/// `[in, out]` weight and `[1, 1, out]` bias (zeros when the layer has none).
fn linear_params<B: Backend>(linear: &Linear<B>) -> (Tensor<B, 3>, Tensor<B, 3>) {
    let weight = linear.weight.val();
    let [_, d_out] = weight.dims();
    let bias = match &linear.bias {
        Some(b) => b.val(),
        None => Tensor::zeros([d_out], (&weight.device(), weight.dtype())),
    };
    (weight.unsqueeze_dim(0), bias.unsqueeze_dims(&[0, 1]))
}

fn layer_params<B: Backend>(block: &DecoderBlock<B>) -> LayerParams<B> {
    let (w_q, b_q) = linear_params(&block.attn.query);
    let (w_k, b_k) = linear_params(&block.attn.key);
    let (w_v, b_v) = linear_params(&block.attn.value);
    let (w_o, b_o) = linear_params(&block.attn.output);
    let (w_fc, b_fc) = linear_params(&block.fc);
    let (w_proj, b_proj) = linear_params(&block.proj);
    LayerParams {
        ln_1: ln_params(&block.ln1),
        w_q,
        b_q,
        w_k,
        b_k,
        w_v,
        b_v,
        w_o,
        b_o,
        ln_2: ln_params(&block.ln2),
        w_fc,
        b_fc,
        w_proj,
        b_proj,
    }
}

impl<B: Backend> AuxParams<B> {
    /// Reads the weights of a loaded auxiliary model.
    ///
    /// # Errors
    /// [`SimError::UnsupportedModel`] for what this simulator does not cover: a pre-LN OPT without a
    /// final LayerNorm, OPT with only one of `project_in`/`project_out`, an unknown activation, a
    /// LLaMA-family model (simulated by [`crate::ModelSimulator`] / [`crate::llama::LlamaSimulator`]).
    /// Post-LN OPT and OPT's `project_in`/`project_out` are supported (docs/construction.md §16): the
    /// frozen projections are folded into the frozen input embedding (`wte · P_in`) and LM head
    /// (`wte · P_outᵀ`).
    pub fn from_aux(model: &AuxModel<B>) -> Result<Self, SimError> {
        let unsupported = |msg: &str| Err(SimError::UnsupportedModel(msg.to_string()));
        let params = match model {
            AuxModel::Llama(_) => {
                return unsupported(
                    "a LLaMA-family model (RMSNorm, SwiGLU, RoPE) has no GPT-2/OPT parameters: \
                     simulate it with tint_sim::llama::LlamaSimulator (or tint_sim::ModelSimulator, \
                     which picks the simulator of any model)",
                )
            }
            AuxModel::Gpt2(m) => {
                let activation = match m.config.activation_function.as_str() {
                    "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluNew,
                    other => {
                        return Err(SimError::UnsupportedModel(format!(
                            "GPT-2 activation {other:?}"
                        )))
                    }
                };
                AuxParams {
                    token_embedding: m.wte.val(),
                    lm_head: None,
                    position_embedding: m.wpe.val(),
                    position_offset: 0,
                    layers: m.blocks.iter().map(layer_params).collect(),
                    ln_f: Some(ln_params(&m.ln_f)),
                    norm_placement: NormPlacement::PreLn,
                    n_heads: m.config.n_head,
                    activation,
                }
            }
            AuxModel::Opt(m) => {
                let norm_placement = m.norm_placement();
                if norm_placement == NormPlacement::PreLn && m.ln_f.is_none() {
                    return unsupported("pre-LN OPT without a final LayerNorm");
                }
                if m.config.activation_function != "relu" {
                    return Err(SimError::UnsupportedModel(format!(
                        "OPT activation {:?}",
                        m.config.activation_function
                    )));
                }
                // `project_in` / `project_out` are frozen linear maps without bias next to the frozen
                // tied embedding: folded into it (docs/construction.md §16).
                let wte = m.wte.val();
                let (token_embedding, lm_head) = match (&m.project_in, &m.project_out) {
                    (None, None) => (wte, None),
                    (Some(project_in), Some(project_out)) => {
                        if project_in.bias.is_some() || project_out.bias.is_some() {
                            return unsupported("OPT project_in/project_out with a bias");
                        }
                        // [V, E] · [E, D] and [V, E] · [E, D] (`P_out` is stored `[D, E]`).
                        let input = wte.clone().matmul(project_in.weight.val());
                        let head = wte.matmul(project_out.weight.val().transpose());
                        (input, Some(head))
                    }
                    _ => {
                        return unsupported(
                            "OPT with only one of project_in/project_out (HF has both or neither)",
                        )
                    }
                };
                AuxParams {
                    token_embedding,
                    lm_head,
                    position_embedding: m.wpe.val(),
                    position_offset: OPT_POSITION_OFFSET,
                    layers: m.blocks.iter().map(layer_params).collect(),
                    ln_f: m.ln_f.as_ref().map(ln_params),
                    norm_placement,
                    n_heads: m.config.num_attention_heads,
                    activation: Activation::Relu,
                }
            }
        };
        params.check_shapes()?;
        Ok(params)
    }
}
