//! The common entry point [`AuxModel`]: one enum over the supported architectures, with validated
//! `forward`/`forward_traced`.
//!
//! Adding an architecture: implement [`CausalLm`] for its module, add a variant to [`AuxModel`], and add
//! one arm to [`AuxModel::lm`] and one to [`AuxModel::map_named_params`].

use burn::module::Module;
use burn::tensor::{backend::Backend, Int, Tensor, TensorData};

use crate::gpt2::Gpt2;
use crate::opt::Opt;
use crate::params::ParamMapper;
use crate::trace::ForwardTrace;
use crate::weight_file::WeightFile;
use crate::AuxError;

/// What every auxiliary causal language model provides.
pub trait CausalLm<B: Backend> {
    /// Vocabulary size (rows of the LM head).
    fn vocab_size(&self) -> usize;
    /// Longest sequence the position table allows.
    fn max_positions(&self) -> usize;
    /// Number of decoder blocks.
    fn n_layers(&self) -> usize;
    /// Width of the residual stream `d_model`.
    fn hidden_size(&self) -> usize;
    /// Number of attention (query) heads.
    fn n_heads(&self) -> usize;
    /// Forward pass keeping every intermediate activation. Does not validate `input_ids`; call
    /// [`AuxModel::forward_traced`] (or [`validate_input_ids`] first).
    ///
    /// # Shapes
    ///
    /// - input_ids: `[batch_size, seq_length]`
    /// - output: see [`ForwardTrace`]
    fn forward_traced_unchecked(&self, input_ids: Tensor<B, 2, Int>) -> ForwardTrace<B>;
    /// The hidden states the LM head reads (`final_normed` of [`ForwardTrace`]), without the head
    /// and without keeping the intermediates. Does not validate `input_ids`.
    ///
    /// # Shapes
    ///
    /// - input_ids: `[batch_size, seq_length]`
    /// - output: `[batch_size, seq_length, d_model]`
    fn final_normed_unchecked(&self, input_ids: Tensor<B, 2, Int>) -> Tensor<B, 3>;
    /// The LM head (with any output projection before it) on `final_normed` rows: `logits` of
    /// [`ForwardTrace`] is `head(final_normed)`.
    ///
    /// # Shapes
    ///
    /// - final_normed: `[batch_size, rows, d_model]`
    /// - output: `[batch_size, rows, vocab_size]`
    fn head(&self, final_normed: Tensor<B, 3>) -> Tensor<B, 3>;
}

/// An auxiliary language model of any supported architecture.
// The variants hold only parameter handles (a few hundred bytes each) and a model is built once, so
// boxing them would buy nothing and `#[derive(Module)]` does not support `Box`.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum AuxModel<B: Backend> {
    /// GPT-2.
    Gpt2(Gpt2<B>),
    /// OPT.
    Opt(Opt<B>),
    /// LLaMA (SmolLM2), see [`crate::llama`].
    Llama(crate::llama::LlamaModel<B>),
}

impl<B: Backend> AuxModel<B> {
    /// The file the weights were read from and the names its tensors have there.
    pub fn weight_file(&self) -> &WeightFile {
        match self {
            AuxModel::Gpt2(m) => &m.weight_file,
            AuxModel::Opt(m) => &m.weight_file,
            AuxModel::Llama(m) => &m.weight_file,
        }
    }

    /// The model as a [`CausalLm`] trait object (the one place that lists the variants for reading).
    pub fn lm(&self) -> &dyn CausalLm<B> {
        match self {
            AuxModel::Gpt2(m) => m,
            AuxModel::Opt(m) => m,
            AuxModel::Llama(m) => m,
        }
    }

    /// Visits (and may replace) every named parameter.
    pub fn map_named_params<M: ParamMapper<B>>(self, mapper: &mut M) -> Self {
        match self {
            AuxModel::Gpt2(m) => AuxModel::Gpt2(m.map_named_params(mapper)),
            AuxModel::Opt(m) => AuxModel::Opt(m.map_named_params(mapper)),
            AuxModel::Llama(m) => AuxModel::Llama(m.map_named_params(mapper)),
        }
    }

    /// Architecture name (`model_type` of HF).
    pub fn model_type(&self) -> &'static str {
        match self {
            AuxModel::Gpt2(_) => "gpt2",
            AuxModel::Opt(_) => "opt",
            AuxModel::Llama(_) => "llama",
        }
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.lm().vocab_size()
    }

    /// Longest sequence the model accepts.
    pub fn max_positions(&self) -> usize {
        self.lm().max_positions()
    }

    /// Number of decoder blocks.
    pub fn n_layers(&self) -> usize {
        self.lm().n_layers()
    }

    /// Width of the residual stream `d_model`.
    pub fn hidden_size(&self) -> usize {
        self.lm().hidden_size()
    }

    /// Number of attention (query) heads.
    pub fn n_heads(&self) -> usize {
        self.lm().n_heads()
    }

    /// Checks `input_ids` against the vocabulary and the position table.
    pub fn validate_input_ids(&self, input_ids: &Tensor<B, 2, Int>) -> Result<(), AuxError> {
        validate_input_ids(input_ids, self.vocab_size(), self.max_positions())
    }

    /// Next-token logits.
    ///
    /// # Shapes
    ///
    /// - input_ids: `[batch_size, seq_length]`
    /// - output: `[batch_size, seq_length, vocab_size]`
    ///
    /// # Errors
    ///
    /// [`AuxError::TokenIdOutOfRange`], [`AuxError::SequenceTooLong`], [`AuxError::EmptyInput`].
    pub fn forward(&self, input_ids: Tensor<B, 2, Int>) -> Result<Tensor<B, 3>, AuxError> {
        Ok(self.forward_traced(input_ids)?.logits)
    }

    /// Next-token logits after the last position only: the LM head on the last row of the final
    /// hidden states, which is `forward(input_ids)[.., seq_length - 1, ..]` without the head's
    /// `seq_length - 1` other rows (a fifth of a SmolLM2 forward over a short prompt).
    ///
    /// # Shapes
    ///
    /// - input_ids: `[batch_size, seq_length]`
    /// - output: `[batch_size, 1, vocab_size]`
    ///
    /// # Errors
    ///
    /// As [`AuxModel::forward`].
    pub fn last_position_logits(
        &self,
        input_ids: Tensor<B, 2, Int>,
    ) -> Result<Tensor<B, 3>, AuxError> {
        self.validate_input_ids(&input_ids)?;
        let seq_length = input_ids.dims()[1];
        let normed = self.lm().final_normed_unchecked(input_ids);
        Ok(self.lm().head(normed.narrow(1, seq_length - 1, 1)))
    }

    /// Logits and every intermediate activation the TinT construction needs.
    ///
    /// # Shapes
    ///
    /// - input_ids: `[batch_size, seq_length]`
    /// - output: see [`ForwardTrace`]
    ///
    /// # Errors
    ///
    /// As [`AuxModel::forward`].
    pub fn forward_traced(
        &self,
        input_ids: Tensor<B, 2, Int>,
    ) -> Result<ForwardTrace<B>, AuxError> {
        self.validate_input_ids(&input_ids)?;
        Ok(self.lm().forward_traced_unchecked(input_ids))
    }
}

/// One token sequence as a `[1, ids.len()]` id tensor (not validated: see
/// [`AuxModel::validate_input_ids`]).
///
/// # Shapes
///
/// - output: `[1, ids.len()]`
pub fn sequence_ids<B: Backend>(ids: &[u32], device: &B::Device) -> Tensor<B, 2, Int> {
    let data: Vec<i64> = ids.iter().map(|&t| t as i64).collect();
    Tensor::from_data(TensorData::new(data, [1, ids.len()]), device)
}

/// Checks that `input_ids` is non-empty, no longer than `max_positions`, and inside `0..vocab_size`.
pub fn validate_input_ids<B: Backend>(
    input_ids: &Tensor<B, 2, Int>,
    vocab_size: usize,
    max_positions: usize,
) -> Result<(), AuxError> {
    let [batch_size, seq_length] = input_ids.dims();
    if batch_size == 0 || seq_length == 0 {
        return Err(AuxError::EmptyInput {
            batch_size,
            seq_length,
        });
    }
    if seq_length > max_positions {
        return Err(AuxError::SequenceTooLong {
            seq_length,
            max_positions,
        });
    }
    let ids = input_ids.to_data().convert::<i64>();
    let ids = ids.as_slice::<i64>().map_err(|e| AuxError::InvalidOption {
        reason: format!("cannot read token ids: {e:?}"),
    })?;
    if let Some(index) = ids
        .iter()
        .position(|&id| id < 0 || id as u64 >= vocab_size as u64)
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

/// Looks up token embeddings.
///
/// # Shapes
///
/// - table: `[vocab_size, d_embed]`
/// - input_ids: `[batch_size, seq_length]`
/// - output: `[batch_size, seq_length, d_embed]`
pub(crate) fn embed_tokens<B: Backend>(
    table: Tensor<B, 2>,
    input_ids: Tensor<B, 2, Int>,
) -> Tensor<B, 3> {
    let [batch_size, seq_length] = input_ids.dims();
    let [_, d_embed] = table.dims();
    table
        .select(0, input_ids.reshape([batch_size * seq_length]))
        .reshape([batch_size, seq_length, d_embed])
}

/// Logits of an LM head tied to the token embedding: `hidden E^T`.
///
/// # Shapes
///
/// - hidden: `[batch_size, seq_length, d_embed]`
/// - table: `[vocab_size, d_embed]`
/// - output: `[batch_size, seq_length, vocab_size]`
pub(crate) fn tied_lm_head<B: Backend>(hidden: Tensor<B, 3>, table: Tensor<B, 2>) -> Tensor<B, 3> {
    let [batch_size, seq_length, d_embed] = hidden.dims();
    let [vocab_size, _] = table.dims();
    hidden
        .reshape([batch_size * seq_length, d_embed])
        .matmul(table.transpose())
        .reshape([batch_size, seq_length, vocab_size])
}
