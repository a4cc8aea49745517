//! The LLaMA causal language model: token embedding, decoder blocks, final RMSNorm, LM head (tied or not).

use burn::module::Module;
use burn::nn::{Embedding, Linear};
use burn::tensor::{backend::Backend, Int, Tensor};

use super::block::{LlamaBlock, LlamaLayerTrace};
use super::rms_norm::RmsNorm;
use crate::attention::KeyValues;
use crate::weight_file::WeightFile;
use crate::AuxError;
use tint_ops::rotary::rotary_tables_dtype;

/// A LLaMA-architecture decoder (SmolLM2, TinyLlama, …), all weights `[d_input, d_output]`.
#[derive(Module, Debug)]
pub struct LlamaModel<B: Backend> {
    /// Token embedding, weight `[vocab_size, d_model]`.
    pub embedding: Embedding<B>,
    /// Decoder blocks, bottom to top.
    pub blocks: Vec<LlamaBlock<B>>,
    /// Final norm.
    pub final_norm: RmsNorm<B>,
    /// Untied LM head `[d_model, vocab_size]`; `None` when tied to `embedding` (logits `= h Eᵀ`).
    pub lm_head: Option<Linear<B>>,
    /// RoPE base θ.
    pub rope_theta: f64,
    /// Longest accepted sequence.
    pub max_positions: usize,
    /// The file the weights were read from and its tensor names.
    #[module(skip)]
    pub weight_file: WeightFile,
}

/// The activations of a whole forward pass.
#[derive(Debug, Clone)]
pub struct LlamaTrace<B: Backend> {
    /// Next-token logits, `[batch_size, seq_length, vocab_size]`.
    pub logits: Tensor<B, 3>,
    /// Per-block activations; `layers[0].block_input` is the embedding output.
    pub layers: Vec<LlamaLayerTrace<B>>,
    /// Output of the last block, `[batch_size, seq_length, d_model]`.
    pub final_hidden: Tensor<B, 3>,
    /// After the final RMSNorm, `[batch_size, seq_length, d_model]`.
    pub final_normed: Tensor<B, 3>,
}

impl<B: Backend> LlamaModel<B> {
    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.embedding.weight.dims()[0]
    }

    /// Model width.
    pub fn d_model(&self) -> usize {
        self.embedding.weight.dims()[1]
    }

    /// Checks that `input_ids` is non-empty, not longer than `max_positions`, and inside the vocabulary.
    ///
    /// # Errors
    /// [`AuxError::EmptyInput`], [`AuxError::SequenceTooLong`], [`AuxError::TokenIdOutOfRange`].
    pub fn validate_input(&self, input_ids: &Tensor<B, 2, Int>) -> Result<(), AuxError> {
        let [batch_size, seq_length] = input_ids.dims();
        if batch_size == 0 || seq_length == 0 {
            return Err(AuxError::EmptyInput {
                batch_size,
                seq_length,
            });
        }
        if seq_length > self.max_positions {
            return Err(AuxError::SequenceTooLong {
                seq_length,
                max_positions: self.max_positions,
            });
        }
        let vocab_size = self.vocab_size();
        let ids = input_ids.to_data().convert::<i64>();
        let ids = ids.as_slice::<i64>().expect("converted to i64");
        if let Some(index) = ids
            .iter()
            .position(|&id| id < 0 || id as usize >= vocab_size)
        {
            return Err(AuxError::TokenIdOutOfRange {
                token_id: ids[index],
                batch: index / seq_length,
                position: index % seq_length,
                vocab_size,
            });
        }
        Ok(())
    }

    /// Logits from the final normed hidden state.
    ///
    /// # Shapes
    /// - h: `[batch_size, seq_length, d_model]`
    /// - output: `[batch_size, seq_length, vocab_size]`
    pub fn head(&self, h: Tensor<B, 3>) -> Tensor<B, 3> {
        match &self.lm_head {
            Some(head) => head.forward(h),
            None => {
                let [batch_size, seq_length, d_model] = h.dims();
                h.reshape([batch_size * seq_length, d_model])
                    .matmul(self.embedding.weight.val().transpose()) // [b·s, vocab_size]
                    .reshape([batch_size, seq_length, self.vocab_size()])
            }
        }
    }

    /// The forward pass with every intermediate.
    ///
    /// # Shapes
    /// - input_ids: `[batch_size, seq_length]`
    /// - output fields: see [`LlamaTrace`]
    ///
    /// # Errors
    /// Those of [`LlamaModel::validate_input`].
    pub fn forward_trace(&self, input_ids: Tensor<B, 2, Int>) -> Result<LlamaTrace<B>, AuxError> {
        self.validate_input(&input_ids)?;
        Ok(self.forward_trace_unchecked(input_ids))
    }

    /// [`LlamaModel::forward_trace`] without input validation (ids must be inside the vocabulary).
    ///
    /// # Shapes
    /// - input_ids: `[batch_size, seq_length]`
    /// - output fields: see [`LlamaTrace`]
    pub fn forward_trace_unchecked(&self, input_ids: Tensor<B, 2, Int>) -> LlamaTrace<B> {
        let seq_length = input_ids.dims()[1];
        let device = input_ids.device();
        let (cos, sin) = self.rope(seq_length, &device);
        let mut h = self.embedding.forward(input_ids); // [batch_size, seq_length, d_model]
        let mut layers = Vec::with_capacity(self.blocks.len());
        for block in &self.blocks {
            let trace = block.forward_trace(h, cos.clone(), sin.clone());
            h = trace.block_output.clone();
            layers.push(trace);
        }
        let final_normed = self.final_norm.forward(h.clone());
        LlamaTrace {
            logits: self.head(final_normed.clone()),
            layers,
            final_hidden: h,
            final_normed,
        }
    }

    /// Next-token logits.
    ///
    /// # Shapes
    /// - input_ids: `[batch_size, seq_length]`
    /// - output: `[batch_size, seq_length, vocab_size]`
    ///
    /// # Errors
    /// Those of [`LlamaModel::validate_input`].
    pub fn forward(&self, input_ids: Tensor<B, 2, Int>) -> Result<Tensor<B, 3>, AuxError> {
        self.validate_input(&input_ids)?;
        Ok(self.head(self.final_normed_unchecked(input_ids)))
    }

    /// The final RMSNorm's output (what [`LlamaModel::head`] reads), without the head and
    /// without keeping intermediates. Does not validate `input_ids`.
    ///
    /// # Shapes
    /// - input_ids: `[batch_size, seq_length]`
    /// - output: `[batch_size, seq_length, d_model]`
    pub fn final_normed_unchecked(&self, input_ids: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let seq_length = input_ids.dims()[1];
        let (cos, sin) = self.rope(seq_length, &input_ids.device());
        let mut h = self.embedding.forward(input_ids);
        for block in &self.blocks {
            h = block.forward(h, cos.clone(), sin.clone());
        }
        self.final_norm.forward(h)
    }

    /// The final RMSNorm's output at the positions `n_past..n_past + n_new` of a sequence whose
    /// first `n_past` positions `past` holds (one [`KeyValues`] per block, or none), and the keys
    /// and values of all `n_past + n_new` positions. Equal to the rows `n_past..` of
    /// [`LlamaModel::final_normed_unchecked`] on the whole sequence (causal attention: earlier
    /// positions never read later ones). Does not validate `new_ids`.
    ///
    /// # Shapes
    /// - new_ids: `[batch_size, n_new]`
    /// - past: per block `[batch_size, n_kv_heads, n_past, head_dim]`
    /// - output: `[batch_size, n_new, d_model]`; per block `[batch_size, n_kv_heads, n_past + n_new, head_dim]`
    pub fn final_normed_after(
        &self,
        new_ids: Tensor<B, 2, Int>,
        past: Option<&[KeyValues<B>]>,
    ) -> (Tensor<B, 3>, Vec<KeyValues<B>>) {
        let n_new = new_ids.dims()[1];
        let n_past = past
            .and_then(|p| p.first())
            .map_or(0, |kv| kv.key.dims()[2]);
        let (cos, sin) = self.rope(n_past + n_new, &new_ids.device());
        let cos = cos.narrow(0, n_past, n_new);
        let sin = sin.narrow(0, n_past, n_new);
        let mut h = self.embedding.forward(new_ids);
        let mut key_values = Vec::with_capacity(self.blocks.len());
        for (layer, block) in self.blocks.iter().enumerate() {
            let (out, kv) =
                block.forward_after(h, cos.clone(), sin.clone(), past.map(|p| &p[layer]));
            h = out;
            key_values.push(kv);
        }
        (self.final_norm.forward(h), key_values)
    }

    /// The rotary tables of positions `0..seq_length`, `[seq_length, head_dim]` each.
    pub(crate) fn rope(
        &self,
        seq_length: usize,
        device: &B::Device,
    ) -> (Tensor<B, 2>, Tensor<B, 2>) {
        let head_dim = self
            .blocks
            .first()
            .map_or(2, |block| block.attention.head_dim);
        rotary_tables_dtype(
            seq_length,
            head_dim,
            self.rope_theta,
            device,
            self.embedding.weight.val().dtype(),
        )
    }
}
