//! The parallel halves of a GPT-2 / OPT forward on CPU backends (the attention's two halves of
//! heads, the MLP's two halves of token rows, the block stack on a rayon worker; `tint_branches`)
//! give the values of one op stream to the last bit: a forward in a two-thread pool equals the
//! same forward in a one-thread pool (where every branch runs in order) exactly, for every traced
//! intermediate, on each committed tiny checkpoint (GPT-2, OPT pre-LN, post-LN, with projections),
//! at batch sizes 1 and 2 and an odd sequence length (unequal halves).

use crate::common::*;
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::{load_model, trace::ForwardTrace, AuxModel};

/// Every traced tensor of a forward as host vectors, in a fixed order.
fn flatten(trace: ForwardTrace<TestBackend>) -> Vec<Vec<f32>> {
    let host = |t: Tensor<TestBackend, 3>| t.into_data().to_vec::<f32>().unwrap();
    let mut out = vec![
        host(trace.logits),
        host(trace.final_hidden),
        host(trace.final_normed),
    ];
    for layer in trace.layers {
        out.push(layer.attn_probs.into_data().to_vec::<f32>().unwrap());
        for t in [
            layer.ln1_output,
            layer.attn_context,
            layer.attn_output,
            layer.h_mid,
            layer.ln2_output,
            layer.mlp_pre_activation,
            layer.mlp_activation,
            layer.mlp_output,
            layer.block_output,
        ] {
            out.push(host(t));
        }
    }
    out
}

fn forward_in_pool(
    model: &AuxModel<TestBackend>,
    ids: &[i64],
    batch: usize,
    threads: usize,
) -> Vec<Vec<f32>> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool");
    let device = Default::default();
    let seq = ids.len() / batch;
    pool.install(|| {
        let ids = Tensor::<TestBackend, 2, Int>::from_data(
            TensorData::new(ids.to_vec(), [batch, seq]),
            &device,
        );
        flatten(model.forward_traced(ids).expect("forward"))
    })
}

#[test]
fn two_threads_equal_one_op_stream() {
    let device = Default::default();
    for name in ["gpt2-tiny", "opt-pre-ln", "opt-post-ln", "opt-post-ln-proj"] {
        let model: AuxModel<TestBackend> =
            load_model(&aux_fixture(name), &device).expect("fixture");
        let vocab = model.vocab_size() as i64;
        for (batch, seq) in [(1, 13), (2, 9)] {
            let ids: Vec<i64> = (0..batch * seq)
                .map(|i| (i as i64 * 7 + 3) % vocab)
                .collect();
            let one = forward_in_pool(&model, &ids, batch, 1);
            let two = forward_in_pool(&model, &ids, batch, 2);
            assert_eq!(one.len(), two.len());
            for (i, (a, b)) in one.iter().zip(&two).enumerate() {
                assert_eq!(a.len(), b.len(), "{name} B={batch}: tensor {i}");
                let differing = a
                    .iter()
                    .zip(b)
                    .filter(|(x, y)| x.to_bits() != y.to_bits())
                    .count();
                assert_eq!(
                    differing, 0,
                    "{name} B={batch}: tensor {i} differs in {differing} values"
                );
            }
        }
    }
}
