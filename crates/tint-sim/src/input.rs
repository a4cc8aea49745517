//! [`SimInput`]: token ids and masks of one batch, their validation, and the derived float masks.

use burn::tensor::backend::Backend;
use burn::tensor::{Bool, DType, Int, Tensor, TensorData};

use crate::error::SimError;

/// One batch for the simulator or the functional reference.
#[derive(Debug, Clone)]
pub struct SimInput<B: Backend> {
    /// Token ids `[batch_size, seq_length]`.
    pub input_ids: Tensor<B, 2, Int>,
    /// `true` on the training part of each sequence `[batch_size, seq_length]` (TinT's
    /// `bidirection_mask`); the loss of the simulated step sums the next-token losses whose target is
    /// a training token.
    pub train_mask: Tensor<B, 2, Bool>,
    /// Optional extra mask on loss targets `[batch_size, seq_length]` (ICL label-only loss): target `t`
    /// contributes only if `gradient_mask[t]` is also `true`.
    pub gradient_mask: Option<Tensor<B, 2, Bool>>,
    /// Optional ICL attention mask `[batch_size, seq_length, seq_length]`: `true` where query `i` may
    /// attend key `j` (combined with the causal mask).
    pub icl_mask: Option<Tensor<B, 3, Bool>>,
}

impl<B: Backend> SimInput<B> {
    /// Inputs with a training mask and no optional masks.
    pub fn new(input_ids: Tensor<B, 2, Int>, train_mask: Tensor<B, 2, Bool>) -> Self {
        Self {
            input_ids,
            train_mask,
            gradient_mask: None,
            icl_mask: None,
        }
    }

    /// Inputs whose training part is the first `train_lengths[b]` tokens of sequence `b`.
    pub fn with_train_lengths(
        input_ids: Tensor<B, 2, Int>,
        train_lengths: &[usize],
    ) -> Result<Self, SimError> {
        let [batch_size, seq_length] = input_ids.dims();
        if train_lengths.len() != batch_size {
            return Err(SimError::InvalidInput(format!(
                "{} train lengths for a batch of {batch_size} sequences",
                train_lengths.len()
            )));
        }
        if let Some(&bad) = train_lengths.iter().find(|&&l| l > seq_length) {
            return Err(SimError::InvalidInput(format!(
                "train length {bad} exceeds the sequence length {seq_length}"
            )));
        }
        let mask: Vec<bool> = train_lengths
            .iter()
            .flat_map(|&len| (0..seq_length).map(move |t| t < len))
            .collect();
        let train_mask = Tensor::from_data(
            TensorData::new(mask, [batch_size, seq_length]),
            &input_ids.device(),
        );
        Ok(Self::new(input_ids, train_mask))
    }

    /// Adds a label-only gradient mask.
    pub fn with_gradient_mask(mut self, gradient_mask: Tensor<B, 2, Bool>) -> Self {
        self.gradient_mask = Some(gradient_mask);
        self
    }

    /// Adds an ICL attention mask.
    pub fn with_icl_mask(mut self, icl_mask: Tensor<B, 3, Bool>) -> Self {
        self.icl_mask = Some(icl_mask);
        self
    }

    /// `[batch_size, seq_length]`.
    pub fn dims(&self) -> [usize; 2] {
        self.input_ids.dims()
    }

    /// Checks the shapes against each other, and the token ids and length against a model of
    /// `vocab_size` tokens and `max_positions` positions (the check of every engine, GPT-2/OPT
    /// and LLaMA).
    pub fn validate(&self, vocab_size: usize, max_positions: usize) -> Result<(), SimError> {
        let [batch_size, seq_length] = self.dims();
        let bad = |msg: String| Err(SimError::InvalidInput(msg));
        if batch_size == 0 || seq_length < 2 {
            return bad(format!("input_ids has shape [{batch_size}, {seq_length}]; need at least 1 sequence of 2 tokens"));
        }
        if seq_length > max_positions {
            return bad(format!(
                "sequence length {seq_length} exceeds the model's {max_positions} positions"
            ));
        }
        if self.train_mask.dims() != [batch_size, seq_length] {
            return bad(format!(
                "train_mask has shape {:?}, input_ids {:?}",
                self.train_mask.dims(),
                self.dims()
            ));
        }
        if let Some(m) = &self.gradient_mask {
            if m.dims() != [batch_size, seq_length] {
                return bad(format!(
                    "gradient_mask has shape {:?}, input_ids {:?}",
                    m.dims(),
                    self.dims()
                ));
            }
        }
        if let Some(m) = &self.icl_mask {
            if m.dims() != [batch_size, seq_length, seq_length] {
                return bad(format!(
                    "icl_mask has shape {:?}, expected [{batch_size}, {seq_length}, {seq_length}]",
                    m.dims()
                ));
            }
        }
        let ids: Vec<i64> = self
            .input_ids
            .to_data()
            .convert::<i64>()
            .to_vec()
            .unwrap_or_default();
        if let Some(&id) = ids.iter().find(|&&id| id < 0 || id as usize >= vocab_size) {
            return bad(format!(
                "token id {id} is outside the vocabulary of {vocab_size} tokens"
            ));
        }
        Ok(())
    }

    /// The float masks every pass needs, in `dtype`.
    pub(crate) fn masks(&self, dtype: DType, official_compat: bool) -> Masks<B> {
        let [batch_size, seq_length] = self.dims();
        let device = self.input_ids.device();
        let float = |m: Tensor<B, 2, Bool>| m.float().cast(dtype);
        let train = float(self.train_mask.clone());
        // Target t + 1 of position t counts if it is a training token (and passes the gradient mask).
        let mut target_mask = train.clone();
        if let Some(g) = &self.gradient_mask {
            target_mask = target_mask * float(g.clone());
        }
        let last = if official_compat { 1.0 } else { 0.0 };
        let next = Tensor::cat(
            vec![
                target_mask.slice([0..batch_size, 1..seq_length]),
                Tensor::<B, 2>::full([batch_size, 1], last, (&device, dtype)),
            ],
            1,
        );
        // Causal (and ICL) additive mask, query rows i, key columns j.
        let mut allowed = Tensor::<B, 2, Bool>::tril_mask([seq_length, seq_length], 0, &device)
            .bool_not()
            .unsqueeze_dim::<3>(0)
            .repeat_dim(0, batch_size);
        if let Some(icl) = &self.icl_mask {
            allowed = allowed.bool_and(icl.clone());
        }
        let attention_bias =
            Tensor::<B, 3>::zeros([batch_size, seq_length, seq_length], (&device, dtype))
                .mask_fill(allowed.bool_not(), MASKED_SCORE)
                .unsqueeze_dim::<4>(1);
        // Backward mask M^T[i, j] = 1[i <= j or i is a training token] (docs/construction.md §6.11).
        let upper = Tensor::<B, 2, Bool>::tril_mask([seq_length, seq_length], -1, &device)
            .float()
            .cast(dtype);
        let (upper, rows) = (
            upper.unsqueeze_dim::<3>(0),
            train.clone().unsqueeze_dim::<3>(2),
        );
        // Logical or of two 0/1 masks: u + r - u r.
        let backward = (upper.clone() + rows.clone() - upper * rows).unsqueeze_dim::<4>(1);
        Masks {
            train: train.unsqueeze_dim(2),
            next_target: next.unsqueeze_dim(2),
            attention_bias,
            backward,
        }
    }
}

/// Additive score for masked attention entries: finite (no NaN for fully masked rows) and small
/// enough that `exp` underflows to exactly 0 in float32 and float64.
pub(crate) const MASKED_SCORE: f64 = -1.0e30;

/// Float masks derived from a [`SimInput`].
#[derive(Debug, Clone)]
pub(crate) struct Masks<B: Backend> {
    /// `[batch_size, seq_length, 1]`: 1 on training tokens.
    pub train: Tensor<B, 3>,
    /// `[batch_size, seq_length, 1]`: 1 where position t's loss gradient is kept.
    pub next_target: Tensor<B, 3>,
    /// `[batch_size, 1, seq_length, seq_length]`: 0 where query i may attend key j, else [`MASKED_SCORE`].
    pub attention_bias: Tensor<B, 4>,
    /// `[batch_size, 1, seq_length, seq_length]`: `M[j, i]` at `[i, j]`, i.e. 1 if `i <= j` or `i` trains.
    pub backward: Tensor<B, 4>,
}
