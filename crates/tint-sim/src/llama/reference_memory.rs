//! Memory admission for the LLaMA functional reference's step (issue 66 item 2): an upper
//! estimate of the bytes one step needs — [`LlamaReference::direction`] or
//! [`LlamaReference::updated`] on sequences of given lengths — from the model's sizes, checked
//! against a limit before anything is allocated (the rule of [`tint_aux::memory::admit_estimate`]).
//!
//! The reference keeps, for every layer it updates, the activations its backward reads (its
//! `LayerTrace`), runs one layer's attention at a time, computes the loss gradient from the
//! logits, and holds the gradients of the updated weights (their sum over the training sequences
//! and the one being added) and then the updated weights (in the reference and in a copy of the
//! auxiliary model for the key/value cache).

use burn::tensor::backend::Backend;
use tint_aux::memory::{admit_estimate, gib, BLOCK_VALUES_PER_MODEL_WIDTH};
use tint_aux::AuxError;

use super::config::LlamaTintConfig;
use super::reference::LlamaReference;

/// Copies of one layer's `[n_heads, seq, seq]` attention scores that exist at once in the
/// reference: the scores, their masked and normalised forms in the forward, and in the backward
/// the recomputed probabilities, the masked weights and their transpose. Measured with
/// `examples/reference_memory.rs` (docs/performance.md); the unit test keeps the estimate above it.
pub const REFERENCE_ATTENTION_COPIES: u64 = 6;

/// Copies of the `[seq, vocab]` logits at once: the first pass's, its log-softmax and softmax in
/// the loss gradient, and that gradient.
pub const REFERENCE_LOGITS_COPIES: u64 = 4;

/// Copies of the updated weights' size held together: the gradients' running sum and the
/// gradient being added, then the updated weights in the reference and in the auxiliary model.
pub const REFERENCE_WEIGHT_COPIES: u64 = 4;

/// The parts of one reference step's memory, in bytes (the loaded model's weights not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReferenceStepMemory {
    /// The traces of the updated layers for the longest sequence, plus one block's transient
    /// activations ([`BLOCK_VALUES_PER_MODEL_WIDTH`] · `d_model` per position).
    pub traces: u64,
    /// One layer's attention, [`REFERENCE_ATTENTION_COPIES`] · `n_heads · seq²`, and the two
    /// `[seq, seq]` masks of the sequence.
    pub attention: u64,
    /// [`REFERENCE_LOGITS_COPIES`] · `seq · vocab`.
    pub logits: u64,
    /// [`REFERENCE_WEIGHT_COPIES`] times the updated weights.
    pub weights: u64,
    /// Descent directions of earlier steps kept beside this one (each the updated weights'
    /// size; a caller reusing directions across step sizes and cells keeps a few:
    /// [`Self::with_kept_directions`]); zero unless set.
    pub kept_directions: u64,
    /// What another method keeps at the same time (`eval icl` keeps dynamic evaluation's
    /// gradients while TinT steps): [`Self::with_kept_beside`]; zero unless set.
    pub kept_beside: u64,
}

/// The sizes an estimate reads from a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReferenceSizes {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Model width.
    pub d_model: usize,
    /// Width of the MLP's hidden layer.
    pub d_ff: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Bytes per value (4 for float32).
    pub value_bytes: usize,
}

impl ReferenceStepMemory {
    /// The estimate for a model of `sizes` whose step `config` updates `updated_layers` layers,
    /// training on sequences of `seq_lengths` (one after another, as
    /// [`LlamaReference::direction`] runs them: the longest one bounds the transient parts);
    /// saturating instead of overflowing.
    pub fn of_sizes(
        sizes: ReferenceSizes,
        config: &LlamaTintConfig,
        updated_layers: usize,
        seq_lengths: &[usize],
    ) -> Self {
        let seq = seq_lengths.iter().copied().max().unwrap_or(0) as u64;
        let [vocab, d, ff, heads, kv, hd, bytes, layers] = [
            sizes.vocab_size,
            sizes.d_model,
            sizes.d_ff,
            sizes.n_heads,
            sizes.n_kv_heads,
            sizes.head_dim,
            sizes.value_bytes,
            updated_layers,
        ]
        .map(|n| n as u64);
        // h_in, a, h_mid, m; rotated queries and the heads before W_O; rotated keys; gate, up
        // and the hidden layer.
        let trace_per_position = 4 * d + 2 * heads * hd + kv * hd + 3 * ff;
        let traces = layers
            .saturating_mul(trace_per_position)
            .saturating_add(BLOCK_VALUES_PER_MODEL_WIDTH.saturating_mul(d))
            .saturating_mul(seq)
            .saturating_mul(bytes);
        let attention = REFERENCE_ATTENTION_COPIES
            .saturating_mul(heads)
            .saturating_add(2)
            .saturating_mul(seq)
            .saturating_mul(seq)
            .saturating_mul(bytes);
        let logits = REFERENCE_LOGITS_COPIES
            .saturating_mul(seq)
            .saturating_mul(vocab)
            .saturating_mul(bytes);
        let updates = config.updates;
        let per_layer = u64::from(updates.attn_value) * d * kv * hd
            + u64::from(updates.attn_output) * heads * hd * d
            + u64::from(updates.mlp) * 3 * d * ff
            + u64::from(updates.norm_gains) * 2 * d;
        let updated = layers
            .saturating_mul(per_layer)
            .saturating_add(u64::from(updates.norm_gains) * d);
        Self {
            traces,
            attention,
            logits,
            weights: REFERENCE_WEIGHT_COPIES
                .saturating_mul(updated)
                .saturating_mul(bytes),
            kept_directions: 0,
            kept_beside: 0,
        }
    }

    /// This estimate with `earlier` descent directions of earlier steps held beside it, each
    /// the size of the updated weights (a quarter of [`Self::weights`]: this step's own
    /// direction is its gradients' running sum, already counted there).
    pub fn with_kept_directions(mut self, earlier: usize) -> Self {
        self.kept_directions = (earlier as u64).saturating_mul(self.direction_bytes());
        self
    }

    /// This estimate with `bytes` another method holds at the same time (its kept steps).
    pub fn with_kept_beside(mut self, bytes: u64) -> Self {
        self.kept_beside = bytes;
        self
    }

    /// The bytes of one kept descent direction: the updated weights' size (a quarter of
    /// [`Self::weights`]), what [`Self::with_kept_directions`] counts per direction.
    pub fn direction_bytes(&self) -> u64 {
        self.weights / REFERENCE_WEIGHT_COPIES
    }

    /// The memory of `n` such steps at once (blocks scored in parallel, each with its own
    /// update): every part of the steps `n` times (another method's kept steps once).
    pub fn times(&self, n: usize) -> Self {
        let n = n as u64;
        Self {
            traces: self.traces.saturating_mul(n),
            attention: self.attention.saturating_mul(n),
            logits: self.logits.saturating_mul(n),
            weights: self.weights.saturating_mul(n),
            kept_directions: self.kept_directions.saturating_mul(n),
            kept_beside: self.kept_beside,
        }
    }

    /// Every part together.
    pub fn total(&self) -> u64 {
        self.traces
            .saturating_add(self.attention)
            .saturating_add(self.logits)
            .saturating_add(self.weights)
            .saturating_add(self.kept_directions)
            .saturating_add(self.kept_beside)
    }

    /// Refuses the step when [`Self::total`] is over `limit` bytes: the error names `what`, the
    /// estimate and its parts, the limit and `flag`, which raises it.
    ///
    /// # Errors
    /// [`AuxError::MemoryOverLimit`].
    pub fn admit(&self, what: &str, limit: u64, flag: &str) -> Result<(), AuxError> {
        admit_estimate(self.total(), what, limit, flag, || {
            format!(
                "updated layers' traces {:.2} GiB, one layer's attention {:.2} GiB, logits {:.2} \
                 GiB, gradients and updated weights {:.2} GiB, kept directions {:.2} GiB, another \
                 method's kept steps {:.2} GiB",
                gib(self.traces),
                gib(self.attention),
                gib(self.logits),
                gib(self.weights),
                gib(self.kept_directions),
                gib(self.kept_beside)
            )
        })
    }
}

impl<B: Backend> LlamaReference<B> {
    /// The sizes of this reference's model.
    pub fn sizes(&self) -> ReferenceSizes {
        let params = self.params();
        let d_ff = params.layers.first().map_or(0, |l| l.w_up.dims()[1]);
        ReferenceSizes {
            vocab_size: params.vocab_size(),
            d_model: params.d_model(),
            d_ff,
            n_heads: params.n_heads,
            n_kv_heads: params.n_kv_heads,
            head_dim: params.head_dim,
            value_bytes: self.dtype().size(),
        }
    }

    /// The estimate of one step of this reference on sequences of `seq_lengths`
    /// ([`ReferenceStepMemory::of_sizes`]).
    pub fn step_memory(&self, seq_lengths: &[usize]) -> ReferenceStepMemory {
        let n_layers = self.params().layers.len();
        ReferenceStepMemory::of_sizes(
            self.sizes(),
            self.config(),
            self.config().simulated_layers(n_layers),
            seq_lengths,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M: vocabulary 49,152, width 576, MLP 1,536, 9 query and 3 key/value heads of
    /// 64, float32.
    const SMOLLM2: ReferenceSizes = ReferenceSizes {
        vocab_size: 49_152,
        d_model: 576,
        d_ff: 1_536,
        n_heads: 9,
        n_kv_heads: 3,
        head_dim: 64,
        value_bytes: 4,
    };

    /// A step of SmolLM2 on a 16-token and a `seq`-token sequence, every layer updated (W_V, W_O
    /// and the MLP: TinT's default).
    fn smollm2(seq: usize) -> ReferenceStepMemory {
        ReferenceStepMemory::of_sizes(SMOLLM2, &LlamaTintConfig::default(), 30, &[16, seq])
    }

    #[test]
    fn the_estimate_counts_each_part_from_the_sizes() {
        let m = smollm2(1024);
        let trace = 4 * 576 + 2 * 9 * 64 + 3 * 64 + 3 * 1536;
        assert_eq!(m.traces, (30 * trace + 20 * 576) * 1024 * 4);
        assert_eq!(m.attention, (6 * 9 + 2) * 1024 * 1024 * 4);
        assert_eq!(m.logits, 4 * 1024 * 49_152 * 4);
        let updated = 30 * (576 * 3 * 64 + 9 * 64 * 576 + 3 * 576 * 1536);
        assert_eq!(m.weights, 4 * updated * 4);
        assert_eq!(m.total(), m.traces + m.attention + m.logits + m.weights);
        assert_eq!(m.times(3).total(), 3 * m.total());
        // The longest sequence bounds the transient parts; more layers, more traces.
        assert_eq!(
            smollm2(1024),
            ReferenceStepMemory::of_sizes(SMOLLM2, &LlamaTintConfig::default(), 30, &[1024, 7])
        );
    }

    /// The estimate stays above what was measured: peak resident memory of
    /// `examples/reference_memory.rs` on SmolLM2-135M-Instruct (Q4_1 GGUF dequantised to
    /// float32; flex; 2026-12-03; 2-core VM), less the peak of the 16-token run (1,324,104 KiB,
    /// an upper bound of the loaded model's share): 1,855,212 / 2,429,992 / 3,861,292 KiB at
    /// 512 / 1,024 / 2,048 positions. The whole estimate (which also counts the weights' copies)
    /// is above the whole measured peak, model included.
    #[test]
    fn the_estimate_is_above_the_measured_peaks() {
        let base_kib = 1_324_104u64;
        for (seq, peak_kib) in [(512, 1_855_212u64), (1024, 2_429_992), (2048, 3_861_292)] {
            let estimate = smollm2(seq);
            assert!(
                estimate.total() - estimate.weights >= (peak_kib - base_kib) * 1024,
                "{seq}: {estimate:?} below {peak_kib} KiB less {base_kib}"
            );
            assert!(estimate.total() >= peak_kib * 1024, "{seq}: {estimate:?}");
        }
    }

    /// Two directions kept from earlier steps add twice the updated weights (a quarter of the
    /// step's weight copies each), and can take a step over the limit that admits it alone.
    #[test]
    fn kept_directions_add_the_updated_weights_each() {
        let alone = smollm2(1024);
        let kept = alone.with_kept_directions(2);
        assert_eq!(kept.kept_directions, 2 * alone.weights / 4);
        assert_eq!(kept.total(), alone.total() + 2 * alone.weights / 4);
        assert_eq!(kept.times(3).total(), 3 * kept.total());
        let limit = alone.total() + alone.weights / 4;
        alone.admit("alone", limit, "--max-memory-gib").unwrap();
        let message = kept
            .admit("with two kept", limit, "--max-memory-gib")
            .unwrap_err()
            .to_string();
        assert!(message.contains("kept directions"), "{message}");
        // What another method keeps at the same time counts once, however many steps run.
        let each = alone.direction_bytes();
        assert_eq!(each, alone.weights / 4);
        let beside = alone.with_kept_beside(each);
        assert_eq!(beside.total(), alone.total() + each);
        assert_eq!(beside.times(3).total(), 3 * alone.total() + each);
        let message = beside
            .admit("beside another method's", limit - 1, "--max-memory-gib")
            .unwrap_err()
            .to_string();
        assert!(message.contains("another method's kept steps"), "{message}");
    }

    #[test]
    fn a_step_over_the_limit_is_refused_with_its_parts_and_the_flag() {
        let message = smollm2(2048)
            .admit("tint-ref's step", 1 << 30, "--max-memory-gib")
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("tint-ref's step")
                && message.contains("updated layers' traces")
                && message.contains("--max-memory-gib"),
            "{message}"
        );
        smollm2(2048)
            .admit("the same", 8 << 30, "--max-memory-gib")
            .unwrap();
    }
}
