//! tint-eval
