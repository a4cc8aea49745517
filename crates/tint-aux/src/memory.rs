//! Memory admission (issue 66 item 2): before a forward pass allocates, an upper estimate of the
//! bytes it needs, from the model's sizes and the request's shape, checked against a limit. A
//! request over the limit gets an error with the estimate, its parts and the limit, instead of an
//! allocation failure that aborts the process.

use crate::error::AuxError;
use crate::model::AuxModel;
use burn::tensor::backend::Backend;

/// Values in flight per position and per unit of `d_model` inside one decoder block, at most: the
/// residual, the two norms' outputs, query, key, value and attention output (6), and the MLP's
/// hidden layer at up to 4 `d_model` wide, kept with its activation and (LLaMA) its gate (12).
pub const BLOCK_VALUES_PER_MODEL_WIDTH: u64 = 20;

/// How many copies of the logits exist at once when they are written out: the tensor, its host
/// data and the file's bytes.
pub const LOGITS_COPIES: u64 = 3;

/// The parts of a forward pass's memory, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardMemory {
    /// `[batch, seq, vocab]` logits, [`LOGITS_COPIES`] times.
    pub logits: u64,
    /// One block's activations ([`BLOCK_VALUES_PER_MODEL_WIDTH`] · `d_model` per position).
    pub activations: u64,
    /// One block's attention scores and probabilities, `2 · batch · heads · seq²`.
    pub attention: u64,
}

impl ForwardMemory {
    /// The estimate for a model with `vocab_size`, `d_model` and `n_heads`, a `[batch, seq]`
    /// request and `value_bytes` bytes per value (4 for f32), saturating instead of overflowing.
    pub fn of_sizes(
        vocab_size: usize,
        d_model: usize,
        n_heads: usize,
        batch: usize,
        seq: usize,
        value_bytes: usize,
    ) -> Self {
        let [vocab, width, heads, batch, seq, bytes] =
            [vocab_size, d_model, n_heads, batch, seq, value_bytes].map(|n| n as u64);
        let positions = batch.saturating_mul(seq);
        Self {
            logits: LOGITS_COPIES
                .saturating_mul(positions)
                .saturating_mul(vocab)
                .saturating_mul(bytes),
            activations: BLOCK_VALUES_PER_MODEL_WIDTH
                .saturating_mul(positions)
                .saturating_mul(width)
                .saturating_mul(bytes),
            attention: 2u64
                .saturating_mul(positions)
                .saturating_mul(heads)
                .saturating_mul(seq)
                .saturating_mul(bytes),
        }
    }

    /// The estimate for `model` (its weights are already loaded and not counted).
    pub fn of_model<B: Backend>(
        model: &AuxModel<B>,
        batch: usize,
        seq: usize,
        value_bytes: usize,
    ) -> Self {
        Self::of_sizes(
            model.vocab_size(),
            model.hidden_size(),
            model.n_heads(),
            batch,
            seq,
            value_bytes,
        )
    }

    /// Every part together.
    pub fn total(&self) -> u64 {
        self.logits
            .saturating_add(self.activations)
            .saturating_add(self.attention)
    }

    /// Refuses the request when [`Self::total`] is over `limit` bytes: the error names `what` is
    /// requested, the estimate and its parts, the limit and `flag`, which raises it.
    ///
    /// # Errors
    /// [`AuxError::MemoryOverLimit`].
    pub fn admit(&self, what: &str, limit: u64, flag: &str) -> Result<(), AuxError> {
        if self.total() <= limit {
            return Ok(());
        }
        Err(AuxError::MemoryOverLimit {
            what: what.to_string(),
            estimate: gib(self.total()),
            parts: format!(
                "logits {:.2} GiB, one block's activations {:.2} GiB, attention {:.2} GiB",
                gib(self.logits),
                gib(self.activations),
                gib(self.attention)
            ),
            limit: gib(limit),
            flag: flag.to_string(),
        })
    }
}

/// Bytes as GiB.
pub fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// The default limit: three quarters of the machine's memory (`MemTotal` of `/proc/meminfo`), or
/// 8 GiB where that cannot be read.
pub fn default_memory_limit() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        })
        .map_or(8 << 30, |kib| kib.saturating_mul(1024) / 4 * 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_counts_each_part_from_the_sizes() {
        // SmolLM2-135M: vocab 49152, d_model 576, 9 heads; 2 rows of 1024 tokens in f32.
        let memory = ForwardMemory::of_sizes(49_152, 576, 9, 2, 1024, 4);
        assert_eq!(memory.logits, 3 * 2 * 1024 * 49_152 * 4);
        assert_eq!(memory.activations, 20 * 2 * 1024 * 576 * 4);
        assert_eq!(memory.attention, 2 * 2 * 1024 * 9 * 1024 * 4);
        assert_eq!(
            memory.total(),
            memory.logits + memory.activations + memory.attention
        );
    }

    #[test]
    fn a_request_over_the_limit_is_refused_with_the_estimate_and_the_flag() {
        // The request of the red team's report: a 3 MB ids file of ~750k positions asks for
        // about 12 GB of SmolLM2 logits (once; three copies when written).
        let memory = ForwardMemory::of_sizes(49_152, 576, 9, 1, 750_000, 4);
        let message = memory
            .admit(
                "logits of 1 x 750000 token ids",
                8 << 30,
                "--max-memory-gib",
            )
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("logits of 1 x 750000 token ids")
                && message.contains("limit 8.00 GiB")
                && message.contains("--max-memory-gib"),
            "{message}"
        );
        memory
            .admit("the same", u64::MAX, "--max-memory-gib")
            .unwrap();
    }

    #[test]
    fn sizes_that_overflow_saturate_instead_of_wrapping() {
        let memory = ForwardMemory::of_sizes(usize::MAX, usize::MAX, usize::MAX, 2, usize::MAX, 8);
        assert_eq!(memory.total(), u64::MAX);
        assert!(memory.admit("huge", u64::MAX - 1, "--flag").is_err());
    }

    #[test]
    fn the_default_limit_is_positive() {
        assert!(default_memory_limit() > 0);
    }
}
