//! The OPT module (HF `OPTForCausalLM`).

use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::tensor::{backend::Backend, Int, Tensor};

use crate::activation::Activation;
use crate::block::{run_blocks, DecoderBlock, NormPlacement};
use crate::config::{OptConfig, OPT_POSITION_OFFSET};
use crate::layer_norm::LayerNorm;
use crate::model::{embed_tokens, tied_lm_head, CausalLm};
use crate::params::{map_layer_norm, map_linear, ParamGroup, ParamInfo, ParamMapper};
use crate::trace::{ForwardTrace, LayerTrace};
use crate::weight_file::WeightFile;

/// OPT language model. Built by [`load_opt`](crate::opt::load_opt).
#[derive(Module, Debug)]
pub struct Opt<B: Backend> {
    /// Token embedding and (tied) LM head, `[vocab_size, d_embed]` (HF `embed_tokens`;
    /// `d_embed = word_embed_proj_dim`).
    pub wte: Param<Tensor<B, 2>>,
    /// Learned position embedding, `[max_position_embeddings + 2, d_model]` (HF `embed_positions`);
    /// position `t` reads row `t + 2`.
    pub wpe: Param<Tensor<B, 2>>,
    /// `[d_embed, d_model]`, no bias; present when `d_embed != d_model`.
    pub project_in: Option<Linear<B>>,
    /// `[d_model, d_embed]`, no bias; present when `d_embed != d_model`.
    pub project_out: Option<Linear<B>>,
    /// Decoder blocks, bottom to top (HF `layers`).
    pub blocks: Vec<DecoderBlock<B>>,
    /// Final LayerNorm (HF `final_layer_norm` of the decoder); present only for pre-LN models.
    pub ln_f: Option<LayerNorm<B>>,
    /// The HF config the model was built from.
    #[module(skip)]
    pub config: OptConfig,
    /// The file the weights were read from and its tensor names.
    #[module(skip)]
    pub weight_file: WeightFile,
}

impl<B: Backend> Opt<B> {
    /// Where the block LayerNorms sit.
    pub fn norm_placement(&self) -> NormPlacement {
        if self.config.do_layer_norm_before {
            NormPlacement::PreLn
        } else {
            NormPlacement::PostLn
        }
    }

    /// Visits every parameter (names `wte`, `wpe`, `project_in.…`, `project_out.…`, `blocks.{i}.…`,
    /// `ln_f.…`).
    pub fn map_named_params<M: ParamMapper<B>>(self, mapper: &mut M) -> Self {
        let embed = |name: &str| ParamInfo {
            name: name.to_string(),
            layer: None,
            group: ParamGroup::Embedding,
        };
        Opt {
            wte: mapper.map(&embed("wte"), self.wte),
            wpe: mapper.map(&embed("wpe"), self.wpe),
            project_in: self
                .project_in
                .map(|l| map_linear(l, "project_in", None, ParamGroup::Embedding, mapper)),
            project_out: self
                .project_out
                .map(|l| map_linear(l, "project_out", None, ParamGroup::Embedding, mapper)),
            blocks: self
                .blocks
                .into_iter()
                .enumerate()
                .map(|(layer, block)| block.map_named_params(layer, mapper))
                .collect(),
            ln_f: self.ln_f.map(|n| map_layer_norm(n, "ln_f", None, mapper)),
            config: self.config,
            weight_file: self.weight_file,
        }
    }
}

impl<B: Backend> CausalLm<B> for Opt<B> {
    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn max_positions(&self) -> usize {
        self.config.max_position_embeddings
    }

    fn n_layers(&self) -> usize {
        self.blocks.len()
    }

    fn hidden_size(&self) -> usize {
        self.config.hidden_size
    }

    fn n_heads(&self) -> usize {
        self.config.num_attention_heads
    }

    /// `final_normed` is the output of the final LayerNorm (the last block's output for post-LN
    /// models), before `project_out`.
    fn forward_traced_unchecked(&self, input_ids: Tensor<B, 2, Int>) -> ForwardTrace<B> {
        ForwardTrace::with_head(self.body(input_ids, true), |normed| self.head(normed))
    }

    fn final_normed_unchecked(&self, input_ids: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        self.body(input_ids, false).2
    }

    /// `project_out` (when present) then the tied head.
    fn head(&self, final_normed: Tensor<B, 3>) -> Tensor<B, 3> {
        let head_input = match &self.project_out {
            // [batch_size, rows, d_embed]
            Some(project_out) => project_out.forward(final_normed),
            None => final_normed,
        };
        tied_lm_head(head_input, self.wte.val())
    }
}

impl<B: Backend> Opt<B> {
    /// The blocks: their traces (kept when `keep_traces`), the last block's output and the final
    /// LayerNorm's output (the last block's output for post-LN models).
    ///
    /// # Shapes
    /// - input_ids: `[batch_size, seq_length]`
    /// - output: (traces, `[batch_size, seq_length, d_model]`, the same)
    fn body(
        &self,
        input_ids: Tensor<B, 2, Int>,
        keep_traces: bool,
    ) -> (Vec<LayerTrace<B>>, Tensor<B, 3>, Tensor<B, 3>) {
        let [_batch_size, seq_length] = input_ids.dims();
        let device = input_ids.device();
        // [batch_size, seq_length, d_embed]
        let mut tokens = embed_tokens(self.wte.val(), input_ids);
        if let Some(project_in) = &self.project_in {
            // [batch_size, seq_length, d_model]
            tokens = project_in.forward(tokens);
        }
        let offset = OPT_POSITION_OFFSET as i64;
        // [seq_length, d_model]
        let positions = self.wpe.val().select(
            0,
            Tensor::arange(offset..offset + seq_length as i64, &device),
        );
        let hidden = tokens + positions.unsqueeze::<3>();
        let placement = self.norm_placement();
        let (layers, hidden) = run_blocks(
            &self.blocks,
            hidden,
            Activation::Relu,
            placement,
            keep_traces,
        );
        let final_normed = match &self.ln_f {
            Some(ln_f) => ln_f.forward(hidden.clone()),
            None => hidden.clone(),
        };
        (layers, hidden, final_normed)
    }
}
