//! Input embeddings (token lookup, learned linear map of vectors, or zero-padded vectors) plus learned
//! positions.

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
    /// Vector map `[d_input, d_model]` (vector inputs with a learned map).
    pub vectors: Option<Linear<B>>,
    /// Width of zero-padded vector inputs (0: not padded).
    pub padded_width: usize,
    /// Position table `[max_seq_len, d_model]`.
    pub positions: Param<Tensor<B, 2>>,
}

impl<B: Backend> InputEmbedding<B> {
    /// The vector width this embedding reads (`None` for tokens).
    pub fn vector_width(&self) -> Option<usize> {
        match (&self.vectors, self.padded_width) {
            (Some(map), _) => Some(map.weight.dims()[0]),
            (None, 0) => None,
            (None, width) => Some(width),
        }
    }

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
        let padded_width = match input {
            InputKind::PaddedVectors(width) => width,
            _ => 0,
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
            InputKind::PaddedVectors(_) => (None, None),
        };
        Self {
            tokens,
            vectors,
            padded_width,
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
        let (batch_size, seq_length) = input.batch_and_length();
        let d_model = self.positions.dims()[1];
        let content = match (input, &self.tokens, &self.vectors) {
            (CgtInput::Tokens(tokens), Some(table), _) => table.forward(tokens.clone()),
            (CgtInput::Vectors(vectors), _, Some(map)) => map.forward(vectors.clone()),
            (CgtInput::Vectors(vectors), None, None) if self.padded_width > 0 => {
                let width = vectors.dims()[2];
                let zeros =
                    Tensor::zeros([batch_size, seq_length, d_model - width], &vectors.device());
                Tensor::cat(vec![vectors.clone(), zeros], 2)
            }
            _ => panic!("input kind does not match the embedding"),
        };
        let positions = self.positions.val().narrow(0, 0, seq_length);
        content + positions.unsqueeze::<3>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::TestBackend;
    use burn::tensor::TensorData;

    #[test]
    fn zero_padding_copies_the_vector_and_adds_the_position() {
        // Exact copies and one f32 addition per entry: bit-exact.
        let device = Default::default();
        let embedding =
            InputEmbedding::<TestBackend>::new(InputKind::PaddedVectors(2), 0, 4, 3, 0.02, &device);
        assert_eq!(embedding.vector_width(), Some(2));
        let input = CgtInput::Vectors(Tensor::<TestBackend, 3>::from_data(
            TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [1, 2, 2]),
            &device,
        ));
        let out: Vec<f32> = embedding.forward(&input).into_data().to_vec().unwrap();
        let positions: Vec<f32> = embedding.positions.val().into_data().to_vec().unwrap();
        let expected = [1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0];
        for (i, (&o, &e)) in out.iter().zip(&expected).enumerate() {
            assert_eq!(o, e + positions[i], "entry {i}");
        }
        assert!(embedding.vectors.is_none() && embedding.tokens.is_none());
    }
}
