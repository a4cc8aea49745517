//! The two H_sim-split linear operations of TINT_SPEC §3.2 (paper D.1).
//!
//! * [`SplitWise`] (`Conv2D(nf, nx)`): split a row into `nf` blocks of `nx`; block `i ↦ M_i · block_i + b_i`
//!   with `M_i` an `nx x nx` matrix; `nf·nx² + nf·nx` parameters.
//! * [`DimWise`] (`Conv2D(nf, nx, transpose=True)`): split a row into `nf` blocks of `nx`; for each
//!   coordinate `c < nx` the vector `(block_0[c], …, block_{nf-1}[c]) ↦ M_c · (…) + b_c` with `M_c` an
//!   `nf x nf` matrix; `nx·nf² + nx·nf` parameters.
//!
//! Matrices are stored out x in (`M · v`). The weights are constructed on the host ([`SplitWiseBuilder`],
//! [`DimWiseBuilder`]); at construction the builder records the structure of the weights (identity,
//! all-zero, block selection, coordinate-independent mixing) and `forward` uses it to skip work:
//! identity and zero blocks become copies, coordinate-independent dimension-wise ops one `[nf, nf]`
//! matmul. [`SplitWise::forward_dense`] / [`DimWise::forward_dense`] always run the batched matmul.

use burn::{
    module::{Module, Param},
    tensor::{backend::Backend, DType, Int, Tensor, TensorData},
};

use crate::host::tensor_from_f64;

/// What one split-wise block does, detected from the constructed weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// `M_i = 0`.
    Zero,
    /// `M_i = I`.
    Identity,
    /// Anything else.
    Dense,
}

/// Host-side builder of a [`SplitWise`] op (identity blocks by default, like the official init).
#[derive(Debug, Clone)]
pub struct SplitWiseBuilder {
    n_blocks: usize,
    block_size: usize,
    weight: Vec<f64>,
}

impl SplitWiseBuilder {
    /// `nf` identity blocks of size `nx`.
    pub fn identity(n_blocks: usize, block_size: usize) -> Self {
        let mut builder = Self::zeros(n_blocks, block_size);
        for block in 0..n_blocks {
            for i in 0..block_size {
                builder.set(block, i, i, 1.0);
            }
        }
        builder
    }

    /// `nf` zero blocks of size `nx`.
    pub fn zeros(n_blocks: usize, block_size: usize) -> Self {
        Self {
            n_blocks,
            block_size,
            weight: vec![0.0; n_blocks * block_size * block_size],
        }
    }

    /// Sets `M_block[out, in]`.
    pub fn set(&mut self, block: usize, out: usize, input: usize, value: f64) {
        let nx = self.block_size;
        self.weight[(block * nx + out) * nx + input] = value;
    }

    /// Sets block `block` to zero.
    pub fn zero_block(&mut self, block: usize) {
        let nx2 = self.block_size * self.block_size;
        self.weight[block * nx2..(block + 1) * nx2].fill(0.0);
    }

    /// Structure of each block.
    fn block_kinds(&self) -> Vec<BlockKind> {
        let nx = self.block_size;
        (0..self.n_blocks)
            .map(|block| {
                let m = &self.weight[block * nx * nx..(block + 1) * nx * nx];
                if m.iter().all(|&v| v == 0.0) {
                    BlockKind::Zero
                } else if (0..nx * nx).all(|k| m[k] == if k / nx == k % nx { 1.0 } else { 0.0 }) {
                    BlockKind::Identity
                } else {
                    BlockKind::Dense
                }
            })
            .collect()
    }

    /// Builds the module (zero biases, as in the whole construction).
    pub fn build<B: Backend>(self, dtype: DType, device: &B::Device) -> SplitWise<B> {
        let kinds = self.block_kinds();
        let (nf, nx) = (self.n_blocks, self.block_size);
        let dense: Vec<i64> = (0..nf)
            .filter(|&i| kinds[i] == BlockKind::Dense)
            .map(|i| i as i64)
            .collect();
        let n_dense = dense.len();
        SplitWise {
            weight: Param::from_tensor(tensor_from_f64(self.weight, [nf, nx, nx], dtype, device)),
            bias: Param::from_tensor(Tensor::zeros([nf, nx], (device, dtype))),
            n_blocks: nf,
            block_size: nx,
            block_kinds: kinds,
            dense_blocks: Tensor::from_data(TensorData::new(dense, [n_dense]), device),
        }
    }
}

/// Split-wise op (`Conv2D(nf, nx)`): `nf` independent `nx x nx` maps.
#[derive(Module, Debug)]
pub struct SplitWise<B: Backend> {
    /// `[nf, nx, nx]`, `weight[i]` = `M_i` (out x in).
    pub weight: Param<Tensor<B, 3>>,
    /// `[nf, nx]` (zero in the construction; not applied by `forward`).
    pub bias: Param<Tensor<B, 2>>,
    /// `nf`.
    pub n_blocks: usize,
    /// `nx`.
    pub block_size: usize,
    /// Structure of each block (detected at construction).
    #[module(skip)]
    pub block_kinds: Vec<BlockKind>,
    /// Indices of the dense blocks.
    pub dense_blocks: Tensor<B, 1, Int>,
}

impl<B: Backend> SplitWise<B> {
    /// Applies the op using the recorded block structure (biases are zero by construction).
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, nf * nx]` → `[batch_size, n_rows, nf * nx]`
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch_size, n_rows, width] = x.dims();
        let (nf, nx) = (self.n_blocks, self.block_size);
        if self.block_kinds.iter().all(|&k| k == BlockKind::Identity) {
            return x;
        }
        if self.block_kinds.iter().all(|&k| k == BlockKind::Zero) {
            return x.zeros_like();
        }
        let rows = batch_size * n_rows;
        let blocks = x.reshape([rows, nf, nx]);
        let n_dense = self.dense_blocks.dims()[0];
        // Dense blocks: one batched matmul over the selected blocks.
        let dense_out = (n_dense > 0).then(|| {
            let weight = self.weight.val().select(0, self.dense_blocks.clone()); // [n_dense, nx, nx]
            blocks
                .clone()
                .select(1, self.dense_blocks.clone())
                .swap_dims(0, 1) // [n_dense, rows, nx]
                .matmul(weight.swap_dims(1, 2))
                .swap_dims(0, 1) // [rows, n_dense, nx]
        });
        let mut parts = Vec::with_capacity(nf);
        let mut dense_seen = 0;
        for (i, kind) in self.block_kinds.iter().enumerate() {
            parts.push(match kind {
                BlockKind::Identity => blocks.clone().narrow(1, i, 1),
                BlockKind::Zero => Tensor::zeros([rows, 1, nx], (&blocks.device(), blocks.dtype())),
                BlockKind::Dense => {
                    dense_seen += 1;
                    dense_out
                        .clone()
                        .expect("dense blocks exist")
                        .narrow(1, dense_seen - 1, 1)
                }
            });
        }
        Tensor::cat(parts, 1).reshape([batch_size, n_rows, width])
    }

    /// Applies the op as one dense batched matmul `[nf, rows, nx] x [nf, nx, nx]` plus bias.
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, nf * nx]` → `[batch_size, n_rows, nf * nx]`
    pub fn forward_dense(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch_size, n_rows, width] = x.dims();
        let (nf, nx) = (self.n_blocks, self.block_size);
        let out = x
            .reshape([batch_size * n_rows, nf, nx])
            .swap_dims(0, 1) // [nf, rows, nx]
            .matmul(self.weight.val().swap_dims(1, 2))
            .swap_dims(0, 1); // [rows, nf, nx]
        (out + self.bias.val().unsqueeze::<3>()).reshape([batch_size, n_rows, width])
    }
}

/// Host-side builder of a [`DimWise`] op (identity per coordinate by default).
#[derive(Debug, Clone)]
pub struct DimWiseBuilder {
    n_blocks: usize,
    block_size: usize,
    weight: Vec<f64>,
}

impl DimWiseBuilder {
    /// Identity `nf x nf` map for each of the `nx` coordinates.
    pub fn identity(n_blocks: usize, block_size: usize) -> Self {
        let mut builder = Self::zeros(n_blocks, block_size);
        for i in 0..n_blocks {
            builder.set_all_coords(i, i, 1.0);
        }
        builder
    }

    /// All-zero maps.
    pub fn zeros(n_blocks: usize, block_size: usize) -> Self {
        Self {
            n_blocks,
            block_size,
            weight: vec![0.0; block_size * n_blocks * n_blocks],
        }
    }

    /// Sets `M_coord[out_block, in_block]`.
    pub fn set(&mut self, coord: usize, out_block: usize, in_block: usize, value: f64) {
        let nf = self.n_blocks;
        self.weight[(coord * nf + out_block) * nf + in_block] = value;
    }

    /// Sets `M_c[out_block, in_block]` for every coordinate `c`.
    pub fn set_all_coords(&mut self, out_block: usize, in_block: usize, value: f64) {
        for coord in 0..self.block_size {
            self.set(coord, out_block, in_block, value);
        }
    }

    /// Builds the module (zero biases).
    pub fn build<B: Backend>(self, dtype: DType, device: &B::Device) -> DimWise<B> {
        let (nf, nx) = (self.n_blocks, self.block_size);
        let first = &self.weight[..nf * nf];
        let shared = (1..nx).all(|c| &self.weight[c * nf * nf..(c + 1) * nf * nf] == first);
        let is_identity =
            shared && (0..nf * nf).all(|k| first[k] == if k / nf == k % nf { 1.0 } else { 0.0 });
        let structure = if is_identity {
            DimStructure::Identity
        } else if shared {
            DimStructure::Shared
        } else {
            DimStructure::PerCoordinate
        };
        DimWise {
            weight: Param::from_tensor(tensor_from_f64(self.weight, [nx, nf, nf], dtype, device)),
            bias: Param::from_tensor(Tensor::zeros([nx, nf], (device, dtype))),
            n_blocks: nf,
            block_size: nx,
            structure,
        }
    }
}

/// Structure of a dimension-wise op, detected at construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DimStructure {
    /// `M_c = I` for all `c`.
    Identity,
    /// `M_c` the same for all `c`: one `[nf, nf]` matmul over the block axis.
    Shared,
    /// General: a batched `[nx, nf, nf]` matmul.
    PerCoordinate,
}

/// Dimension-wise op (`Conv2D(nf, nx, transpose=True)`): per coordinate, an `nf x nf` map across blocks.
#[derive(Module, Debug)]
pub struct DimWise<B: Backend> {
    /// `[nx, nf, nf]`, `weight[c]` = `M_c` (out x in).
    pub weight: Param<Tensor<B, 3>>,
    /// `[nx, nf]` (zero in the construction; not applied by `forward`).
    pub bias: Param<Tensor<B, 2>>,
    /// `nf`.
    pub n_blocks: usize,
    /// `nx`.
    pub block_size: usize,
    /// Structure (detected at construction).
    #[module(skip)]
    pub structure: DimStructure,
}

impl<B: Backend> DimWise<B> {
    /// Applies the op using the recorded structure (biases are zero by construction).
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, nf * nx]` → `[batch_size, n_rows, nf * nx]`
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        match self.structure {
            DimStructure::Identity => x,
            DimStructure::PerCoordinate => self.forward_dense(x),
            DimStructure::Shared => {
                let [batch_size, n_rows, width] = x.dims();
                let (nf, nx) = (self.n_blocks, self.block_size);
                let rows = batch_size * n_rows;
                let mixing = self.weight.val().narrow(0, 0, 1).reshape([nf, nf]);
                let blocks = x
                    .reshape([rows, nf, nx])
                    .swap_dims(0, 1) // [nf, rows, nx]
                    .reshape([nf, rows * nx]);
                mixing
                    .matmul(blocks)
                    .reshape([nf, rows, nx])
                    .swap_dims(0, 1) // [rows, nf, nx]
                    .reshape([batch_size, n_rows, width])
            }
        }
    }

    /// Applies the op as one batched matmul `[nx, rows, nf] x [nx, nf, nf]` plus bias.
    ///
    /// # Shapes
    /// * `x`: `[batch_size, n_rows, nf * nx]` → `[batch_size, n_rows, nf * nx]`
    pub fn forward_dense(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch_size, n_rows, width] = x.dims();
        let (nf, nx) = (self.n_blocks, self.block_size);
        let out = x
            .reshape([batch_size * n_rows, nf, nx])
            .permute([2, 0, 1]) // [nx, rows, nf]
            .matmul(self.weight.val().swap_dims(1, 2))
            + self.bias.val().unsqueeze_dim::<3>(1); // [nx, 1, nf]
        out.permute([1, 2, 0]) // [rows, nf, nx]
            .reshape([batch_size, n_rows, width])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Distribution, Tolerance};

    type TestBackend = burn::backend::Flex;

    /// f32 matmul of O(1) values with a few dozen terms: round-off ~1e-6.
    const TOL: f64 = 1e-5;

    fn random(shape: [usize; 3]) -> Tensor<TestBackend, 3> {
        Tensor::random(shape, Distribution::Normal(0.0, 1.0), &Default::default())
    }

    #[test]
    fn split_wise_matches_per_block_matrices_and_structure_path() {
        let device = Default::default();
        let (nf, nx) = (4, 3);
        let mut builder = SplitWiseBuilder::identity(nf, nx);
        builder.zero_block(1);
        // Block 2: a permutation plus a scale (dense).
        builder.zero_block(2);
        builder.set(2, 0, 2, 2.0);
        builder.set(2, 1, 0, -1.0);
        builder.set(2, 2, 1, 0.5);
        let op: SplitWise<TestBackend> = builder.build(DType::F32, &device);
        assert_eq!(
            op.block_kinds,
            vec![
                BlockKind::Identity,
                BlockKind::Zero,
                BlockKind::Dense,
                BlockKind::Identity
            ]
        );
        assert_eq!(op.num_params(), nf * nx * nx + nf * nx);
        let x = random([2, 5, nf * nx]);
        let fast = op.forward(x.clone());
        let dense = op.forward_dense(x.clone());
        fast.to_data()
            .assert_approx_eq::<f32>(&dense.to_data(), Tolerance::absolute(TOL));
        // Direct: block 2 of the output is (2 x2, -x0, 0.5 x1).
        let xb = x.reshape([10, nf, nx]);
        let ob = fast.reshape([10, nf, nx]);
        let expected = Tensor::cat(
            vec![
                xb.clone().narrow(2, 2, 1) * 2.0,
                xb.clone().narrow(2, 0, 1) * -1.0,
                xb.clone().narrow(2, 1, 1) * 0.5,
            ],
            2,
        );
        ob.clone()
            .narrow(1, 2, 1)
            .to_data()
            .assert_approx_eq::<f32>(
                &expected.narrow(1, 2, 1).to_data(),
                Tolerance::absolute(TOL),
            );
        assert_eq!(ob.narrow(1, 1, 1).abs().max().into_scalar(), 0.0);
    }

    #[test]
    fn dim_wise_matches_per_coordinate_matrices_and_structure_path() {
        let device = Default::default();
        let (nf, nx) = (3, 4);
        // Shared mixing: out0 = in0 + in2, out1 = 0, out2 = -in1.
        let mut shared = DimWiseBuilder::zeros(nf, nx);
        shared.set_all_coords(0, 0, 1.0);
        shared.set_all_coords(0, 2, 1.0);
        shared.set_all_coords(2, 1, -1.0);
        let mut per_coord = shared.clone();
        per_coord.set(3, 1, 1, 5.0);
        let shared: DimWise<TestBackend> = shared.build(DType::F32, &device);
        let per_coord: DimWise<TestBackend> = per_coord.build(DType::F32, &device);
        assert_eq!(shared.structure, DimStructure::Shared);
        assert_eq!(per_coord.structure, DimStructure::PerCoordinate);
        assert_eq!(shared.num_params(), nx * nf * nf + nx * nf);
        let x = random([2, 3, nf * nx]);
        let fast = shared.forward(x.clone());
        fast.to_data().assert_approx_eq::<f32>(
            &shared.forward_dense(x.clone()).to_data(),
            Tolerance::absolute(TOL),
        );
        let xb = x.clone().reshape([6, nf, nx]);
        let expected = Tensor::cat(
            vec![
                xb.clone().narrow(1, 0, 1) + xb.clone().narrow(1, 2, 1),
                xb.clone().narrow(1, 0, 1).zeros_like(),
                -xb.clone().narrow(1, 1, 1),
            ],
            1,
        );
        fast.reshape([6, nf, nx])
            .to_data()
            .assert_approx_eq::<f32>(&expected.to_data(), Tolerance::absolute(TOL));
        // Per-coordinate: block 1, coordinate 3 becomes 5 * x[block 1, coord 3].
        let out = per_coord.forward(x).reshape([6, nf, nx]);
        out.narrow(1, 1, 1)
            .narrow(2, 3, 1)
            .to_data()
            .assert_approx_eq::<f32>(
                &(xb.narrow(1, 1, 1).narrow(2, 3, 1) * 5.0).to_data(),
                Tolerance::absolute(TOL),
            );
    }
}
