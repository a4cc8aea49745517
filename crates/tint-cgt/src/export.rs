//! Safetensors export of plain (baseline or folded) models, with GPT-2 like tensor names.

use std::collections::BTreeMap;
use std::path::Path;

use burn::module::Param;
use burn::nn::{LayerNorm, Linear};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use safetensors::tensor::{Dtype, TensorView};

use crate::error::{CgtError, Result};
use crate::model::CgtModel;

/// Named f32 tensors: `name -> (shape, values)`.
pub type NamedTensors = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

fn put<B: Backend, const D: usize>(out: &mut NamedTensors, name: String, tensor: Tensor<B, D>) {
    let shape = tensor.dims().to_vec();
    let values = tensor
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .unwrap_or_default();
    out.insert(name, (shape, values));
}

fn put_linear<B: Backend>(out: &mut NamedTensors, prefix: &str, linear: &Linear<B>) {
    put(out, format!("{prefix}.weight"), linear.weight.val());
    if let Some(bias) = &linear.bias {
        put(out, format!("{prefix}.bias"), bias.val());
    }
}

fn put_norm<B: Backend>(out: &mut NamedTensors, prefix: &str, norm: &LayerNorm<B>) {
    put(out, format!("{prefix}.weight"), norm.gamma.val());
    if let Some(beta) = &norm.beta {
        put(out, format!("{prefix}.bias"), beta.val());
    }
}

impl<B: Backend> CgtModel<B> {
    /// All weights of a plain model (baseline or [`CgtModel::specialise`] output) by name.
    ///
    /// Names: `wte`/`wpe` (or `wie` for vector inputs), `h.{i}.ln_1`, `h.{i}.attn.c_attn` (fused q/k/v,
    /// weight `[d_x, 3 d_x]` in the `x W` convention), `h.{i}.attn.c_proj`, `h.{i}.ln_2`,
    /// `h.{i}.mlp.c_fc`, `h.{i}.mlp.c_proj`, `ln_f`, `lm_head`.
    pub fn named_tensors(&self) -> Result<NamedTensors> {
        if self.is_guided() || self.upper.iter().any(|b| b.template_attn.is_some()) {
            return Err(CgtError::Safetensors(
                "only plain (baseline or folded) models can be exported".into(),
            ));
        }
        let mut out = NamedTensors::new();
        if let Some(table) = &self.x_embedding.tokens {
            put(&mut out, "wte.weight".into(), table.weight.val());
        }
        if let Some(map) = &self.x_embedding.vectors {
            put_linear(&mut out, "wie", map);
        }
        let positions: &Param<Tensor<B, 2>> = &self.x_embedding.positions;
        put(&mut out, "wpe.weight".into(), positions.val());
        for (i, block) in self.upper.iter().enumerate() {
            put_norm(&mut out, &format!("h.{i}.ln_1"), &block.norm_attn);
            put_linear(&mut out, &format!("h.{i}.attn.c_attn"), &block.attn.qkv);
            put_linear(&mut out, &format!("h.{i}.attn.c_proj"), &block.attn.output);
            put_norm(&mut out, &format!("h.{i}.ln_2"), &block.norm_mlp);
            put_linear(&mut out, &format!("h.{i}.mlp.c_fc"), &block.mlp.fc);
            put_linear(&mut out, &format!("h.{i}.mlp.c_proj"), &block.mlp.proj);
        }
        put_norm(&mut out, "ln_f", &self.final_norm);
        put_linear(&mut out, "lm_head", &self.head);
        Ok(out)
    }

    /// Writes [`CgtModel::named_tensors`] as a safetensors file (f32, little endian).
    pub fn export_safetensors(&self, path: impl AsRef<Path>) -> Result<()> {
        let tensors = self.named_tensors()?;
        let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
            .into_iter()
            .map(|(name, (shape, values))| {
                let raw = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                (name, shape, raw)
            })
            .collect();
        let mut views = Vec::with_capacity(bytes.len());
        for (name, shape, raw) in &bytes {
            let view = TensorView::new(Dtype::F32, shape.clone(), raw)
                .map_err(|e| CgtError::Safetensors(e.to_string()))?;
            views.push((name.clone(), view));
        }
        let mut metadata = std::collections::HashMap::new();
        metadata.insert(
            "format".to_string(),
            "tint-cgt plain transformer".to_string(),
        );
        let bytes = safetensors::serialize(views, Some(metadata))
            .map_err(|e| CgtError::Safetensors(e.to_string()))?;
        // Atomically: a crash leaves the previous file, never a cut one.
        tint_assets::atomic_write::write_atomic(path, &bytes)?;
        Ok(())
    }
}
