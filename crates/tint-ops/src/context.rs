//! Per-call inputs of the TinT modules: row positions, training-token mask, optional ICL mask.

use burn::tensor::{backend::Backend, Int, Tensor, TensorData};

use crate::{dims::TintDims, error::TintOpsError, layout};

/// The inputs every TinT module reads besides the state (docs/construction.md §2.2–2.3).
#[derive(Debug, Clone)]
pub struct SimContext<B: Backend> {
    /// `P`.
    pub n_prefixes: usize,
    /// `T`.
    pub seq_length: usize,
    /// `Tmax`.
    pub max_seq_length: usize,
    /// One-hot position index of each row, `[P + T]`: token row `P+t` → `t`, prefix row `p` → `Tmax + p`.
    pub position_index: Tensor<B, 1, Int>,
    /// `bidirection_mask`, `[batch_size, T]`, 1.0 on training tokens, 0.0 elsewhere (float, state dtype).
    pub train_mask: Tensor<B, 2>,
    /// Optional ICL mask, `[batch_size, T, T]`, 1.0 where token i may attend token j.
    pub icl_mask: Option<Tensor<B, 3>>,
}

impl<B: Backend> SimContext<B> {
    /// Builds the context for `dims.seq_length()` tokens.
    ///
    /// # Shapes
    /// * `train_mask`: `[batch_size, T]` (1.0 on training tokens, the state dtype)
    ///
    /// # Errors
    /// [`TintOpsError::Shape`] if `train_mask` is not `[batch_size, T]`.
    pub fn new(
        dims: &TintDims,
        train_mask: Tensor<B, 2>,
        device: &B::Device,
    ) -> Result<Self, TintOpsError> {
        let [batch_size, seq_length] = train_mask.dims();
        if seq_length != dims.seq_length() {
            return Err(TintOpsError::Shape {
                what: "train_mask",
                expected: vec![batch_size, dims.seq_length()],
                actual: vec![batch_size, seq_length],
            });
        }
        let index = layout::position_indices(dims.n_prefixes(), seq_length, dims.max_seq_length());
        let index: Vec<i64> = index.into_iter().map(|i| i as i64).collect();
        let n_rows = index.len();
        let position_index = Tensor::from_data(TensorData::new(index, [n_rows]), device);
        Ok(Self {
            n_prefixes: dims.n_prefixes(),
            seq_length,
            max_seq_length: dims.max_seq_length(),
            position_index,
            train_mask,
            icl_mask: None,
        })
    }

    /// Adds the ICL mask.
    ///
    /// # Shapes
    /// * `icl_mask`: `[batch_size, T, T]` (1.0 where token `i` may attend token `j`)
    ///
    /// # Errors
    /// [`TintOpsError::Shape`] if it is not `[batch_size, T, T]`.
    pub fn with_icl_mask(mut self, icl_mask: Tensor<B, 3>) -> Result<Self, TintOpsError> {
        let [batch_size, _] = self.train_mask.dims();
        let expected = [batch_size, self.seq_length, self.seq_length];
        if icl_mask.dims() != expected {
            return Err(TintOpsError::Shape {
                what: "icl_mask",
                expected: expected.to_vec(),
                actual: icl_mask.dims().to_vec(),
            });
        }
        self.icl_mask = Some(icl_mask);
        Ok(self)
    }

    /// `P + T`.
    pub fn n_rows(&self) -> usize {
        self.n_prefixes + self.seq_length
    }

    /// Checks that a state is `[batch_size, P + T, d_sim]`.
    ///
    /// # Shapes
    /// * `state`: `[batch_size, P + T, d_sim]` expected
    ///
    /// # Errors
    /// [`TintOpsError::Shape`].
    pub fn check_state(&self, state: &Tensor<B, 3>, d_sim: usize) -> Result<(), TintOpsError> {
        let [batch_size, _] = self.train_mask.dims();
        let expected = [batch_size, self.n_rows(), d_sim];
        if state.dims() != expected {
            return Err(TintOpsError::Shape {
                what: "state",
                expected: expected.to_vec(),
                actual: state.dims().to_vec(),
            });
        }
        Ok(())
    }
}
