//! Errors of the TinT primitives: every invalid hyper-parameter, layout or input shape.

use thiserror::Error;

/// An invalid TinT hyper-parameter combination, memory layout or input.
///
/// Every variant names the violated rule of docs/construction.md §1.2 (or the module argument) and the values
/// that broke it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum TintOpsError {
    /// A size that must be positive is zero.
    #[error("{name} must be positive (got 0)")]
    ZeroSize {
        /// Name of the size.
        name: &'static str,
    },
    /// Rule 1: `D % P == 0`.
    #[error("rule 1 (D % P == 0) violated: D = {d_model}, P = {n_prefixes}")]
    ModelNotMultipleOfPrefixes {
        /// `D`.
        d_model: usize,
        /// `P`.
        n_prefixes: usize,
    },
    /// Rule 2: `Ds % P == 0` and `Ds >= D*(S+1)`.
    #[error(
        "rule 2 (Ds % P == 0 and Ds >= D*(S+1)) violated: Ds = {d_sim}, P = {n_prefixes}, D = {d_model}, S = {stack}"
    )]
    SimWidthTooSmallForStacking {
        /// `Ds`.
        d_sim: usize,
        /// `P`.
        n_prefixes: usize,
        /// `D`.
        d_model: usize,
        /// `S = D/P`.
        stack: usize,
    },
    /// Rule 3: `Ds >= 4*D` (memory regions).
    #[error("rule 3 (Ds >= 4*D for the memory regions) violated: Ds = {d_sim}, D = {d_model}")]
    SimWidthTooSmallForMemory {
        /// `Ds`.
        d_sim: usize,
        /// `D`.
        d_model: usize,
    },
    /// Rule 4: `Ds % Hs == 0`, `hd = Ds/Hs` divides `D`, `npart = D/hd` divides `H`, `H <= Hs`.
    #[error(
        "rule 4 (Ds % Hs == 0, (Ds/Hs) | D, (D/hd) | H, H <= Hs) violated: Ds = {d_sim}, Hs = {n_heads_sim}, D = {d_model}, H = {n_heads_aux}"
    )]
    HeadLayout {
        /// `Ds`.
        d_sim: usize,
        /// `Hs`.
        n_heads_sim: usize,
        /// `D`.
        d_model: usize,
        /// `H`.
        n_heads_aux: usize,
    },
    /// The auxiliary head count must divide `D`.
    #[error("D % H == 0 violated: D = {d_model}, H = {n_heads_aux}")]
    AuxHeadsDoNotDivideModel {
        /// `D`.
        d_model: usize,
        /// `H`.
        n_heads_aux: usize,
    },
    /// Rule 5: `Ds-D`, `Ds-2D`, `Ds-3D` multiples of `P` and of `hd`.
    #[error(
        "rule 5 (Ds - kD multiple of P and hd, k = 1..3) violated: Ds = {d_sim}, D = {d_model}, P = {n_prefixes}, hd = {head_dim_sim}"
    )]
    MemoryAlignment {
        /// `Ds`.
        d_sim: usize,
        /// `D`.
        d_model: usize,
        /// `P`.
        n_prefixes: usize,
        /// `hd`.
        head_dim_sim: usize,
    },
    /// Rule 6: `T <= Tmax` and `P + T <= 2048`.
    #[error(
        "rule 6 (T <= Tmax, P + T <= {max_position_embeddings}) violated: T = {seq_length}, Tmax = {max_seq_length}, P = {n_prefixes}"
    )]
    SequenceTooLong {
        /// `T`.
        seq_length: usize,
        /// `Tmax`.
        max_seq_length: usize,
        /// `P`.
        n_prefixes: usize,
        /// The official causal-buffer size.
        max_position_embeddings: usize,
    },
    /// A memory index that does not fit the row or is not aligned to the head size.
    #[error(
        "memory index {memory_index} (width {width}) does not fit in Ds = {d_sim} or is not a multiple of the head size {head_size}"
    )]
    BadMemoryIndex {
        /// The memory index.
        memory_index: usize,
        /// Width stored from it.
        width: usize,
        /// `Ds`.
        d_sim: usize,
        /// Head size the index must be aligned to.
        head_size: usize,
    },
    /// A tensor argument has the wrong shape.
    #[error("{what}: expected shape {expected:?}, got {actual:?}")]
    Shape {
        /// Which argument.
        what: &'static str,
        /// Expected dims.
        expected: Vec<usize>,
        /// Actual dims.
        actual: Vec<usize>,
    },
    /// A scalar option out of its valid range.
    #[error("option {name} = {value} is invalid: {reason}")]
    BadOption {
        /// Option name.
        name: &'static str,
        /// Its value.
        value: f64,
        /// Why it is invalid.
        reason: &'static str,
    },
}
