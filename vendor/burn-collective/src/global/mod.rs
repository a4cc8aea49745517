// PATCH (tint, vendor/README.md): without `websocket` the global client is never built.
#[cfg_attr(not(feature = "websocket"), allow(dead_code))]
pub(crate) mod node;
#[cfg_attr(not(feature = "websocket"), allow(dead_code))]
pub(crate) mod shared;

#[cfg(feature = "orchestrator")]
pub mod orchestrator;
#[cfg(feature = "orchestrator")]
pub use orchestrator::*;

mod base;
pub use base::*;
