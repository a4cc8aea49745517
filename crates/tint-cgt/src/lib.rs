//! tint-cgt
