//! The GPT-2 module (Radford et al. 2019; HF `GPT2LMHeadModel`).

use burn::module::{Module, Param};
use burn::tensor::{backend::Backend, Int, Tensor};

use crate::activation::Activation;
use crate::block::{run_blocks, DecoderBlock, NormPlacement};
use crate::config::Gpt2Config;
use crate::layer_norm::LayerNorm;
use crate::model::{embed_tokens, tied_lm_head, CausalLm};
use crate::params::{map_layer_norm, ParamGroup, ParamInfo, ParamMapper};
use crate::trace::{ForwardTrace, LayerTrace};
use crate::weight_file::WeightFile;

/// GPT-2 language model. Built by [`load_gpt2`](crate::gpt2::load_gpt2).
#[derive(Module, Debug)]
pub struct Gpt2<B: Backend> {
    /// Token embedding and (tied) LM head `E`, `[vocab_size, d_model]` (HF `wte`).
    pub wte: Param<Tensor<B, 2>>,
    /// Learned position embedding, `[n_positions, d_model]` (HF `wpe`).
    pub wpe: Param<Tensor<B, 2>>,
    /// Decoder blocks, bottom to top (HF `h`).
    pub blocks: Vec<DecoderBlock<B>>,
    /// Final LayerNorm (HF `ln_f`).
    pub ln_f: LayerNorm<B>,
    /// The HF config the model was built from.
    #[module(skip)]
    pub config: Gpt2Config,
    /// The file the weights were read from and its tensor names.
    #[module(skip)]
    pub weight_file: WeightFile,
}

impl<B: Backend> Gpt2<B> {
    /// Visits every parameter (names `wte`, `wpe`, `blocks.{i}.…`, `ln_f.…`).
    pub fn map_named_params<M: ParamMapper<B>>(self, mapper: &mut M) -> Self {
        let embed = |name: &str| ParamInfo {
            name: name.to_string(),
            layer: None,
            group: ParamGroup::Embedding,
        };
        Gpt2 {
            wte: mapper.map(&embed("wte"), self.wte),
            wpe: mapper.map(&embed("wpe"), self.wpe),
            blocks: self
                .blocks
                .into_iter()
                .enumerate()
                .map(|(layer, block)| block.map_named_params(layer, mapper))
                .collect(),
            ln_f: map_layer_norm(self.ln_f, "ln_f", None, mapper),
            config: self.config,
            weight_file: self.weight_file,
        }
    }
}

impl<B: Backend> CausalLm<B> for Gpt2<B> {
    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn max_positions(&self) -> usize {
        self.config.n_positions
    }

    fn n_layers(&self) -> usize {
        self.blocks.len()
    }

    fn hidden_size(&self) -> usize {
        self.config.n_embd
    }

    fn n_heads(&self) -> usize {
        self.config.n_head
    }

    fn forward_traced_unchecked(&self, input_ids: Tensor<B, 2, Int>) -> ForwardTrace<B> {
        ForwardTrace::with_head(self.body(input_ids, true), |normed| self.head(normed))
    }

    fn final_normed_unchecked(&self, input_ids: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        self.body(input_ids, false).2
    }

    fn head(&self, final_normed: Tensor<B, 3>) -> Tensor<B, 3> {
        tied_lm_head(final_normed, self.wte.val())
    }
}

impl<B: Backend> Gpt2<B> {
    /// The blocks: their traces (kept when `keep_traces`), the last block's output and the final
    /// LayerNorm's output.
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
        // [batch_size, seq_length, d_model]
        let tokens = embed_tokens(self.wte.val(), input_ids);
        // [seq_length, d_model]
        let positions = self
            .wpe
            .val()
            .select(0, Tensor::arange(0..seq_length as i64, &device));
        let hidden = tokens + positions.unsqueeze::<3>();
        let (layers, hidden) = run_blocks(
            &self.blocks,
            hidden,
            Activation::GeluNew,
            NormPlacement::PreLn,
            keep_traces,
        );
        let final_normed = self.ln_f.forward(hidden.clone());
        (layers, hidden, final_normed)
    }
}
