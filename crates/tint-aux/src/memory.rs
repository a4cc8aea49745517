//! Memory admission (issue 66 item 2): before a forward pass allocates, an upper estimate of the
//! bytes it needs, from the model's sizes and the request's shape, checked against a limit. A
//! request over the limit gets an error with the estimate, its parts and the limit, instead of an
//! allocation failure that aborts the process.

use crate::dyn_eval::GradientMemory;
use crate::error::AuxError;
use crate::model::AuxModel;
use crate::params::{ParamInfo, ParamMapper};
use burn::module::Param;
use burn::tensor::{backend::Backend, Tensor};

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
        admit_estimate(self.total(), what, limit, flag, || {
            format!(
                "logits {:.2} GiB, one block's activations {:.2} GiB, attention {:.2} GiB",
                gib(self.logits),
                gib(self.activations),
                gib(self.attention)
            )
        })
    }
}

/// Copies of one layer's `[batch, heads, seq, seq]` attention scores an autodiff backward keeps
/// (the scores, their scaled, masked and softmax-normalised forms and the gradients through them).
/// Measured on SmolLM2-135M (9 heads, 30 layers, flex, float32): the whole-graph backward's peak
/// grows by 3.74 GB from 512 to 1,024 positions, 4.4 copies a layer if all of it were attention
/// (docs/performance.md, "Dynamic evaluation's backward block by block"); 5 keeps the estimate
/// above what was measured.
pub const ATTENTION_COPIES_BACKWARD: u64 = 5;

/// Copies of the `[batch, seq, vocab]` logits during the loss's backward: the logits, their
/// log-softmax and the gradients of both.
pub const LOGITS_COPIES_BACKWARD: u64 = 4;

/// The parts of one training step's memory (a forward pass and its autodiff backward), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackwardMemory {
    /// `[batch, seq, vocab]` logits, [`LOGITS_COPIES_BACKWARD`] times.
    pub logits: u64,
    /// The blocks' intermediates held at once: one block's ([`ATTENTION_COPIES_BACKWARD`]
    /// attention copies, twice [`BLOCK_VALUES_PER_MODEL_WIDTH`] activations for the values and
    /// their gradients) times the blocks kept together: one block by block, every block over the
    /// whole graph.
    pub blocks: u64,
    /// The block inputs a block-by-block backward stores, `(n_layers + 1) · batch · seq · d_model`
    /// (none over the whole graph).
    pub stored_inputs: u64,
    /// Gradients of earlier steps kept while this one runs (a caller that reuses a step's
    /// gradient across step sizes and cells keeps a few: [`Self::with_kept_gradients`]); zero
    /// unless set.
    pub kept_gradients: u64,
    /// What another method keeps at the same time (`eval icl` keeps TinT's descent directions
    /// while dynamic evaluation steps): [`Self::with_kept_beside`]; zero unless set.
    pub kept_beside: u64,
}

impl BackwardMemory {
    /// The estimate for a model with `vocab_size`, `d_model`, `n_heads` and `n_layers`, a
    /// `[batch, seq]` training batch, `value_bytes` bytes per value, and a backward block by block
    /// (`blockwise`) or over the whole graph; saturating instead of overflowing.
    #[allow(clippy::too_many_arguments)] // the model's sizes, the batch's shape, the mode
    pub fn of_sizes(
        vocab_size: usize,
        d_model: usize,
        n_heads: usize,
        n_layers: usize,
        batch: usize,
        seq: usize,
        value_bytes: usize,
        blockwise: bool,
    ) -> Self {
        let [vocab, width, heads, layers, batch, seq, bytes] = [
            vocab_size,
            d_model,
            n_heads,
            n_layers,
            batch,
            seq,
            value_bytes,
        ]
        .map(|n| n as u64);
        let positions = batch.saturating_mul(seq);
        let attention = ATTENTION_COPIES_BACKWARD
            .saturating_mul(positions)
            .saturating_mul(heads)
            .saturating_mul(seq);
        let activations = (2 * BLOCK_VALUES_PER_MODEL_WIDTH)
            .saturating_mul(positions)
            .saturating_mul(width);
        let one_block = attention.saturating_add(activations).saturating_mul(bytes);
        let (held, stored_inputs) = if blockwise {
            let stored = layers
                .saturating_add(1)
                .saturating_mul(positions)
                .saturating_mul(width)
                .saturating_mul(bytes);
            (1, stored)
        } else {
            (layers, 0)
        };
        Self {
            logits: LOGITS_COPIES_BACKWARD
                .saturating_mul(positions)
                .saturating_mul(vocab)
                .saturating_mul(bytes),
            blocks: one_block.saturating_mul(held),
            stored_inputs,
            kept_gradients: 0,
            kept_beside: 0,
        }
    }

    /// This estimate with `count` kept gradients of `bytes_each` bytes (the trained parameters'
    /// bytes, [`crate::selected_param_bytes`]) held beside the step: a caller keeping the last
    /// `count` steps' gradients counts them all, the one this step makes included.
    pub fn with_kept_gradients(mut self, count: usize, bytes_each: u64) -> Self {
        self.kept_gradients = (count as u64).saturating_mul(bytes_each);
        self
    }

    /// This estimate with `bytes` another method holds at the same time (its kept steps).
    pub fn with_kept_beside(mut self, bytes: u64) -> Self {
        self.kept_beside = bytes;
        self
    }

    /// The estimate for one step of `model` on a `[batch, seq]` batch with `memory`'s backward
    /// (block by block where the model runs it so: [`GradientMemory::Least`] on LLaMA).
    pub fn of_model<B: Backend>(
        model: &AuxModel<B>,
        batch: usize,
        seq: usize,
        memory: GradientMemory,
    ) -> Self {
        let blockwise = matches!(model, AuxModel::Llama(_)) && memory == GradientMemory::Least;
        Self::of_sizes(
            model.vocab_size(),
            model.hidden_size(),
            model.n_heads(),
            model.n_layers(),
            batch,
            seq,
            value_bytes(model),
            blockwise,
        )
    }

    /// Every part together.
    pub fn total(&self) -> u64 {
        self.logits
            .saturating_add(self.blocks)
            .saturating_add(self.stored_inputs)
            .saturating_add(self.kept_gradients)
            .saturating_add(self.kept_beside)
    }

    /// Refuses the step when [`Self::total`] is over `limit` bytes, as [`ForwardMemory::admit`].
    ///
    /// # Errors
    /// [`AuxError::MemoryOverLimit`].
    pub fn admit(&self, what: &str, limit: u64, flag: &str) -> Result<(), AuxError> {
        admit_estimate(self.total(), what, limit, flag, || {
            format!(
                "logits and their gradients {:.2} GiB, blocks' intermediates {:.2} GiB, stored \
                 block inputs {:.2} GiB, kept gradients {:.2} GiB, another method's kept steps {:.2} \
                 GiB",
                gib(self.logits),
                gib(self.blocks),
                gib(self.stored_inputs),
                gib(self.kept_gradients),
                gib(self.kept_beside)
            )
        })
    }
}

/// `Ok` when `total` bytes are within `limit`; else [`AuxError::MemoryOverLimit`] naming `what`,
/// the estimate, its `parts`, the limit and `flag`. The one admission rule of every estimate
/// (also those other crates make of their own steps).
///
/// # Errors
/// [`AuxError::MemoryOverLimit`].
pub fn admit_estimate(
    total: u64,
    what: &str,
    limit: u64,
    flag: &str,
    parts: impl FnOnce() -> String,
) -> Result<(), AuxError> {
    if total <= limit {
        return Ok(());
    }
    Err(AuxError::MemoryOverLimit {
        what: what.to_string(),
        estimate: gib(total),
        parts: parts(),
        limit: gib(limit),
        flag: flag.to_string(),
    })
}

/// Bytes per value of `model`'s parameters (4 for float32, 8 for float64).
fn value_bytes<B: Backend>(model: &AuxModel<B>) -> usize {
    struct FirstDtype(Option<usize>);
    impl<B: Backend> ParamMapper<B> for FirstDtype {
        fn map<const D: usize>(
            &mut self,
            _info: &ParamInfo,
            param: Param<Tensor<B, D>>,
        ) -> Param<Tensor<B, D>> {
            if self.0.is_none() {
                self.0 = Some(param.val().dtype().size());
            }
            param
        }
    }
    let mut first = FirstDtype(None);
    let _ = model.clone().map_named_params(&mut first);
    first.0.unwrap_or(4)
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

    /// SmolLM2-135M's sizes: vocabulary 49,152, width 576, 9 heads, 30 layers.
    fn smollm2_step(seq: usize, blockwise: bool) -> BackwardMemory {
        BackwardMemory::of_sizes(49_152, 576, 9, 30, 1, seq, 4, blockwise)
    }

    /// The estimate stays above what was measured (peak resident memory of
    /// `examples/backward_memory.rs` on SmolLM2-135M, flex, float32, 2026-12-03, less the 1.77 GB
    /// of the smallest run, an upper bound of the loaded model's share): whole graph 2.58 GB at
    /// 512 positions and 6.32 GB at 1,024; block by block 1.83 GB at 1,024. And block by block
    /// needs a small fraction of the whole graph at 2,048 positions (where the whole graph was
    /// killed above 23 GB).
    #[test]
    fn the_backward_estimate_is_above_the_measured_peaks() {
        let base = 1_767_436 * 1024;
        for (seq, blockwise, peak_kib) in [
            (512, false, 2_580_396u64),
            (1024, false, 6_315_504),
            (1024, true, 1_834_968),
        ] {
            let estimate = smollm2_step(seq, blockwise).total();
            assert!(
                estimate >= peak_kib * 1024 - base,
                "{seq} {blockwise}: {estimate} < {peak_kib} KiB"
            );
        }
        let (least, whole) = (smollm2_step(2048, true), smollm2_step(2048, false));
        assert!(whole.total() > 23_000_000_000, "{whole:?}");
        assert!(least.total() * 5 < whole.total(), "{least:?} vs {whole:?}");
        assert!(least.stored_inputs > 0 && whole.stored_inputs == 0);
    }

    #[test]
    fn a_backward_over_the_limit_is_refused_with_its_parts() {
        let message = smollm2_step(2048, false)
            .admit("dyn-eval's step", 8 << 30, "--max-memory-gib")
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("dyn-eval's step")
                && message.contains("blocks' intermediates")
                && message.contains("--max-memory-gib"),
            "{message}"
        );
        smollm2_step(2048, true)
            .admit("the same block by block", 8 << 30, "--max-memory-gib")
            .unwrap();
    }

    /// Kept gradients add `count` times their size, and take a step that fits alone over a limit
    /// (the error names them).
    #[test]
    fn kept_gradients_count_in_the_estimate() {
        let alone = smollm2_step(1024, true);
        assert_eq!(alone.kept_gradients, 0);
        // Every parameter of SmolLM2-135M in float32.
        let each = 134_515_008 * 4;
        let kept = alone.with_kept_gradients(3, each);
        assert_eq!(kept.total(), alone.total() + 3 * each);
        let limit = alone.total() + each;
        alone.admit("alone", limit, "--max-memory-gib").unwrap();
        let message = kept
            .admit("dyn-eval's step", limit, "--max-memory-gib")
            .unwrap_err()
            .to_string();
        assert!(message.contains("kept gradients 1.50 GiB"), "{message}");
        // What another method keeps at the same time counts too, named apart.
        let beside = alone.with_kept_beside(2 * each);
        assert_eq!(beside.total(), alone.total() + 2 * each);
        let message = beside
            .admit("dyn-eval's step", limit, "--max-memory-gib")
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("another method's kept steps 1.00 GiB"),
            "{message}"
        );
    }

    #[test]
    fn the_default_limit_is_positive() {
        assert!(default_memory_limit() > 0);
    }
}
