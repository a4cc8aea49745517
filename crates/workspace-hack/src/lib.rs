//! No code: this crate exists for its dependencies (scripts/workspace_hack.py, docs/build-time.md).
//! Every member of the workspace takes it as a dev-dependency, so that `cargo test -p MEMBER`
//! resolves each external dependency with the features `cargo test --workspace` gives it, and
//! reuses the workspace's build instead of compiling a second copy.
