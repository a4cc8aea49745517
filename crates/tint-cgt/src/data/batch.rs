//! Host-side batches and their conversion to tensors.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use crate::embedding::CgtInput;
use crate::error::{CgtError, Result};

/// Inputs of a host batch, row-major `[batch_size, seq_length(, dim)]`.
#[derive(Clone, Debug, PartialEq)]
pub enum HostInput {
    /// Token ids.
    Tokens(Vec<i64>),
    /// Real vectors of width `dim`.
    Vectors {
        /// Values.
        values: Vec<f32>,
        /// Vector width.
        dim: usize,
    },
}

/// Targets of a host batch, aligned with the inputs (target `i` is predicted at input position `i`).
#[derive(Clone, Debug, PartialEq)]
pub enum HostTargets {
    /// Next-token ids.
    Tokens(Vec<i64>),
    /// Regression targets of width `dim`.
    Vectors {
        /// Values.
        values: Vec<f32>,
        /// Target width.
        dim: usize,
    },
}

/// One batch in host memory.
#[derive(Clone, Debug, PartialEq)]
pub struct HostBatch {
    /// Number of sequences.
    pub batch_size: usize,
    /// Length of every sequence.
    pub seq_length: usize,
    /// Inputs.
    pub input: HostInput,
    /// Targets.
    pub targets: HostTargets,
    /// Loss weight per position, `[batch_size * seq_length]` (1 where the loss counts).
    pub loss_mask: Vec<f32>,
}

impl HostBatch {
    /// Checks that every buffer has the size the shape implies.
    pub fn validate(&self) -> Result<()> {
        let cells = self.batch_size * self.seq_length;
        let input_ok = match &self.input {
            HostInput::Tokens(ids) => ids.len() == cells,
            HostInput::Vectors { values, dim } => values.len() == cells * dim,
        };
        let target_ok = match &self.targets {
            HostTargets::Tokens(ids) => ids.len() == cells,
            HostTargets::Vectors { values, dim } => values.len() == cells * dim,
        };
        if !input_ok || !target_ok || self.loss_mask.len() != cells {
            return Err(CgtError::Shape(format!(
                "host batch buffers do not match {} x {}",
                self.batch_size, self.seq_length
            )));
        }
        Ok(())
    }

    /// The sequences `rows` of this batch, in order (a data-parallel shard).
    pub fn rows(&self, rows: std::ops::Range<usize>) -> Result<Self> {
        self.validate()?;
        if rows.start > rows.end || rows.end > self.batch_size {
            return Err(CgtError::Shape(format!(
                "rows {rows:?} of a batch of {} sequences",
                self.batch_size
            )));
        }
        let n = self.seq_length;
        let cut =
            |values: &[f32], dim: usize| values[rows.start * n * dim..rows.end * n * dim].to_vec();
        let cut_ids = |ids: &[i64]| ids[rows.start * n..rows.end * n].to_vec();
        Ok(Self {
            batch_size: rows.len(),
            seq_length: n,
            input: match &self.input {
                HostInput::Tokens(ids) => HostInput::Tokens(cut_ids(ids)),
                HostInput::Vectors { values, dim } => HostInput::Vectors {
                    values: cut(values, *dim),
                    dim: *dim,
                },
            },
            targets: match &self.targets {
                HostTargets::Tokens(ids) => HostTargets::Tokens(cut_ids(ids)),
                HostTargets::Vectors { values, dim } => HostTargets::Vectors {
                    values: cut(values, *dim),
                    dim: *dim,
                },
            },
            loss_mask: cut(&self.loss_mask, 1),
        })
    }

    /// The model input as a tensor.
    ///
    /// # Shapes
    /// - output: tokens `[batch_size, seq_length]` or vectors `[batch_size, seq_length, dim]`
    pub fn input_tensor<B: Backend>(&self, device: &B::Device) -> CgtInput<B> {
        let (b, t) = (self.batch_size, self.seq_length);
        match &self.input {
            HostInput::Tokens(ids) => CgtInput::Tokens(Tensor::<B, 2, Int>::from_data(
                TensorData::new(ids.clone(), [b, t]),
                device,
            )),
            HostInput::Vectors { values, dim } => CgtInput::Vectors(Tensor::from_data(
                TensorData::new(values.clone(), [b, t, *dim]),
                device,
            )),
        }
    }

    /// The loss mask as a tensor `[batch_size, seq_length]`.
    pub fn mask_tensor<B: Backend>(&self, device: &B::Device) -> Tensor<B, 2> {
        Tensor::from_data(
            TensorData::new(self.loss_mask.clone(), [self.batch_size, self.seq_length]),
            device,
        )
    }
}

/// A deterministic stream of batches.
pub trait BatchSource {
    /// Batch number `step` of the training stream.
    fn batch(&self, step: u64) -> HostBatch;
}
