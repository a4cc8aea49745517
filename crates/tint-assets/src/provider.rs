//! [`Assets`]: what provides the offline assets to a library run, by name. The front end (xtask)
//! fetches them into the cache (`ensure_asset`, feature `fetch`); a library asks its caller for an
//! asset instead of reading a cache path of its own (the experiments' host, `tint_lab::Host`, is
//! one).

use std::path::PathBuf;

use crate::error::AssetError;

/// Provides the offline assets by name (`smollm2`, `sotu`, `shakespeare`, `sentiment-snippets`,
/// …; the manifest, docs/assets.md).
pub trait Assets {
    /// The main path of asset `name` (fetched into the cache first when it is missing): the file
    /// of a one-file asset, the folder of the others.
    ///
    /// # Errors
    /// The [`AssetError`] of obtaining it ([`AssetError::Unavailable`] from a provider that does
    /// not hold it).
    fn asset(&self, name: &str) -> Result<PathBuf, AssetError>;
}

/// Assets for a run that needs none: every request is refused ([`AssetError::Unavailable`]) with
/// the reason given.
#[derive(Debug, Clone, Copy)]
pub struct NoAssets(pub &'static str);

impl Assets for NoAssets {
    fn asset(&self, name: &str) -> Result<PathBuf, AssetError> {
        Err(AssetError::Unavailable {
            name: name.to_string(),
            reason: self.0.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_asset_names_itself_and_the_reason() {
        let err = NoAssets("offline").asset("smollm2").unwrap_err();
        assert_eq!(err.to_string(), "asset smollm2: offline");
    }
}
