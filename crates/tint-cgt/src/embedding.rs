//! Input embeddings (token lookup or linear map of vectors) plus learned positions.

use burn::module::{Module, Param};
use burn::nn::{Embedding, EmbeddingConfig, Initializer, Linear, LinearConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

use crate::config::InputKind;

/// A model input: a batch of token ids or of real vectors.
#[derive(Clone, Debug)]
pub enum CgtInput<B: Backend> {
    /// Token ids, `[batch_size, seq_length]`.
    Tokens(Tensor<B, 2, Int>),
    /// Real vectors, `[batch_size, seq_length, d_input]` (linear regression).
    Vectors(Tensor<B, 3>),
}

impl<B: Backend> CgtInput<B> {
    /// `(batch_size, seq_length)`.
    pub fn batch_and_length(&self) -> (usize, usize) {
        match self {
            Self::Tokens(tokens) => {
                let [batch, length] = tokens.dims();
                (batch, length)
            }
            Self::Vectors(vectors) => {
                let [batch, length, _] = vectors.dims();
                (batch, length)
            }
        }
    }

    /// The device the input lives on.
    pub fn device(&self) -> B::Device {
        match self {
            Self::Tokens(tokens) => tokens.device(),
            Self::Vectors(vectors) => vectors.device(),
        }
    }
}

/// Token/vector embedding plus a learned absolute position table. Should be created with
/// [`InputEmbedding::new`].
#[derive(Module, Debug)]
pub struct InputEmbedding<B: Backend> {
    /// Token table `[vocab, d_model]` (token inputs).
    pub tokens: Option<Embedding<B>>,
    /// Vector map `[d_input, d_model]` (vector inputs).
    pub vectors: Option<Linear<B>>,
    /// Position table `[max_seq_len, d_model]`.
    pub positions: Param<Tensor<B, 2>>,
}

impl<B: Backend> InputEmbedding<B> {
    /// Creates the embedding with normal(0, `init_std`) weights.
    pub fn new(
        input: InputKind,
        vocab: usize,
        d_model: usize,
        max_seq_len: usize,
        init_std: f64,
        device: &B::Device,
    ) -> Self {
        let init = Initializer::Normal {
            mean: 0.0,
            std: init_std,
        };
        let (tokens, vectors) = match input {
            InputKind::Tokens => (
                Some(
                    EmbeddingConfig::new(vocab, d_model)
                        .with_initializer(init.clone())
                        .init(device),
                ),
                None,
            ),
            InputKind::Vectors(d_input) => (
                None,
                Some(
                    LinearConfig::new(d_input, d_model)
                        .with_initializer(init.clone())
                        .init(device),
                ),
            ),
        };
        Self {
            tokens,
            vectors,
            positions: init.init([max_seq_len, d_model], device),
        }
    }

    /// # Shapes
    /// - `input`: tokens `[batch_size, seq_length]` or vectors `[batch_size, seq_length, d_input]`
    /// - output: `[batch_size, seq_length, d_model]`
    ///
    /// # Panics
    /// If the input kind does not match the embedding or the sequence is longer than the position table;
    /// [`crate::CgtModel::check_input`] reports both as errors beforehand.
    pub fn forward(&self, input: &CgtInput<B>) -> Tensor<B, 3> {
        let (_, seq_length) = input.batch_and_length();
        let content = match (input, &self.tokens, &self.vectors) {
            (CgtInput::Tokens(tokens), Some(table), _) => table.forward(tokens.clone()),
            (CgtInput::Vectors(vectors), _, Some(map)) => map.forward(vectors.clone()),
            _ => panic!("input kind does not match the embedding"),
        };
        let positions = self.positions.val().narrow(0, 0, seq_length);
        content + positions.unsqueeze::<3>()
    }
}
