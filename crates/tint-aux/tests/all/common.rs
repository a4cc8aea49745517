//! Helpers shared by the integration tests: fixture paths and golden-file reading.
#![allow(dead_code)]

use std::path::PathBuf;

use burn::tensor::{Int, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors};

/// CPU backend of the tests.
pub(crate) type TestBackend = burn::backend::Flex;

/// Repository root (two levels above this crate).
pub(crate) fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `fixtures/aux/<name>` (made by scripts/make_aux_fixtures.py).
pub(crate) fn aux_fixture(name: &str) -> PathBuf {
    repo_root().join("fixtures/aux").join(name)
}

/// The in-repo copy of the official micro GPT-2.
pub(crate) fn official_micro_gpt2() -> PathBuf {
    repo_root().join("fixtures/official-tint/micro-gpt2-random")
}

/// The shared official fixtures next to the repository, when present.
pub(crate) fn shared_official() -> Option<PathBuf> {
    let dir = repo_root().join("../shared/fixtures/official-tint");
    dir.exists().then_some(dir)
}

/// A golden safetensors file held in memory.
pub(crate) struct Golden {
    bytes: Vec<u8>,
}

impl Golden {
    pub(crate) fn open(path: PathBuf) -> Self {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        Self { bytes }
    }

    fn tensors(&self) -> SafeTensors<'_> {
        SafeTensors::deserialize(&self.bytes).expect("golden file parses")
    }

    /// A float32 tensor as (values, shape).
    pub(crate) fn f32(&self, name: &str) -> (Vec<f32>, Vec<usize>) {
        let tensors = self.tensors();
        let view = tensors
            .tensor(name)
            .unwrap_or_else(|_| panic!("golden has {name}"));
        assert_eq!(view.dtype(), Dtype::F32, "{name}");
        let values = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        (values, view.shape().to_vec())
    }

    /// An int64 tensor as a `[batch_size, seq_length]` burn tensor.
    pub(crate) fn ids(&self, name: &str) -> Tensor<TestBackend, 2, Int> {
        let tensors = self.tensors();
        let view = tensors
            .tensor(name)
            .unwrap_or_else(|_| panic!("golden has {name}"));
        assert_eq!(view.dtype(), Dtype::I64, "{name}");
        let values: Vec<i64> = view
            .data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        Tensor::from_data(
            TensorData::new(values, view.shape().to_vec()),
            &Default::default(),
        )
    }
}

/// Largest absolute difference between a tensor and golden values of the same shape.
pub(crate) fn max_abs_diff<const D: usize>(
    got: Tensor<TestBackend, D>,
    want: &(Vec<f32>, Vec<usize>),
) -> f32 {
    assert_eq!(got.dims().to_vec(), want.1, "shape");
    let got = got.into_data().convert::<f32>().to_vec::<f32>().unwrap();
    got.iter()
        .zip(&want.0)
        .map(|(a, b)| (a - b).abs())
        .fold(
            0.0f32,
            |m, d| if d.is_nan() { f32::INFINITY } else { m.max(d) },
        )
}
