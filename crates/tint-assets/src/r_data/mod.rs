//! A reader for R's serialization format: `.rds` files (one object, `saveRDS`) and `.rda` / `.RData`
//! files (named objects, `save`), gzip-compressed or not, in the XDR (big-endian binary) format of
//! serialization versions 2 and 3.
//!
//! Enough of R's object model is supported to read data frames of character, factor, integer, double
//! and logical columns: `NULL`, symbols, pairlists (with tags and attributes), `CHARSXP` strings
//! (including `NA`), character / integer / double / logical vectors, generic vectors (lists), back
//! references to symbols, and the ALTREP compact sequences and wrappers R writes for row names and
//! vectors. Anything else (environments, closures, language objects, bytecode, external pointers,
//! S4 objects, …) is a typed [`RDataError`] naming the SEXP type and the byte offset in the
//! decompressed stream; so is truncated input.
//!
//! Layout of a stream: an optional `RDX2\n` / `RDX3\n` line (`.rda` files), the format `X\n`, the
//! format version, the writing and the minimal reading R versions, for version 3 the native
//! encoding, then one item. An item starts with a 32-bit flags word: type in bits 0–7, "is object"
//! bit 8, "has attributes" bit 9, "has tag" bit 10, the `gp` levels in bits 12–27.

//!
//! One concept per file: [`RDataError`] (`error.rs`), [`RValue`] / [`RObject`] (`object.rs`),
//! [`DataFrame`] / [`Column`] (`frame.rs`), the SEXP type codes (`sexp.rs`), the entry points
//! [`read_rds`] / [`read_rda`] (`read.rs`) and the XDR item reader (`reader.rs`). The tests share one
//! hand-written R writer, `test_writer` (feature `test-support`).

mod error;
mod frame;
mod object;
mod read;
mod reader;
mod sexp;

#[cfg(test)]
mod mutation_tests;
#[cfg(test)]
mod property_tests;
#[cfg(any(test, feature = "test-support"))]
pub mod test_writer;
#[cfg(test)]
mod tests;

pub use error::RDataError;
pub use frame::{Column, DataFrame};
pub use object::{RObject, RValue};
pub use read::{decompress, read_rda, read_rda_file, read_rds, read_rds_file, take_object};
pub use sexp::sexp_name;

/// Deepest nesting of items accepted (pairlist chains are read iteratively and do not count).
pub const MAX_DEPTH: usize = 512;

/// Longest ALTREP compact sequence expanded (a corrupt length must not allocate gigabytes).
pub const MAX_COMPACT_LENGTH: f64 = (1u64 << 27) as f64;
