//! The one place where a concrete burn backend is chosen, by cargo feature.
//!
//! Features are additive, so when several are enabled the fastest wins: `cuda` (or `cuda-fused`) >
//! `wgpu` > `flex`.
//! `flex` (pure-Rust CPU) is the default; `cargo xtask --features cuda ...` or
//! `cargo run -p xtask --no-default-features --features wgpu -- ...` select a GPU.

#[cfg(feature = "cuda")]
mod chosen {
    /// Inference backend: burn's plain `CubeBackend<CudaRuntime, …>` with the `cuda` feature,
    /// `Fusion<CubeBackend<…>>` (kernel fusion and autotuning) with `cuda-fused`.
    pub(super) type Inner = burn::backend::Cuda;
    /// Name printed in reports (and the cargo feature that builds it).
    pub(super) const NAME: &str = if cfg!(feature = "cuda-fused") {
        "cuda-fused"
    } else {
        "cuda"
    };
    /// Whether f64 matrix products run.
    pub(super) const F64_MATMUL: bool = false;
    /// Why not.
    pub(super) const F64_MATMUL_NOTE: &str = "cubek-matmul 0.2 refuses f64 operands: \
        `--f64` panicked there on an H200 on 2026-11-26";

    /// GPU `index`.
    pub(super) fn nth_device(index: usize) -> burn::tensor::Device<Inner> {
        burn::backend::cuda::CudaDevice::new(index)
    }
}

#[cfg(all(feature = "wgpu", not(feature = "cuda")))]
mod chosen {
    /// Inference backend.
    pub(super) type Inner = burn::backend::Wgpu;
    /// Name printed in reports.
    pub(super) const NAME: &str = "wgpu";
    /// Whether f64 matrix products run.
    pub(super) const F64_MATMUL: bool = false;
    /// Why not.
    pub(super) const F64_MATMUL_NOTE: &str = "WGSL has no f64 type";

    /// Discrete GPU `index`.
    pub(super) fn nth_device(index: usize) -> burn::tensor::Device<Inner> {
        burn::backend::wgpu::WgpuDevice::DiscreteGpu(index)
    }
}

#[cfg(all(feature = "flex", not(any(feature = "wgpu", feature = "cuda"))))]
mod chosen {
    /// Inference backend.
    pub(super) type Inner = burn::backend::Flex;
    /// Name printed in reports.
    pub(super) const NAME: &str = "flex";
    /// Whether f64 matrix products run.
    pub(super) const F64_MATMUL: bool = true;
    /// Why not (unused: they run).
    pub(super) const F64_MATMUL_NOTE: &str = "";

    /// The CPU device (one for every index: peers share it).
    pub(super) fn nth_device(_index: usize) -> burn::tensor::Device<Inner> {
        Default::default()
    }
}

#[cfg(not(any(feature = "flex", feature = "wgpu", feature = "cuda")))]
compile_error!("xtask needs one backend feature: flex (default), wgpu, cuda or cuda-fused");

/// Backend for inference and constructed (untrained) models.
pub(crate) type B = chosen::Inner;
/// Backend with autodiff, for dynamic evaluation and training.
pub(crate) type AB = burn::backend::Autodiff<B>;
/// Human-readable backend name.
pub(crate) const BACKEND_NAME: &str = chosen::NAME;
/// Whether the backend multiplies f64 matrices (`logits --f64` refuses to start otherwise).
pub(crate) const F64_MATMUL: bool = chosen::F64_MATMUL;
/// Why the backend has no f64 matrix products.
pub(crate) const F64_MATMUL_NOTE: &str = chosen::F64_MATMUL_NOTE;

/// The default device of the chosen backend.
pub(crate) fn device() -> burn::tensor::Device<B> {
    Default::default()
}

/// `count` devices of the chosen backend for data-parallel training (`cargo xtask eval cgt --devices`).
pub(crate) fn devices(count: usize) -> Vec<burn::tensor::Device<B>> {
    (0..count).map(chosen::nth_device).collect()
}
