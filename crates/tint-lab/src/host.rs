//! The caller's side of an experiment ([`Host`]): progress through [`Reporter`] and the offline
//! assets through [`Assets`] (tint-assets' provider trait). The front end (xtask) implements both
//! once; a library run asks its host for an asset by name instead of reading a cache path of its
//! own.

pub use tint_assets::provider::{Assets, NoAssets};
pub use tint_assets::AssetError;

use crate::event::Reporter;

/// The caller's side of every experiment: it receives the run's events and provides the assets.
/// Implemented for every type that is both (a run that asks for no asset can pair a closure with
/// [`NoAssets`]).
pub trait Host: Reporter + Assets {}

impl<T: Reporter + Assets> Host for T {}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

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
        fn asset(&self, name: &str) -> Result<PathBuf, AssetError> {
            match name {
                "sotu" => Ok(PathBuf::from("/cache/sotu/data")),
                _ => NoAssets("not in this test's cache").asset(name),
            }
        }
    }

    fn use_host(host: &mut dyn Host) -> Result<PathBuf, AssetError> {
        host.event(RunEvent::Stage("reading".into()));
        host.asset("sotu")
    }

    #[test]
    fn a_reporter_with_assets_is_a_host() {
        let mut host = Recorder(Vec::new());
        assert_eq!(
            use_host(&mut host).unwrap(),
            PathBuf::from("/cache/sotu/data")
        );
        assert_eq!(host.0, [RunEvent::Stage("reading".into())]);
        assert_eq!(
            host.asset("smollm2").unwrap_err().to_string(),
            "asset smollm2: not in this test's cache"
        );
    }
}
