//! One `Di / D` chunk of the simulated MLP forward (`c_fc` → activation → `c_proj`, §6.8) in the
//! structured execution, at the signal's width.
//!
//! Module by module ([`LinearForward::forward_rows`], [`ActivationForward::forward_rows_zero_padded`])
//! each of the three outputs is a `Ds`-wide token row `[signal, 0 …, memory, 0 …]` that the next
//! module only reads the signal columns `[0, D)` of, and the simulator keeps only the memory columns
//! of (the stored activations, §5.2). [`structured_chunk_rows`] computes the same values without
//! building the first two rows: the two `Ds`-wide copies with their zero blocks were a large part of
//! a structured step's copying (issue 65). The chunk's output row and the stored activations are the
//! module-by-module values exactly (the same products, the same activation of the same numbers;
//! `tests` below compare them bit for bit).

use burn::tensor::{backend::Backend, Tensor};

use crate::activation::{activate, ActivationForward};
use crate::layout::cat_columns;
use crate::linear::{column_view, LinearForward};

/// A chunk's output token rows and, when kept, the memory columns `[mem, Ds)` of its three module
/// outputs (the stored `u`, `v`, `y` of the simulator's `LayerActs`).
pub struct ChunkRows<B: Backend> {
    /// `c_proj`'s token rows, `[batch_size, T, Ds]`.
    pub output: Tensor<B, 3>,
    /// The memory columns of the `c_fc`, activation and `c_proj` outputs, each
    /// `[batch_size, T, Ds - mem]`; `None` when not kept.
    pub stored: Option<[Tensor<B, 3>; 3]>,
}

/// The chunk `c_fc` → activation → `c_proj` on the token rows `m` (`[batch_size, T, Ds]`, signal in
/// `[0, D)`), when all three modules take their structured row forms with one memory index `mem ≥ D`
/// (the constructed layout); `None` otherwise (the caller runs the modules one by one).
///
/// # Shapes
/// * `prefixes`: the three modules' prefix blocks, each `[batch_size, P, Ds]` (the activation's is
///   not read: its structured form reads no prefix block); `m`:
///   `[batch_size, T, Ds]` → output `[batch_size, T, Ds]`, stored `[batch_size, T, Ds - mem]` each
pub fn structured_chunk_rows<B: Backend>(
    fc: &LinearForward<B>,
    activation: &ActivationForward<B>,
    proj: &LinearForward<B>,
    prefixes: [&Tensor<B, 3>; 3],
    m: &Tensor<B, 3>,
    keep: bool,
) -> Option<ChunkRows<B>> {
    let (d, mem) = (activation.d_model, activation.memory_index);
    let linear_ready = |linear: &LinearForward<B>| {
        linear.is_structured()
            && linear.gates.is_selection()
            && linear.memory_index == Some(mem)
            && linear.d_model == d
    };
    if !(linear_ready(fc) && linear_ready(proj) && activation.is_structured() && mem >= d) {
        return None;
    }
    let ds = m.dims()[2];
    // `c_fc`: `u = [W x + b, 0, x, 0]`; the activation reads `u`'s signal, stores its `x`.
    let x = column_view(m, 0, d);
    let u_signal = fc.structured_product(prefixes[0], x.clone());
    // Activation: `v = [act(u_signal), 0, u_signal, 0]`; `c_proj` reads `act(u_signal)`.
    let v_signal = activate(activation.activation, u_signal.clone());
    // `c_proj`: `y = [W v_signal + b, 0, v_signal, 0]`, built as the module builds it.
    let output = proj.structured_rows_of(prefixes[2], v_signal.clone(), ds);
    let stored = keep.then(|| {
        let memory =
            |signal: Tensor<B, 3>| cat_columns(vec![(Some(signal), d), (None, ds - mem - d)]);
        [memory(x), memory(u_signal), memory(v_signal)]
    });
    Some(ChunkRows { output, stored })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{ActivationKind, Execution};
    use crate::testing::{context, options_in, random, test_dims, TestBackend};
    use burn::tensor::DType;

    fn bits(t: Tensor<TestBackend, 3>) -> Vec<u32> {
        t.into_data()
            .to_vec::<f32>()
            .expect("f32")
            .iter()
            .map(|v| v.to_bits())
            .collect()
    }

    /// f32, exact: the chunk at the signal's width against the three modules' row forms one by
    /// one (`c_fc`'s `forward_rows`, the activation's `forward_rows_zero_padded`, `c_proj`'s
    /// `forward_rows`) and the memory columns the simulator stores, every shape of `test_dims`,
    /// both activations, batch 1 (flex's shared-row bias add) and 2; the constructed execution
    /// gets `None`.
    #[test]
    fn chunk_rows_equal_the_modules_one_by_one_bit_for_bit() {
        let device = Default::default();
        for kind in [ActivationKind::GeluNew, ActivationKind::Relu] {
            for dims in test_dims() {
                for batch_size in [1, 2] {
                    let ctx = context(&dims, batch_size);
                    let (p, t, ds) = (dims.n_prefixes(), dims.seq_length(), dims.d_sim());
                    let mem = dims.linear_memory_index();
                    let options = options_in(DType::F32)
                        .with_activation(kind)
                        .with_execution(Execution::Structured);
                    let fc = LinearForward::<TestBackend>::new(&dims, Some(mem), &options, &device)
                        .unwrap();
                    let activation =
                        ActivationForward::<TestBackend>::new(&dims, &options, &device).unwrap();
                    let proj =
                        LinearForward::<TestBackend>::new(&dims, Some(mem), &options, &device)
                            .unwrap();
                    let prefixes: Vec<Tensor<TestBackend, 3>> = (0..3)
                        .map(|_| random([batch_size, p, ds], 0.5).cast(DType::F32))
                        .collect();
                    let m = random([batch_size, t, ds], 1.0).cast(DType::F32);
                    let u = fc.forward_rows(prefixes[0].clone(), m.clone(), &ctx);
                    let v =
                        activation.forward_rows_zero_padded(prefixes[1].clone(), u.clone(), &ctx);
                    let y = proj.forward_rows(prefixes[2].clone(), v.clone(), &ctx);
                    let chunk_of = |fc: &LinearForward<TestBackend>, keep: bool| {
                        let blocks = [&prefixes[0], &prefixes[1], &prefixes[2]];
                        structured_chunk_rows(fc, &activation, &proj, blocks, &m, keep)
                    };
                    let chunk = chunk_of(&fc, true).expect("structured modules");
                    let case = format!("{kind:?}, Ds {ds}, B {batch_size}");
                    assert_eq!(bits(chunk.output), bits(y.clone()), "output, {case}");
                    let stored = chunk.stored.expect("kept");
                    for (name, got, module_output) in [
                        ("u", stored[0].clone(), u),
                        ("v", stored[1].clone(), v),
                        ("y", stored[2].clone(), y),
                    ] {
                        let want = module_output.narrow(2, mem, ds - mem);
                        assert_eq!(bits(got), bits(want), "stored {name}, {case}");
                    }
                    let constructed = options.with_execution(Execution::Constructed);
                    let fc =
                        LinearForward::<TestBackend>::new(&dims, Some(mem), &constructed, &device)
                            .unwrap();
                    assert!(chunk_of(&fc, false).is_none(), "a constructed c_fc, {case}");
                }
            }
        }
    }
}
