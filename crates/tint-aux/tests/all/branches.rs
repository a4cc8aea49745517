//! The parallel halves of an auxiliary forward on CPU backends (the attention's two halves of
//! heads, in every family; for GPT-2 / OPT also the MLP's two halves of token rows and the block
//! stack on a rayon worker; `tint_branches`) give the values of one op stream to the last bit: a
//! forward in a two-thread pool equals the same forward in a one-thread pool (where every branch
//! runs in order) exactly, for every traced intermediate, on each committed tiny checkpoint
//! (GPT-2, OPT pre-LN, post-LN, with projections, LLaMA with grouped queries, untied and tied), at
//! batch sizes 1 and 2 and an odd sequence length (unequal halves); and so does the LLaMA forward
//! that reuses a prefix's keys and values.

use std::path::PathBuf;

use crate::common::*;
use crate::llama_tiny::llama_fixture;
use burn::tensor::{Int, Tensor, TensorData};
use tint_aux::{load_model, trace::ForwardTrace, AuxModel, PrefixCache};

/// The committed tiny checkpoints of every family.
fn checkpoints() -> Vec<(&'static str, PathBuf)> {
    let mut out: Vec<(&'static str, PathBuf)> =
        ["gpt2-tiny", "opt-pre-ln", "opt-post-ln", "opt-post-ln-proj"]
            .into_iter()
            .map(|name| (name, aux_fixture(name)))
            .collect();
    out.extend(["tiny", "tiny_tied"].map(|name| (name, llama_fixture(name))));
    out
}

/// Bits of `a` and `b` that differ, per tensor; panics naming the first tensor that differs.
fn assert_same_bits(what: &str, one: &[Vec<f32>], two: &[Vec<f32>]) {
    assert_eq!(one.len(), two.len(), "{what}");
    for (i, (a, b)) in one.iter().zip(two).enumerate() {
        assert_eq!(a.len(), b.len(), "{what}: tensor {i}");
        let differing = a
            .iter()
            .zip(b)
            .filter(|(x, y)| x.to_bits() != y.to_bits())
            .count();
        assert_eq!(
            differing, 0,
            "{what}: tensor {i} differs in {differing} values"
        );
    }
}

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

/// `f()` in a rayon pool of `threads` threads.
fn in_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool")
        .install(f)
}

fn forward_in_pool(
    model: &AuxModel<TestBackend>,
    ids: &[i64],
    batch: usize,
    threads: usize,
) -> Vec<Vec<f32>> {
    let device = Default::default();
    let seq = ids.len() / batch;
    in_pool(threads, || {
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
    for (name, path) in checkpoints() {
        let model: AuxModel<TestBackend> = load_model(&path, &device).expect("fixture");
        let vocab = model.vocab_size() as i64;
        for (batch, seq) in [(1, 13), (2, 9)] {
            let ids: Vec<i64> = (0..batch * seq)
                .map(|i| (i as i64 * 7 + 3) % vocab)
                .collect();
            let one = forward_in_pool(&model, &ids, batch, 1);
            let two = forward_in_pool(&model, &ids, batch, 2);
            assert_same_bits(&format!("{name} B={batch}"), &one, &two);
        }
    }
}

/// The last-position logits of `second` after `first` was scored (the prefix they share reused
/// from the cache: attention of new positions over cached keys), in a pool of `threads`.
fn cached_logits_in_pool(
    model: &AuxModel<TestBackend>,
    first: &[u32],
    second: &[u32],
    threads: usize,
) -> Vec<Vec<f32>> {
    in_pool(threads, || {
        let mut cache = PrefixCache::default();
        [first, second]
            .iter()
            .map(|ids| {
                let logits = model
                    .last_position_logits_reusing(ids, &mut cache)
                    .expect("forward");
                logits.into_data().to_vec::<f32>().unwrap()
            })
            .collect()
    })
}

#[test]
fn the_cached_llama_forward_in_two_threads_equals_one_op_stream() {
    let device = Default::default();
    for name in ["tiny", "tiny_tied"] {
        let model: AuxModel<TestBackend> =
            load_model(&llama_fixture(name), &device).expect("fixture");
        let vocab = model.vocab_size() as u32;
        let prefix: Vec<u32> = (0..11).map(|i| (i * 7 + 3) % vocab).collect();
        let first: Vec<u32> = prefix.iter().copied().chain([5, 9]).collect();
        let second: Vec<u32> = prefix.iter().copied().chain([2, 8, 4]).collect();
        let one = cached_logits_in_pool(&model, &first, &second, 1);
        let two = cached_logits_in_pool(&model, &first, &second, 2);
        assert_same_bits(&format!("{name} (cached)"), &one, &two);
    }
}
