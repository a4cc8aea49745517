//! Loading an auxiliary model from a local HF-style directory: `config.json` (architecture from
//! `model_type`) and `model.safetensors` (F32, F16 or BF16, converted to float32).
//!
//! The per-architecture key mappings are documented in `gpt2/loader.rs` and `opt/loader.rs`.

use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;

use crate::checkpoint::{check_parameter_budget, read_checkpoint_bytes, Checkpoint};
use crate::config::AuxConfig;
use crate::model::AuxModel;
use crate::size_fields::name_size_fields;
use crate::AuxError;

/// File name of the HF config in a model directory.
pub const CONFIG_FILE: &str = "config.json";
/// File name of the weights in a model directory.
pub const WEIGHTS_FILE: &str = "model.safetensors";

/// Paths of the files of a model directory.
pub fn model_files(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join(CONFIG_FILE), dir.join(WEIGHTS_FILE))
}

/// Loads `dir/config.json` and `dir/model.safetensors`.
///
/// ```
/// use burn::backend::Flex;
/// use burn::tensor::{Int, Tensor, TensorData};
/// use std::path::Path;
///
/// // The committed tiny GPT-2 (random weights, vocabulary 512).
/// let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aux/gpt2-tiny");
/// let device = Default::default();
/// let model = tint_aux::load_model::<Flex>(&dir, &device)?;
/// let ids = Tensor::<Flex, 2, Int>::from_data(TensorData::new(vec![1i64, 2, 3], [1, 3]), &device);
/// let logits = model.forward(ids)?; // [batch, tokens, vocabulary]
/// assert_eq!(logits.dims(), [1, 3, 512]);
/// # Ok::<(), tint_aux::AuxError>(())
/// ```
///
/// # Errors
///
/// [`AuxError::MissingFile`] for an absent file, [`AuxError::UnknownArchitecture`],
/// [`AuxError::InvalidConfig`], [`AuxError::MissingTensor`], [`AuxError::TensorShape`],
/// [`AuxError::TensorDtype`] (each naming the file and tensor).
pub fn load_model<B: Backend>(dir: &Path, device: &B::Device) -> Result<AuxModel<B>, AuxError> {
    // LLaMA: a `.gguf` file or a directory with `model_type: "llama"`.
    if let Some(model) = crate::llama::try_load_llama(dir, device)? {
        return Ok(model);
    }
    let (config_path, weights_path) = model_files(dir);
    let config = AuxConfig::from_file(&config_path)?;
    let bytes = read_checkpoint_bytes(&weights_path)?;
    let checkpoint = Checkpoint::parse(&weights_path, &bytes)?;
    load_model_from(&config, &checkpoint, device)
}

/// Whether a checkpoint tensor that the model does not read may be ignored: GPT-2's causal-mask
/// buffers and the tied LM head (a copy of the token embedding) of GPT-2 and OPT.
fn ignorable(config: &AuxConfig, name: &str) -> bool {
    match config {
        AuxConfig::Gpt2(_) => {
            name.ends_with(".attn.bias")
                || name.ends_with(".attn.masked_bias")
                || name == "lm_head.weight"
        }
        AuxConfig::Opt(_) => name == "lm_head.weight",
    }
}

/// Builds a model of `config`'s architecture from a parsed checkpoint.
///
/// Before any tensor is built, the checkpoint must hold at least [`AuxConfig::min_parameter_count`]
/// values; afterwards every tensor must have been used (or be [`ignorable`]).
pub(crate) fn load_model_from<B: Backend>(
    config: &AuxConfig,
    checkpoint: &Checkpoint<'_>,
    device: &B::Device,
) -> Result<AuxModel<B>, AuxError> {
    with_checks(config, checkpoint, || {
        Ok(match config {
            AuxConfig::Gpt2(c) => AuxModel::Gpt2(crate::gpt2::load_gpt2_from_checkpoint(
                c, checkpoint, device,
            )?),
            AuxConfig::Opt(c) => {
                AuxModel::Opt(crate::opt::load_opt_from_checkpoint(c, checkpoint, device)?)
            }
        })
    })
}

/// Runs `build` between the two checkpoint checks of [`load_model_from`].
pub(crate) fn with_checks<T>(
    config: &AuxConfig,
    checkpoint: &Checkpoint<'_>,
    build: impl FnOnce() -> Result<T, AuxError>,
) -> Result<T, AuxError> {
    check_parameter_budget(
        checkpoint.path(),
        config.min_parameter_count(),
        checkpoint.total_elements(),
    )?;
    let model = build().map_err(|e| name_size_fields(e, &config.size_fields()))?;
    checkpoint.check_all_used(&|name| ignorable(config, name))?;
    Ok(model)
}
