//! What a run needs from the program that starts it: the device of the chosen backend, the
//! backend's name for the reports, the offline assets, and the code version for resume
//! fingerprints.

use std::path::Path;

use burn::tensor::backend::Backend;

use crate::model_source::Assets;

/// The environment of a run on backend `B` (the autodiff backend for runs that train).
pub struct RunEnv<'a, B: Backend> {
    /// The device every tensor is placed on.
    pub device: B::Device,
    /// The backend's name, recorded in the reports (`flex`, `wgpu`, `cuda`).
    pub backend: &'a str,
    /// Where the offline assets come from.
    pub assets: &'a dyn Assets,
    /// The version of the code ([`code_version`]), recorded in resume fingerprints.
    pub code_version: String,
}

/// The version of the code: the crate version and the git commit of the checkout at `repo`, or
/// `unknown` outside a git checkout.
pub fn code_version(repo: &Path) -> String {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    format!("{} git {commit}", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_version_names_the_crate_version_and_a_commit() {
        let here = code_version(Path::new(env!("CARGO_MANIFEST_DIR")));
        assert!(
            here.starts_with(concat!(env!("CARGO_PKG_VERSION"), " git ")),
            "{here}"
        );
        let nowhere = code_version(&std::env::temp_dir().join("no-such-checkout-dir"));
        assert!(nowhere.ends_with(" git unknown"), "{nowhere}");
    }
}
