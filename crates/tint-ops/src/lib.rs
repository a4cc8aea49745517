//! tint-ops
