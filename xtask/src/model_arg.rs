//! The `--model` argument: a checkpoint directory, a `.gguf` file, or the name of a fetched asset
//! ([`tint_eval::model_source::ModelSource`]), loaded with the assets fetched on demand.

use anyhow::Result;
use burn::tensor::backend::Backend;
use tint_aux::AuxModel;

pub(crate) use tint_eval::model_source::ModelSource as ModelArg;

/// Loads the auxiliary model named by `arg`, fetching the asset first when needed.
pub(crate) fn load_aux<B: Backend>(arg: &ModelArg, device: &B::Device) -> Result<AuxModel<B>> {
    Ok(arg.load(&crate::fetch::FetchedAssets, device)?)
}
