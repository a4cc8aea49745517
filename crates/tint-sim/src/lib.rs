//! tint-sim
