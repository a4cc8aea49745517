//! The segment plans of the H-split ops ([`crate::hsplit`]): runs of output columns that copy,
//! zero, sum, gather or matmul input columns, detected from the constructed weights and evaluated
//! by [`crate::hsplit::apply_segments`] (on burn-flex by a host kernel that writes each output row
//! once; the generic form otherwise).

/// One run of output columns of an H-split op with 0/1-structured weights, detected at
/// construction; [`crate::hsplit::apply_segments`] evaluates a plan on a `[rows, width]` view without transposes.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    /// `len` output columns copy input columns `[source, source + len)`.
    Copy {
        /// First input column.
        source: usize,
        /// Number of columns.
        len: usize,
    },
    /// `len` zero columns.
    Zero {
        /// Number of columns.
        len: usize,
    },
    /// `len` columns `Σ coef · input[source .. source + len)` over the terms (dimension-wise mixing).
    Sum {
        /// `(first input column, coefficient)` per term.
        terms: Vec<(usize, f64)>,
        /// Number of columns.
        len: usize,
    },
    /// Output column `c` = input column `index[c]` (a 0/1 selection matrix).
    Gather {
        /// Input column of each output column.
        index: Vec<usize>,
    },
    /// Split-wise block `block` applied as a matmul (`len` = block size).
    Dense {
        /// Block index.
        block: usize,
        /// Block size.
        len: usize,
    },
    /// Output columns `[offset, offset + width)` of split-wise block `block` ([`crate::hsplit::restrict_plan`]).
    PartialDense {
        /// Block index.
        block: usize,
        /// Block size.
        len: usize,
        /// First kept column of the block output.
        offset: usize,
        /// Number of kept columns.
        width: usize,
    },
}

impl Segment {
    /// The number of output columns.
    pub(crate) fn len(&self) -> usize {
        match self {
            Segment::Copy { len, .. }
            | Segment::Zero { len }
            | Segment::Sum { len, .. }
            | Segment::Dense { len, .. } => *len,
            Segment::PartialDense { width, .. } => *width,
            Segment::Gather { index } => index.len(),
        }
    }
}
