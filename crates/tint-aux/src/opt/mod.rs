//! OPT (Zhang et al. 2022): learned positions with offset 2, pre-LN (125m) or post-LN (350m) blocks,
//! ReLU, optional `project_in`/`project_out`, LM head tied to the token embedding.

mod loader;
mod model;

pub use loader::load_opt;
pub(crate) use loader::load_opt_from as load_opt_from_checkpoint;
pub use model::Opt;
