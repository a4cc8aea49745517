//! The offline assets of the project and their formats, as a light library (no burn): crash-safe
//! output files ([`atomic_write`]), used by every crate that writes a report or result.

pub mod atomic_write;

pub use atomic_write::{write_atomic, write_atomic_with, AtomicWriteError};
