//! The SwiGLU MLP of a LLaMA block simulated with tint-ops modules (a first piece of the LLaMA
//! simulator, issue #8): forward, first-order backward and descent of
//! `y = (silu(m W_gate) ⊙ m W_up) W_down`, the hidden width cut into `D`-wide chunks.
//!
//! A `d_ff` that is not a multiple of `D` (SmolLM2: 1536 = 2.67 · 576) is zero-padded to
//! `ceil(d_ff / D)` chunks. Padded hidden units stay exactly 0 and never move: `g = u = 0` gives
//! `hidden = 0`, `d_up = d_hidden ⊙ silu(0) = 0`, `d_gate = u ⊙ (…) = 0`, and the `W_down` update
//! `hiddenᵀ delta = 0`. Each chunk costs three prefix blocks (gate, up, down) and three
//! LinearForward / LinearBackwardDescent module calls.
//!
//! Per chunk `k` (token rows; `lin = Ds - D` is the LinearForward memory):
//! forward  `g_k = LF(m; W_gate,k)`, `u_k = LF(m; W_up,k)`, state `[g_k, u_k, …]`,
//!          `h_k = GluForward`, `y_k = LF(h_k; W_down,k)`, `y = Σ_k y_k`;
//! backward `d_h_k = LDB(delta; W_down,k)`, `(d_g_k, d_u_k) = GluBackward`,
//!          `dm = Σ_k LDB(d_g_k; W_gate,k) + LDB(d_u_k; W_up,k)`.
//! Moving `u_k` into `[D, 2D)` and `d_u_k` back into `[0, D)` are plain copies (a constructed TinT
//! linear layer would do them; not counted here). LLaMA has no MLP biases: the descent modules are
//! built with a zero bias step ([`LinearBackwardDescent::with_bias_step_scale`]), so the bias slots
//! stay 0.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use tint_ops::branches::{join, map_in_order};
use tint_ops::glu::{GluBackward, GluForward};
use tint_ops::{
    layout, prefix, DescentUpdate, LinearBackwardDescent, LinearForward, SimContext, TintDims,
    TintOptions,
};

use crate::error::SimError;
use crate::simulator::add_rows;

/// The modules of a simulated SwiGLU MLP (shared by every chunk).
#[derive(Debug)]
pub struct SimulatedSwiGlu<B: Backend> {
    forward_linear: LinearForward<B>,
    glu_forward: GluForward<B>,
    backward_linear: LinearBackwardDescent<B>,
    glu_backward: GluBackward<B>,
    dims: TintDims,
}

/// The prefix blocks of one SwiGLU MLP: per chunk `[batch_size, P, Ds]` for gate, up and down.
#[derive(Debug, Clone)]
pub struct SwiGluPrefixes<B: Backend> {
    /// `W_gate` chunks (`[D, D]` slices of the columns).
    pub gate: Vec<Tensor<B, 3>>,
    /// `W_up` chunks.
    pub up: Vec<Tensor<B, 3>>,
    /// `W_down` chunks (`[D, D]` slices of the rows).
    pub down: Vec<Tensor<B, 3>>,
}

/// Token-row activations stored by the forward pass, per chunk.
#[derive(Debug, Clone)]
pub struct SwiGluActs<B: Backend> {
    gate_in: Vec<Tensor<B, 3>>,
    up_in: Vec<Tensor<B, 3>>,
    glu: Vec<Tensor<B, 3>>,
    down_in: Vec<Tensor<B, 3>>,
}

/// Weights in `[in, out]` layout, `d_ff` padded to whole chunks.
#[derive(Debug, Clone)]
pub struct SwiGluWeights<B: Backend> {
    /// `[batch_size, D, n_chunks · D]`.
    pub w_gate: Tensor<B, 3>,
    /// `[batch_size, D, n_chunks · D]`.
    pub w_up: Tensor<B, 3>,
    /// `[batch_size, n_chunks · D, D]`.
    pub w_down: Tensor<B, 3>,
}

/// Zero-pads the last dimension (`dim = 2`) or the middle one (`dim = 1`) to `width`.
fn pad<B: Backend>(w: Tensor<B, 3>, dim: usize, width: usize) -> Tensor<B, 3> {
    let mut shape = w.dims();
    if shape[dim] == width {
        return w;
    }
    shape[dim] = width - shape[dim];
    let zeros = Tensor::zeros(shape, (&w.device(), w.dtype()));
    Tensor::cat(vec![w, zeros], dim)
}

impl<B: Backend> SimulatedSwiGlu<B> {
    /// Builds the modules for `dims` (the linear modules store their input at `Ds - D`).
    ///
    /// # Errors
    /// [`SimError::Ops`] for invalid options or memory indices.
    pub fn new(
        dims: &TintDims,
        options: &TintOptions,
        device: &B::Device,
    ) -> Result<Self, SimError> {
        let lin = dims.linear_memory_index();
        Ok(Self {
            forward_linear: LinearForward::new(dims, Some(lin), options, device)?,
            glu_forward: GluForward::new(dims, options, device)?,
            backward_linear: LinearBackwardDescent::with_bias_step_scale(
                dims,
                lin,
                DescentUpdate::WeightAndBias,
                0.0,
                options,
                device,
            )?,
            glu_backward: GluBackward::new(dims, options, device)?,
            dims: *dims,
        })
    }

    /// Parameters of (forward, backward) module copies: the gate and up projections share one
    /// LinearForward / LinearBackwardDescent (paper J.3 parameter sharing), the down projection
    /// has its own; every chunk reuses them.
    pub fn num_module_params(&self) -> (usize, usize) {
        use burn::module::Module;
        (
            2 * self.forward_linear.num_params() + self.glu_forward.num_params(),
            2 * self.backward_linear.num_params() + self.glu_backward.num_params(),
        )
    }

    /// Writes `W_gate`, `W_up` (`[batch_size, D, d_ff]`) and `W_down` (`[batch_size, d_ff, D]`),
    /// zero-padded to `ceil(d_ff / D)` chunks, into prefix blocks.
    ///
    /// # Errors
    /// [`SimError::InvalidInput`] for inconsistent shapes; [`SimError::Ops`] from the prefix writer.
    pub fn write_prefixes(
        &self,
        w_gate: Tensor<B, 3>,
        w_up: Tensor<B, 3>,
        w_down: Tensor<B, 3>,
    ) -> Result<SwiGluPrefixes<B>, SimError> {
        let d = self.dims.d_model();
        let [batch_size, d_in, d_ff] = w_gate.dims();
        if d_in != d
            || w_up.dims() != [batch_size, d, d_ff]
            || w_down.dims() != [batch_size, d_ff, d]
        {
            return Err(SimError::InvalidInput(format!(
                "SwiGLU weights {:?}, {:?}, {:?} do not match D = {d}",
                w_gate.dims(),
                w_up.dims(),
                w_down.dims()
            )));
        }
        let n_chunks = d_ff.div_ceil(d);
        let width = n_chunks * d;
        let (w_gate, w_up, w_down) = (
            pad(w_gate, 2, width),
            pad(w_up, 2, width),
            pad(w_down, 1, width),
        );
        let bias = Tensor::zeros([batch_size, d], (&w_gate.device(), w_gate.dtype()));
        // prefix::write_linear takes `[out, in]` weights.
        let block =
            |w: Tensor<B, 3>| prefix::write_linear(w.swap_dims(1, 2), bias.clone(), &self.dims);
        let mut prefixes = SwiGluPrefixes {
            gate: Vec::with_capacity(n_chunks),
            up: Vec::with_capacity(n_chunks),
            down: Vec::with_capacity(n_chunks),
        };
        for k in 0..n_chunks {
            let cols = k * d..(k + 1) * d;
            prefixes.gate.push(block(w_gate.clone().slice([
                0..batch_size,
                0..d,
                cols.clone(),
            ]))?);
            prefixes.up.push(block(w_up.clone().slice([
                0..batch_size,
                0..d,
                cols.clone(),
            ]))?);
            prefixes
                .down
                .push(block(w_down.clone().slice([0..batch_size, cols, 0..d]))?);
        }
        Ok(prefixes)
    }

    /// Reads the (possibly updated) weights back from prefix blocks.
    ///
    /// # Errors
    /// [`SimError::Ops`] for malformed blocks.
    pub fn read_weights(&self, prefixes: &SwiGluPrefixes<B>) -> Result<SwiGluWeights<B>, SimError> {
        let read = |blocks: &[Tensor<B, 3>]| -> Result<Vec<Tensor<B, 3>>, SimError> {
            blocks
                .iter()
                .map(|b| {
                    Ok(prefix::read_linear(b.clone(), &self.dims)?
                        .0
                        .swap_dims(1, 2))
                })
                .collect()
        };
        Ok(SwiGluWeights {
            w_gate: Tensor::cat(read(&prefixes.gate)?, 2),
            w_up: Tensor::cat(read(&prefixes.up)?, 2),
            w_down: Tensor::cat(read(&prefixes.down)?, 1),
        })
    }

    /// Forward: the token signal `m` (dims `[0, D)` of `state`) → `y` in dims `[0, D)` of the
    /// returned state (other dims: those of the first down-projection call), with the stored
    /// activations.
    ///
    /// # Shapes
    /// `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`.
    pub fn forward(
        &self,
        state: Tensor<B, 3>,
        prefixes: &SwiGluPrefixes<B>,
        ctx: &SimContext<B>,
    ) -> (Tensor<B, 3>, SwiGluActs<B>) {
        let (p, d) = (self.dims.n_prefixes(), self.dims.d_model());
        let (lin, glu_mem) = (self.dims.linear_memory_index(), self.dims.d_sim() - 2 * d);
        let [batch_size, n_rows, _] = state.dims();
        let mut acts = SwiGluActs {
            gate_in: vec![],
            up_in: vec![],
            glu: vec![],
            down_in: vec![],
        };
        // The chunks are independent given the state, and so are the gate and up projections of
        // a chunk (parallel tasks on CPU backends, `tint_ops::branches`).
        let device = state.device();
        let chunks = map_in_order::<B, _, _>(&device, prefixes.gate.len(), |k| {
            let (g, u) = join::<B, _, _, _, _>(
                &device,
                || {
                    self.forward_linear.forward(
                        layout::with_prefix_rows(state.clone(), prefixes.gate[k].clone()),
                        ctx,
                    )
                },
                || {
                    self.forward_linear.forward(
                        layout::with_prefix_rows(state.clone(), prefixes.up[k].clone()),
                        ctx,
                    )
                },
            );
            let gate_in = layout::token_memory(g.clone(), p, lin);
            let up_in = layout::token_memory(u.clone(), p, lin);
            let both = g.slice_assign(
                [0..batch_size, p..n_rows, d..2 * d],
                u.narrow(1, p, n_rows - p).narrow(2, 0, d),
            );
            let h = self.glu_forward.forward(both, ctx);
            let glu = layout::token_memory(h.clone(), p, glu_mem);
            let y = self
                .forward_linear
                .forward(layout::with_prefix_rows(h, prefixes.down[k].clone()), ctx);
            let down_in = layout::token_memory(y.clone(), p, lin);
            (gate_in, up_in, glu, down_in, y)
        });
        // Σ_k y_k on dims [0, D) of every row, in chunk order, accumulated contiguously (flex walks
        // column-range views element by element); written into the first call's state once.
        let mut out: Option<(Tensor<B, 3>, Tensor<B, 3>)> = None;
        for (gate_in, up_in, glu, down_in, y) in chunks {
            acts.gate_in.push(gate_in);
            acts.up_in.push(up_in);
            acts.glu.push(glu);
            acts.down_in.push(down_in);
            out = Some(match out {
                None => (y.clone().narrow(2, 0, d), y),
                Some((sum, first)) => (add_rows(sum, y.narrow(2, 0, d)), first),
            });
        }
        let out = match out {
            None => state,
            Some((sum, first)) if prefixes.gate.len() > 1 => {
                first.slice_assign([0..batch_size, 0..n_rows, 0..d], sum)
            }
            Some((_, first)) => first,
        };
        (out, acts)
    }

    /// Backward + descent: from `delta` (dims `[0, D)` of `state`) → `dm` in dims `[0, D)` of the
    /// returned state, and the updated prefix blocks (`W - η Σ_t train_t dyᵀ x` per chunk).
    ///
    /// # Shapes
    /// `state`: `[batch_size, P + T, Ds]` → `[batch_size, P + T, Ds]`.
    pub fn backward(
        &self,
        state: Tensor<B, 3>,
        prefixes: &SwiGluPrefixes<B>,
        acts: &SwiGluActs<B>,
        ctx: &SimContext<B>,
    ) -> (Tensor<B, 3>, SwiGluPrefixes<B>) {
        let (p, d) = (self.dims.n_prefixes(), self.dims.d_model());
        let (lin, glu_mem) = (self.dims.linear_memory_index(), self.dims.d_sim() - 2 * d);
        let [batch_size, n_rows, _] = state.dims();
        let prepare = |s: Tensor<B, 3>, mem: usize, act: &Tensor<B, 3>, block: &Tensor<B, 3>| {
            layout::with_prefix_rows(
                layout::with_token_memory(s, p, mem, act.clone()),
                block.clone(),
            )
        };
        // The chunks are independent given `delta`, and so are the gate and up backward of a
        // chunk (parallel tasks on CPU backends); the input gradients are summed in chunk order.
        let device = state.device();
        let chunks = map_in_order::<B, _, _>(&device, prefixes.gate.len(), |k| {
            let st = self.backward_linear.forward(
                prepare(state.clone(), lin, &acts.down_in[k], &prefixes.down[k]),
                ctx,
            );
            let down_block = layout::prefix_rows(st.clone(), p);
            let st = self.glu_backward.forward(
                layout::with_token_memory(st, p, glu_mem, acts.glu[k].clone()),
                ctx,
            );
            let d_up = st.clone().narrow(1, p, n_rows - p).narrow(2, d, d);
            let up_state = st
                .clone()
                .slice_assign([0..batch_size, p..n_rows, 0..d], d_up);
            let (from_gate, from_up) = join::<B, _, _, _, _>(
                &device,
                || {
                    self.backward_linear
                        .forward(prepare(st, lin, &acts.gate_in[k], &prefixes.gate[k]), ctx)
                },
                || {
                    self.backward_linear
                        .forward(prepare(up_state, lin, &acts.up_in[k], &prefixes.up[k]), ctx)
                },
            );
            let gate_block = layout::prefix_rows(from_gate.clone(), p);
            let up_block = layout::prefix_rows(from_up.clone(), p);
            let chunk = add_rows(from_gate.narrow(2, 0, d), from_up.narrow(2, 0, d));
            (down_block, gate_block, up_block, chunk)
        });
        let mut updated = prefixes.clone();
        let mut dm: Option<Tensor<B, 3>> = None;
        for (k, (down_block, gate_block, up_block, chunk)) in chunks.into_iter().enumerate() {
            updated.down[k] = down_block;
            updated.gate[k] = gate_block;
            updated.up[k] = up_block;
            dm = Some(match dm {
                None => chunk,
                Some(sum) => sum + chunk,
            });
        }
        let dm = dm.unwrap_or_else(|| state.clone().narrow(2, 0, d).zeros_like());
        (
            state.slice_assign([0..batch_size, 0..n_rows, 0..d], dm),
            updated,
        )
    }
}
