//! `cargo xtask logits`: dump an auxiliary model's logits for given token ids, for cross-checking against
//! other implementations (HF transformers, the authors' TinT code).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use burn::tensor::{Int, Tensor, TensorData};

use crate::backend::{device, B};
use crate::model_arg::{load_aux, ModelArg};

/// Arguments of `cargo xtask logits`.
#[derive(clap::Args, Debug)]
pub struct LogitsArgs {
    /// Model: a directory (config.json + model.safetensors), a .gguf file, or a fetched asset name
    /// (`smollm2`).
    #[arg(long)]
    pub model: ModelArg,
    /// JSON file `{"input_ids": [[...], ...]}` (all rows of equal length).
    #[arg(long)]
    pub ids: PathBuf,
    /// Output safetensors file; holds `logits` `[batch, seq, vocab]` (f32).
    #[arg(long)]
    pub out: PathBuf,
}

/// The `{"input_ids": …}` file.
#[derive(serde::Deserialize)]
pub struct IdsFile {
    /// Token ids, one row per sequence.
    pub input_ids: Vec<Vec<i64>>,
    /// Optional training-part mask (1 = training token), same shape as `input_ids`.
    #[serde(default)]
    pub train_mask: Option<Vec<Vec<i64>>>,
}

/// Reads and checks an ids file: at least one row, rows non-empty and of equal length, ids ≥ 0.
pub fn read_ids(path: &Path) -> Result<IdsFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let file: IdsFile = serde_json::from_str(&text)
        .with_context(|| format!("{}: expected {{\"input_ids\": [[...], ...]}}", path.display()))?;
    check_rect("input_ids", &file.input_ids, path)?;
    if let Some(mask) = &file.train_mask {
        check_rect("train_mask", mask, path)?;
        if mask.len() != file.input_ids.len() || mask[0].len() != file.input_ids[0].len() {
            bail!("{}: train_mask must have the shape of input_ids", path.display());
        }
        if mask.iter().flatten().any(|&m| m != 0 && m != 1) {
            bail!("{}: train_mask entries must be 0 or 1", path.display());
        }
    }
    if file.input_ids.iter().flatten().any(|&id| id < 0) {
        bail!("{}: negative token id", path.display());
    }
    Ok(file)
}

fn check_rect(name: &str, rows: &[Vec<i64>], path: &Path) -> Result<()> {
    if rows.is_empty() || rows[0].is_empty() {
        bail!("{}: {name} is empty", path.display());
    }
    if rows.iter().any(|r| r.len() != rows[0].len()) {
        bail!("{}: all rows of {name} must have the same length", path.display());
    }
    Ok(())
}

/// Token ids as a `[batch, seq]` Int tensor.
pub fn ids_tensor(rows: &[Vec<i64>]) -> Tensor<B, 2, Int> {
    let flat: Vec<i64> = rows.iter().flatten().copied().collect();
    Tensor::from_data(TensorData::new(flat, [rows.len(), rows[0].len()]), &device())
}

/// Writes named f32 tensors to a safetensors file.
pub fn write_safetensors(path: &Path, tensors: Vec<(&str, Tensor<B, 3>)>) -> Result<()> {
    let owned: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, t)| {
            let shape = t.dims().to_vec();
            let values = t.into_data().convert::<f32>();
            let values = values.as_slice::<f32>().expect("converted to f32");
            let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name.to_string(), shape, bytes)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = owned
        .iter()
        .map(|(name, shape, bytes)| {
            let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)
                .expect("shape and byte length agree");
            (name.clone(), view)
        })
        .collect();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    safetensors::serialize_to_file(views, None, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Runs `cargo xtask logits`.
pub fn run(args: &LogitsArgs) -> Result<()> {
    let ids = read_ids(&args.ids)?;
    let model = load_aux::<B>(&args.model, &device())?;
    let logits = model.forward(ids_tensor(&ids.input_ids))?;
    let dims = logits.dims();
    write_safetensors(&args.out, vec![("logits", logits)])?;
    println!("wrote logits {:?} to {}", dims, args.out.display());
    Ok(())
}
