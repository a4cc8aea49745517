//! Helpers shared by the integration tests: fixture paths, safetensors reading, comparisons.
#![allow(dead_code)]

use std::path::PathBuf;

use burn::tensor::backend::Backend;
use burn::tensor::{Bool, DType, Int, Tensor, TensorData};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use safetensors::{Dtype, SafeTensors};
use tint_sim::{AuxParams, SimInput};

pub(crate) type TestBackend = burn::backend::Flex;

/// Repository root (two levels above this crate).
pub(crate) fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The official micro GPT-2 (D = 32, 2 layers, 4 heads, 64 positions, vocabulary 4096).
pub(crate) fn micro_model_dir() -> PathBuf {
    repo_root().join("fixtures/official-tint/micro-gpt2-random")
}

/// Loads the micro GPT-2 through tint-aux.
pub(crate) fn micro_params() -> AuxParams<TestBackend> {
    let device = Default::default();
    let model = tint_aux::load_model::<TestBackend>(&micro_model_dir(), &device)
        .expect("micro model loads");
    AuxParams::from_aux(&model).expect("micro model converts")
}

/// Tensors of a safetensors file as `TensorData` (f32, f64 or i64).
pub(crate) struct Fixture {
    bytes: Vec<u8>,
}

impl Fixture {
    pub(crate) fn open(path: PathBuf) -> Self {
        let bytes =
            std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        Self { bytes }
    }

    pub(crate) fn data(&self, name: &str) -> TensorData {
        let st = SafeTensors::deserialize(&self.bytes).expect("valid safetensors");
        let view = st
            .tensor(name)
            .unwrap_or_else(|_| panic!("fixture has no tensor {name}"));
        let shape = view.shape().to_vec();
        let raw = view.data();
        match view.dtype() {
            Dtype::F32 => TensorData::new(
                raw.chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect::<Vec<_>>(),
                shape,
            ),
            Dtype::F64 => TensorData::new(
                raw.chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                    .collect::<Vec<_>>(),
                shape,
            ),
            Dtype::I64 => TensorData::new(
                raw.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                    .collect::<Vec<_>>(),
                shape,
            ),
            other => panic!("unsupported fixture dtype {other:?}"),
        }
    }
}

/// The golden micro_s4 inputs: ids `[2, 64]` and the training mask (first 32 tokens).
pub(crate) fn golden_input<B: Backend>(fixture: &Fixture, device: &B::Device) -> SimInput<B> {
    let ids = Tensor::<B, 2, Int>::from_data(fixture.data("input_ids"), device);
    let mask = Tensor::<B, 2>::from_data(fixture.data("bidirection_mask").convert::<f32>(), device)
        .greater_elem(0.5);
    SimInput::new(ids, mask)
}

/// Max |a - b| over two tensors of the same shape, in f64.
pub(crate) fn max_abs_diff(a: &TensorData, b: &TensorData) -> f64 {
    assert_eq!(a.shape, b.shape, "shapes differ");
    let a: Vec<f64> = a.clone().convert::<f64>().to_vec().unwrap();
    let b: Vec<f64> = b.clone().convert::<f64>().to_vec().unwrap();
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// The first `n` vocabulary columns of logits `[batch_size, seq_length, vocab_size]`.
pub(crate) fn vocab_slice<B: Backend>(logits: Tensor<B, 3>, n: usize) -> TensorData {
    let [b, t, _] = logits.dims();
    logits.slice([0..b, 0..t, 0..n]).into_data()
}

/// A random training mask with per-sequence lengths.
pub(crate) fn train_lengths_input<B: Backend>(
    ids: Tensor<B, 2, Int>,
    lengths: &[usize],
) -> SimInput<B> {
    SimInput::with_train_lengths(ids, lengths).expect("valid lengths")
}

pub(crate) fn f64_of<B: Backend>(t: Tensor<B, 3>) -> Tensor<B, 3> {
    t.cast(DType::F64)
}

pub(crate) fn bool_tensor<B: Backend, const D: usize>(
    values: Vec<bool>,
    shape: [usize; D],
    device: &B::Device,
) -> Tensor<B, D, Bool> {
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// A small deterministic generator (rand's SplitMix64 + Box–Muller) so that random test models and
/// inputs are the same on every run (burn's Flex seed only covers one random op).
pub(crate) struct SeededRng(SplitMix64);

impl SeededRng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(SplitMix64::seed_from_u64(seed))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in (0, 1).
    pub(crate) fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    pub(crate) fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// Token ids `[batch_size, seq_length]` uniform in `0..vocab`.
    pub(crate) fn ids<B: Backend>(
        &mut self,
        batch_size: usize,
        seq_length: usize,
        vocab: usize,
    ) -> Tensor<B, 2, Int> {
        let ids: Vec<i64> = (0..batch_size * seq_length)
            .map(|_| (self.next_u64() % vocab as u64) as i64)
            .collect();
        Tensor::from_data(
            TensorData::new(ids, [batch_size, seq_length]),
            &Default::default(),
        )
    }

    fn tensor<B: Backend, const D: usize>(
        &mut self,
        shape: [usize; D],
        mean: f64,
        std: f64,
    ) -> Tensor<B, D> {
        let n = shape.iter().product();
        let values: Vec<f32> = (0..n)
            .map(|_| (mean + std * self.normal()) as f32)
            .collect();
        Tensor::from_data(TensorData::new(values, shape), &Default::default())
    }

    /// The same distribution as [`AuxParams::random`] (GPT-2-like weights, gains `1 + N(0, 0.1²)`,
    /// embeddings `N(0, 0.5²)`), drawn from this generator.
    pub(crate) fn aux_params<B: Backend>(
        &mut self,
        dims: tint_sim::AuxDims,
        activation: tint_sim::Activation,
    ) -> AuxParams<B> {
        let (d, i) = (dims.d_model, dims.d_inner);
        let ln = |rng: &mut Self| tint_sim::LayerNormParams {
            gamma: rng.tensor([1, 1, d], 1.0, 0.1),
            beta: rng.tensor([1, 1, d], 0.0, 0.02),
        };
        let layers = (0..dims.n_layers)
            .map(|_| tint_sim::LayerParams {
                ln_1: ln(self),
                w_q: self.tensor([1, d, d], 0.0, 0.2),
                b_q: self.tensor([1, 1, d], 0.0, 0.02),
                w_k: self.tensor([1, d, d], 0.0, 0.2),
                b_k: self.tensor([1, 1, d], 0.0, 0.02),
                w_v: self.tensor([1, d, d], 0.0, 0.2),
                b_v: self.tensor([1, 1, d], 0.0, 0.02),
                w_o: self.tensor([1, d, d], 0.0, 0.1),
                b_o: self.tensor([1, 1, d], 0.0, 0.02),
                ln_2: ln(self),
                w_fc: self.tensor([1, d, i], 0.0, 0.2),
                b_fc: self.tensor([1, 1, i], 0.0, 0.02),
                w_proj: self.tensor([1, i, d], 0.0, 0.1),
                b_proj: self.tensor([1, 1, d], 0.0, 0.02),
            })
            .collect();
        AuxParams {
            token_embedding: self.tensor([dims.vocab_size, d], 0.0, 0.5),
            lm_head: None,
            position_embedding: self.tensor([dims.n_positions, d], 0.0, 0.1),
            position_offset: 0,
            layers,
            ln_f: Some(ln(self)),
            norm_placement: tint_sim::params::NormPlacement::PreLn,
            n_heads: dims.n_heads,
            activation,
        }
    }
}

/// Deterministic token ids below 97 (the tiny LLaMA fixture's vocabulary is larger), different per
/// sequence and per `seed`.
pub(crate) fn llama_ids(
    batch_size: usize,
    seq_length: usize,
    seed: usize,
) -> Tensor<TestBackend, 2, Int> {
    let ids: Vec<i64> = (0..batch_size * seq_length)
        .map(|k| ((k * 37 + seed * 11 + 5 + k / seq_length * 13) % 97) as i64)
        .collect();
    Tensor::from_data(
        TensorData::new(ids, [batch_size, seq_length]),
        &Default::default(),
    )
}
