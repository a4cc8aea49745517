//! The caller's side of an experiment ([`Host`]): progress through [`Reporter`] and the offline
//! assets through [`Assets`]. The front end (xtask) implements both once; a library run asks its
//! host for an asset by name instead of reading a cache path of its own.

use std::path::PathBuf;

use crate::event::Reporter;

/// An offline asset (model, text, data set) that could not be obtained.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("asset {name}: {reason}")]
pub struct AssetUnavailable {
    /// The asset's name in the manifest (`smollm2`, `sotu`, …).
    pub name: String,
    /// Why it could not be obtained.
    pub reason: String,
}

/// Provides the offline assets by name (`smollm2`, `sotu`, `shakespeare`, `sentiment-snippets`,
/// …; the manifest of `tint-assets`, docs/assets.md).
pub trait Assets {
    /// The main path of asset `name` (fetched into the cache first when it is missing): the file
    /// of a one-file asset, the folder of the others.
    ///
    /// # Errors
    /// [`AssetUnavailable`] when the asset cannot be obtained.
    fn asset(&self, name: &str) -> Result<PathBuf, AssetUnavailable>;
}

/// The caller's side of every experiment: it receives the run's events and provides the assets.
/// Implemented for every type that is both (a run that asks for no asset can pass a closure with
/// [`NoAssets`]).
pub trait Host: Reporter + Assets {}

impl<T: Reporter + Assets> Host for T {}

/// Assets for a run that needs none: every request is refused with the reason given.
#[derive(Debug, Clone, Copy)]
pub struct NoAssets(pub &'static str);

impl Assets for NoAssets {
    fn asset(&self, name: &str) -> Result<PathBuf, AssetUnavailable> {
        Err(AssetUnavailable {
            name: name.to_string(),
            reason: self.0.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::RunEvent;

    /// A recording host: events kept, one asset known.
    struct Recorder(Vec<RunEvent>);

    impl Reporter for Recorder {
        fn event(&mut self, event: RunEvent) {
            self.0.push(event);
        }
    }

    impl Assets for Recorder {
        fn asset(&self, name: &str) -> Result<PathBuf, AssetUnavailable> {
            match name {
                "sotu" => Ok(PathBuf::from("/cache/sotu/data")),
                _ => NoAssets("not in this test's cache").asset(name),
            }
        }
    }

    fn use_host(host: &mut dyn Host) -> Result<PathBuf, AssetUnavailable> {
        host.event(RunEvent::Stage("reading".into()));
        host.asset("sotu")
    }

    #[test]
    fn a_reporter_with_assets_is_a_host() {
        let mut host = Recorder(Vec::new());
        assert_eq!(use_host(&mut host), Ok(PathBuf::from("/cache/sotu/data")));
        assert_eq!(host.0, [RunEvent::Stage("reading".into())]);
    }

    #[test]
    fn a_refused_asset_names_itself_and_the_reason() {
        let err = NoAssets("offline").asset("smollm2").unwrap_err();
        assert_eq!(err.to_string(), "asset smollm2: offline");
    }
}
