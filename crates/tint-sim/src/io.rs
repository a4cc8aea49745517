//! Saving and loading a constructed simulator: `tint_config.json` (TinT configuration, auxiliary sizes)
//! and `tint.safetensors` (embeddings and every prefix block). The module weights are a deterministic
//! function of the configuration (docs/construction.md §6) and are rebuilt on load.

use std::path::Path;

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors};
use serde::{Deserialize, Serialize};

use crate::config::TintConfig;
use crate::error::SimError;
use crate::params::{Activation, AuxDims};
use crate::simulator::{SimulatorParts, TintSimulator};

/// File holding the JSON description.
pub const CONFIG_FILE: &str = "tint_config.json";
/// File holding the tensors.
pub const TENSORS_FILE: &str = "tint.safetensors";

#[derive(Debug, Serialize, Deserialize)]
struct SavedConfig {
    config: TintConfig,
    aux_dims: AuxDims,
    activation: Activation,
    position_offset: usize,
    /// `"f32"` or `"f64"`.
    dtype: String,
}

fn io_error(path: &Path, source: std::io::Error) -> SimError {
    SimError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn tensor_bytes<B: Backend, const D: usize>(t: &Tensor<B, D>) -> Vec<u8> {
    let data = t.to_data();
    match data.dtype {
        DType::F64 => data
            .convert::<f64>()
            .to_vec::<f64>()
            .unwrap_or_default()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        _ => data
            .convert::<f32>()
            .to_vec::<f32>()
            .unwrap_or_default()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    }
}

impl<B: Backend> TintSimulator<B> {
    /// Writes the simulator to `dir` (created if missing); each file atomically (a crash leaves the
    /// previous file, never a cut one).
    ///
    /// # Errors
    /// [`SimError::Io`], [`SimError::Write`] (naming the operation and the path),
    /// [`SimError::Format`]; [`SimError::UnsupportedModel`] for a post-LN OPT simulator (the saved
    /// format holds pre-LN models with a tied head).
    pub fn save(&self, dir: &Path) -> Result<(), SimError> {
        // Post-LN / own-LM-head simulators (OPT-350m layout) are not in the saved format.
        self.check_saveable()?;
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        let parts = self.parts();
        let is_f64 = parts.token_embedding.dtype() == DType::F64;
        let saved = SavedConfig {
            config: parts.config.clone(),
            aux_dims: parts.aux_dims,
            activation: parts.activation,
            position_offset: parts.position_offset,
            dtype: if is_f64 { "f64" } else { "f32" }.into(),
        };
        let json =
            serde_json::to_string_pretty(&saved).map_err(|e| SimError::Format(e.to_string()))?;
        let config_path = dir.join(CONFIG_FILE);
        tint_assets::atomic_write::write_atomic(&config_path, json.as_bytes())?;
        let dtype = if is_f64 { Dtype::F64 } else { Dtype::F32 };
        let mut entries: Vec<(String, Vec<usize>, Vec<u8>)> = vec![
            (
                "token_embedding".into(),
                parts.token_embedding.dims().to_vec(),
                tensor_bytes(&parts.token_embedding),
            ),
            (
                "position_embedding".into(),
                parts.position_embedding.dims().to_vec(),
                tensor_bytes(&parts.position_embedding),
            ),
            (
                "ln_f_prefix".into(),
                parts.ln_f_prefix.dims().to_vec(),
                tensor_bytes(&parts.ln_f_prefix),
            ),
        ];
        for (l, blocks) in parts.prefixes.iter().enumerate() {
            for (k, block) in blocks.iter().enumerate() {
                entries.push((
                    format!("prefix.{l}.{k}"),
                    block.dims().to_vec(),
                    tensor_bytes(block),
                ));
            }
        }
        let views = entries
            .iter()
            .map(|(name, shape, bytes)| {
                safetensors::tensor::TensorView::new(dtype, shape.clone(), bytes)
                    .map(|v| (name.clone(), v))
                    .map_err(|e| SimError::Format(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bytes =
            safetensors::serialize(views, None).map_err(|e| SimError::Format(e.to_string()))?;
        tint_assets::atomic_write::write_atomic(dir.join(TENSORS_FILE), &bytes)?;
        Ok(())
    }

    /// Reads a simulator written by [`Self::save`].
    ///
    /// # Errors
    /// [`SimError::Io`] for missing files, [`SimError::Format`] for malformed ones, and the
    /// construction errors of [`TintSimulator::new`].
    pub fn load(dir: &Path, device: &B::Device) -> Result<Self, SimError> {
        let config_path = dir.join(CONFIG_FILE);
        let json = std::fs::read_to_string(&config_path).map_err(|e| io_error(&config_path, e))?;
        let saved: SavedConfig = serde_json::from_str(&json)
            .map_err(|e| SimError::Format(format!("{}: {e}", config_path.display())))?;
        let tensors_path = dir.join(TENSORS_FILE);
        let bytes = std::fs::read(&tensors_path).map_err(|e| io_error(&tensors_path, e))?;
        let st = SafeTensors::deserialize(&bytes)
            .map_err(|e| SimError::Format(format!("{}: {e}", tensors_path.display())))?;
        let read = |name: &str, shape: &[usize]| -> Result<TensorData, SimError> {
            let view = st
                .tensor(name)
                .map_err(|_| SimError::Format(format!("missing tensor {name}")))?;
            if view.shape() != shape {
                return Err(SimError::Format(format!(
                    "tensor {name} has shape {:?}, expected {shape:?}",
                    view.shape()
                )));
            }
            let raw = view.data();
            match (view.dtype(), saved.dtype.as_str()) {
                (Dtype::F32, "f32") => Ok(TensorData::new(
                    raw.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect::<Vec<_>>(),
                    shape.to_vec(),
                )),
                (Dtype::F64, "f64") => Ok(TensorData::new(
                    raw.chunks_exact(8)
                        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                        .collect::<Vec<_>>(),
                    shape.to_vec(),
                )),
                (dtype, expected) => Err(SimError::Format(format!(
                    "tensor {name} has dtype {dtype:?}, expected {expected}"
                ))),
            }
        };
        let dims = saved.aux_dims;
        let (p, ds) = (saved.config.num_prefixes, saved.config.hidden_size);
        if dims.d_model == 0 || !dims.d_inner.is_multiple_of(dims.d_model) {
            return Err(SimError::Format(format!("bad auxiliary sizes {dims:?}")));
        }
        let n_blocks = crate::config::blocks_per_layer(dims.d_inner / dims.d_model);
        // No capacity from the file's count: a huge n_layers fails at its first missing tensor.
        let mut prefixes = Vec::new();
        for l in 0..dims.n_layers {
            let blocks = (0..n_blocks)
                .map(|k| {
                    Ok(Tensor::from_data(
                        read(&format!("prefix.{l}.{k}"), &[1, p, ds])?,
                        device,
                    ))
                })
                .collect::<Result<Vec<_>, SimError>>()?;
            prefixes.push(blocks);
        }
        let parts = SimulatorParts {
            token_embedding: Tensor::from_data(
                read("token_embedding", &[dims.vocab_size, dims.d_model])?,
                device,
            ),
            position_embedding: Tensor::from_data(
                read("position_embedding", &[dims.n_positions, dims.d_model])?,
                device,
            ),
            ln_f_prefix: Tensor::from_data(read("ln_f_prefix", &[1, p, ds])?, device),
            prefixes,
            config: saved.config,
            aux_dims: dims,
            activation: saved.activation,
            position_offset: saved.position_offset,
        };
        TintSimulator::from_parts(parts)
    }
}
