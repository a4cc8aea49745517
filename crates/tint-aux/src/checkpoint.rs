//! Reading tensors out of a `model.safetensors` file: name lookup over accepted spellings, shape check
//! against the config, and conversion of F32/F16/BF16 to float32.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::{backend::Backend, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors};

use crate::config::io_error;
use crate::layer_norm::LayerNorm;
use crate::AuxError;

/// Reads a whole checkpoint file into memory.
pub(crate) fn read_checkpoint_bytes(path: &Path) -> Result<Vec<u8>, AuxError> {
    std::fs::read(path).map_err(|source| io_error(path, "model weights (safetensors)", source))
}

/// A parsed safetensors file; remembers which tensors were read so that unused ones can be reported.
pub(crate) struct Checkpoint<'a> {
    path: PathBuf,
    tensors: SafeTensors<'a>,
    used: Mutex<BTreeSet<String>>,
}

/// At most this many names are listed in [`AuxError::UnusedTensors`].
const LISTED_UNUSED: usize = 8;

/// [`AuxError::UnusedTensors`] for the `unused` names (sorted), or `Ok` when there are none.
pub(crate) fn unused_error(path: &Path, unused: Vec<String>) -> Result<(), AuxError> {
    if unused.is_empty() {
        return Ok(());
    }
    Err(AuxError::UnusedTensors {
        path: path.to_path_buf(),
        count: unused.len(),
        names: unused.into_iter().take(LISTED_UNUSED).collect(),
    })
}

/// Checks, before any tensor is built, that a checkpoint holding `available` elements can hold a model
/// of at least `needed` parameters (`None`: the config's sizes overflow `u64`).
pub(crate) fn check_parameter_budget(
    path: &Path,
    needed: Option<u64>,
    available: u64,
) -> Result<(), AuxError> {
    match needed {
        Some(needed) if needed <= available => Ok(()),
        _ => Err(AuxError::ConfigMismatch {
            path: path.to_path_buf(),
            reason: match needed {
                Some(needed) => format!(
                    "the config implies at least {needed} parameters, the file holds {available} values"
                ),
                None => "the config's sizes overflow a 64-bit parameter count".to_string(),
            },
        }),
    }
}

/// The first name that appears twice among the top-level keys of the safetensors header of
/// `bytes` (8 bytes of little-endian header length, then the JSON header); `None` when there is
/// none or the header cannot be read (the safetensors reader then reports why).
fn repeated_header_name(bytes: &[u8]) -> Option<String> {
    let length = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let end = usize::try_from(length).ok()?.checked_add(8)?;
    let header = bytes.get(8..end)?;
    let mut de = serde_json::Deserializer::from_slice(header);
    serde::Deserializer::deserialize_map(&mut de, RepeatedKey)
        .ok()
        .flatten()
}

/// Visits a JSON object's keys, skipping the values, and returns the first repeated one.
struct RepeatedKey;

impl<'de> serde::de::Visitor<'de> for RepeatedKey {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a safetensors header object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = std::collections::HashSet::new();
        let mut repeated = None;
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<serde::de::IgnoredAny>()?;
            if !seen.insert(key.clone()) && repeated.is_none() {
                repeated = Some(key);
            }
        }
        Ok(repeated)
    }
}

impl<'a> Checkpoint<'a> {
    /// Parses the safetensors header of `bytes` (read from `path`).
    pub(crate) fn parse(path: &Path, bytes: &'a [u8]) -> Result<Self, AuxError> {
        if let Some(name) = repeated_header_name(bytes) {
            return Err(AuxError::DuplicateTensor {
                path: path.to_path_buf(),
                name,
            });
        }
        let tensors = SafeTensors::deserialize(bytes).map_err(|source| AuxError::Safetensors {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            tensors,
            used: Mutex::new(BTreeSet::new()),
        })
    }

    /// The file this checkpoint was read from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Number of values over all tensors (bounded by the file size: safetensors checks every tensor's
    /// byte range against the data section).
    pub(crate) fn total_elements(&self) -> u64 {
        self.tensors
            .tensors()
            .iter()
            .map(|(_, view)| view.shape().iter().map(|&d| d as u64).product::<u64>())
            .fold(0u64, u64::saturating_add)
    }

    /// Errors with [`AuxError::UnusedTensors`] if a tensor was never read and `ignorable` does not accept
    /// its name (buffers such as GPT-2's causal masks).
    pub(crate) fn check_all_used(&self, ignorable: &dyn Fn(&str) -> bool) -> Result<(), AuxError> {
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let mut unused: Vec<String> = self
            .tensors
            .names()
            .into_iter()
            .filter(|name| !used.contains(*name) && !ignorable(name))
            .map(str::to_string)
            .collect();
        unused.sort();
        unused_error(&self.path, unused)
    }

    /// Whether the file holds a tensor called `name`.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.tensors.tensor(name).is_ok()
    }

    /// Reads tensor `name`, checks that its shape is `expected`, converts it to float32.
    pub(crate) fn tensor<B: Backend, const D: usize>(
        &self,
        name: &str,
        expected: [usize; D],
        device: &B::Device,
    ) -> Result<Tensor<B, D>, AuxError> {
        let view = self
            .tensors
            .tensor(name)
            .map_err(|_| AuxError::MissingTensor {
                path: self.path.clone(),
                tensor: name.to_string(),
            })?;
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string());
        if view.shape() != expected.as_slice() {
            return Err(AuxError::TensorShape {
                path: self.path.clone(),
                tensor: name.to_string(),
                expected: expected.to_vec(),
                found: view.shape().to_vec(),
                set_by: "".into(),
            });
        }
        let bytes = view.data();
        let values: Vec<f32> = match view.dtype() {
            Dtype::F32 => bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::F16 => bytes
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            Dtype::BF16 => bytes
                .chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            other => {
                return Err(AuxError::TensorDtype {
                    path: self.path.clone(),
                    tensor: name.to_string(),
                    dtype: format!("{other:?}"),
                })
            }
        };
        Ok(Tensor::from_data(TensorData::new(values, expected), device))
    }

    /// Reads a linear layer stored `[d_input, d_output]` (HF `Conv1D`): no transpose.
    pub(crate) fn linear_in_out<B: Backend>(
        &self,
        prefix: &str,
        d_input: usize,
        d_output: usize,
        bias: bool,
        device: &B::Device,
    ) -> Result<Linear<B>, AuxError> {
        let weight = self.tensor(&format!("{prefix}.weight"), [d_input, d_output], device)?;
        let bias = if bias {
            Some(self.tensor(&format!("{prefix}.bias"), [d_output], device)?)
        } else {
            None
        };
        Ok(linear(weight, bias))
    }

    /// Reads a linear layer stored `[d_output, d_input]` (PyTorch `nn.Linear`) and transposes it to
    /// `[d_input, d_output]`.
    pub(crate) fn linear_out_in<B: Backend>(
        &self,
        prefix: &str,
        d_input: usize,
        d_output: usize,
        bias: bool,
        device: &B::Device,
    ) -> Result<Linear<B>, AuxError> {
        let weight: Tensor<B, 2> =
            self.tensor(&format!("{prefix}.weight"), [d_output, d_input], device)?;
        let bias = if bias {
            Some(self.tensor(&format!("{prefix}.bias"), [d_output], device)?)
        } else {
            None
        };
        Ok(linear(row_major_transpose(weight), bias))
    }

    /// Reads a LayerNorm (`weight` = gamma, `bias` = beta); with `affine = false` builds gamma 1, beta 0.
    pub(crate) fn layer_norm<B: Backend>(
        &self,
        prefix: &str,
        d_model: usize,
        epsilon: f64,
        affine: bool,
        device: &B::Device,
    ) -> Result<LayerNorm<B>, AuxError> {
        if !affine {
            return Ok(LayerNorm::new(
                Tensor::ones([d_model], device),
                Tensor::zeros([d_model], device),
                epsilon,
            ));
        }
        let gamma = self.tensor(&format!("{prefix}.weight"), [d_model], device)?;
        let beta = self.tensor(&format!("{prefix}.bias"), [d_model], device)?;
        Ok(LayerNorm::new(gamma, beta, epsilon))
    }
}

/// `weight^T` in storage of its own, row-major: `[d_output, d_input]` → `[d_input, d_output]`.
///
/// A transposed *view* would do for a matmul, but burn's `linear` reshapes its weight to
/// `[1, d_input, d_output]`, and a backend whose reshape needs contiguous input (flex) then copies
/// the whole weight on every forward (SmolLM2: 14 % of its forward's time, 2026-11-26 profile).
/// Loading pays that copy once.
///
/// # Shapes
/// * `weight`: `[rows, cols]` → `[cols, rows]`
pub(crate) fn row_major_transpose<B: Backend>(weight: Tensor<B, 2>) -> Tensor<B, 2> {
    let device = weight.device();
    Tensor::from_data(weight.transpose().into_data(), &device)
}

/// Builds a burn [`Linear`] from a `[d_input, d_output]` weight and an optional bias.
pub fn linear<B: Backend>(weight: Tensor<B, 2>, bias: Option<Tensor<B, 1>>) -> Linear<B> {
    Linear {
        weight: Param::from_tensor(weight),
        bias: bias.map(Param::from_tensor),
    }
}
