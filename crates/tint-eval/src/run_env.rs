//! What a run needs from the program that starts it: the device of the chosen backend, the
//! backend's name for the reports, the offline assets, and the code version for resume
//! fingerprints.

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
    /// Bytes a training step may need by its estimate ([`tint_aux::BackwardMemory`]); a step over
    /// it is refused before it allocates. Not part of any fingerprint (it changes no result).
    pub memory_limit: u64,
}

/// The version of the code for resume fingerprints: the crate version and the digest of the
/// sources the program was built from (`xtask` computes it at build time over the manifests, the
/// lock file and every `src/`), so a report resumes with any build of the same sources (a later
/// commit that changed only documents, tests or results) and with no build of other sources.
pub fn code_version(source_digest: &str) -> String {
    format!("{} src {source_digest}", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_version_names_the_crate_version_and_the_sources() {
        assert_eq!(
            code_version("0123456789abcdef"),
            concat!(env!("CARGO_PKG_VERSION"), " src 0123456789abcdef")
        );
    }
}
