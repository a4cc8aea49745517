//! LLaMA as an [`AuxModel`]: the [`CausalLm`] implementation (trace in the common [`ForwardTrace`] layout),
//! named parameters, and the loaders the rest of the workspace calls.

use std::path::Path;

use burn::tensor::{backend::Backend, Int, Tensor};

use super::loader::{load_llama_gguf, load_llama_hf};
use super::model::LlamaModel;
use super::rms_norm::RmsNorm;
use crate::gguf::{GgufFile, GgufTokenizer};
use crate::model::{AuxModel, CausalLm};
use crate::params::{map_linear, ParamGroup, ParamInfo, ParamMapper};
use crate::tokenizer::AuxTokenizer;
use crate::trace::{ForwardTrace, LayerTrace};
use crate::AuxError;

impl<B: Backend> CausalLm<B> for LlamaModel<B> {
    fn vocab_size(&self) -> usize {
        LlamaModel::vocab_size(self)
    }

    fn max_positions(&self) -> usize {
        self.max_positions
    }

    fn n_layers(&self) -> usize {
        self.blocks.len()
    }

    fn hidden_size(&self) -> usize {
        self.d_model()
    }

    fn n_heads(&self) -> usize {
        self.blocks
            .first()
            .map_or(0, |block| block.attention.n_heads)
    }

    /// The common trace: `ln1_output`/`ln2_output` are the RMSNorm outputs, `mlp_pre_activation` is the
    /// gate projection `x W_gate`, and `mlp_activation` is the input of the down projection
    /// `silu(x W_gate) ⊙ x W_up`. The full LLaMA trace is [`LlamaModel::forward_trace`].
    fn forward_traced_unchecked(&self, input_ids: Tensor<B, 2, Int>) -> ForwardTrace<B> {
        let trace = self.forward_trace_unchecked(input_ids);
        ForwardTrace {
            logits: trace.logits,
            layers: trace
                .layers
                .into_iter()
                .map(|layer| LayerTrace {
                    block_input: layer.block_input,
                    ln1_output: layer.attn_norm_output,
                    attn_probs: layer.attention.probs,
                    attn_context: layer.attention.context,
                    attn_output: layer.attention.output,
                    h_mid: layer.h_mid,
                    ln2_output: layer.mlp_norm_output,
                    mlp_pre_activation: layer.mlp.gate_pre_activation,
                    mlp_activation: layer.mlp.hidden,
                    mlp_output: layer.mlp.output,
                    block_output: layer.block_output,
                })
                .collect(),
            final_hidden: trace.final_hidden,
            final_normed: trace.final_normed,
        }
    }

    fn final_normed_unchecked(&self, input_ids: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        LlamaModel::final_normed_unchecked(self, input_ids)
    }

    fn head(&self, final_normed: Tensor<B, 3>) -> Tensor<B, 3> {
        LlamaModel::head(self, final_normed)
    }
}

fn map_rms_norm<B: Backend, M: ParamMapper<B>>(
    norm: RmsNorm<B>,
    name: &str,
    layer: Option<usize>,
    mapper: &mut M,
) -> RmsNorm<B> {
    let info = ParamInfo {
        name: format!("{name}.weight"),
        layer,
        group: ParamGroup::LayerNorm,
    };
    RmsNorm {
        weight: mapper.map(&info, norm.weight),
        eps: norm.eps,
    }
}

impl<B: Backend> LlamaModel<B> {
    /// Visits (and may replace) every named parameter: `embedding.weight` and `lm_head.weight` (group
    /// `embed`), `blocks.N.{attn_norm,mlp_norm}.weight` and `final_norm.weight` (`ln`),
    /// `blocks.N.attention.{query,key,value,output}.weight` (`attn_q/k/v/o`), `blocks.N.mlp.{gate,up,down}.weight`
    /// (`mlp`).
    pub fn map_named_params<M: ParamMapper<B>>(self, mapper: &mut M) -> Self {
        let embed = |name: &str| ParamInfo {
            name: name.to_string(),
            layer: None,
            group: ParamGroup::Embedding,
        };
        let mut embedding = self.embedding;
        embedding.weight = mapper.map(&embed("embedding.weight"), embedding.weight);
        let blocks = self
            .blocks
            .into_iter()
            .enumerate()
            .map(|(layer, mut block)| {
                let p = format!("blocks.{layer}");
                let l = Some(layer);
                block.attn_norm =
                    map_rms_norm(block.attn_norm, &format!("{p}.attn_norm"), l, mapper);
                block.mlp_norm = map_rms_norm(block.mlp_norm, &format!("{p}.mlp_norm"), l, mapper);
                let a = &format!("{p}.attention");
                let mut att = block.attention;
                att.query = map_linear(
                    att.query,
                    &format!("{a}.query"),
                    l,
                    ParamGroup::AttnQuery,
                    mapper,
                );
                att.key = map_linear(att.key, &format!("{a}.key"), l, ParamGroup::AttnKey, mapper);
                att.value = map_linear(
                    att.value,
                    &format!("{a}.value"),
                    l,
                    ParamGroup::AttnValue,
                    mapper,
                );
                att.output = map_linear(
                    att.output,
                    &format!("{a}.output"),
                    l,
                    ParamGroup::AttnOutput,
                    mapper,
                );
                block.attention = att;
                let m = &format!("{p}.mlp");
                let mut mlp = block.mlp;
                mlp.gate = map_linear(mlp.gate, &format!("{m}.gate"), l, ParamGroup::Mlp, mapper);
                mlp.up = map_linear(mlp.up, &format!("{m}.up"), l, ParamGroup::Mlp, mapper);
                mlp.down = map_linear(mlp.down, &format!("{m}.down"), l, ParamGroup::Mlp, mapper);
                block.mlp = mlp;
                block
            })
            .collect();
        LlamaModel {
            embedding,
            blocks,
            final_norm: map_rms_norm(self.final_norm, "final_norm", None, mapper),
            lm_head: self
                .lm_head
                .map(|head| map_linear(head, "lm_head", None, ParamGroup::Embedding, mapper)),
            rope_theta: self.rope_theta,
            max_positions: self.max_positions,
            weight_file: self.weight_file,
        }
    }
}

/// Loads a LLaMA-architecture GGUF file (e.g. SmolLM2-135M-Instruct.Q4_1.gguf) as an [`AuxModel::Llama`].
///
/// # Errors
/// As [`load_llama_gguf`].
pub fn load_gguf_model<B: Backend>(
    path: &Path,
    device: &B::Device,
) -> Result<AuxModel<B>, AuxError> {
    Ok(AuxModel::Llama(load_llama_gguf(path, device)?.model))
}

/// The tokenizer stored in a GGUF file's metadata, as an [`AuxTokenizer`] that prepends the BOS id
/// where the file sets `tokenizer.ggml.add_bos_token` (SmolLM2's file sets it false: no BOS). Use
/// [`GgufTokenizer`] for the BOS/EOS ids.
///
/// # Errors
/// [`AuxError::Gguf`].
pub fn gguf_tokenizer(path: &Path) -> Result<AuxTokenizer, AuxError> {
    let file = GgufFile::open(path)?;
    let gguf = GgufTokenizer::from_gguf(&file)?;
    let tokenizer = AuxTokenizer::from_tokenizer(gguf.tokenizer);
    Ok(match (gguf.add_bos, gguf.bos_token_id) {
        (true, Some(bos)) => tokenizer.with_bos(bos),
        _ => tokenizer,
    })
}

/// Loads `path` as a LLaMA model when it is a `.gguf` file or a directory whose `config.json` has
/// `model_type: "llama"`; `Ok(None)` otherwise (the caller tries the other architectures).
///
/// # Errors
/// As [`load_llama_gguf`] / [`load_llama_hf`].
pub fn try_load_llama<B: Backend>(
    path: &Path,
    device: &B::Device,
) -> Result<Option<AuxModel<B>>, AuxError> {
    if path.is_file() && path.extension().is_some_and(|e| e == "gguf") {
        return load_gguf_model(path, device).map(Some);
    }
    let Ok(text) = std::fs::read_to_string(path.join("config.json")) else {
        return Ok(None);
    };
    let is_llama = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .is_some_and(|json| json["model_type"] == "llama");
    if !is_llama {
        return Ok(None);
    }
    Ok(Some(AuxModel::Llama(load_llama_hf(path, device)?.0)))
}
