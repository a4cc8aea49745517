//! Row layout (§2.1), one-hot positions (§2.2) and memory regions (§2.4) of a TinT state, plus the
//! state surgery the simulator does between modules (overwrite prefix rows / token memory).

use burn::tensor::{backend::Backend, Tensor};

/// One-hot index of each of the `P + T` rows: prefix row `p` → `Tmax + p`, token row `P + t` → `t`.
pub fn position_indices(n_prefixes: usize, seq_length: usize, max_seq_length: usize) -> Vec<usize> {
    (0..n_prefixes)
        .map(|p| max_seq_length + p)
        .chain(0..seq_length)
        .collect()
}

/// The prefix rows of a state.
///
/// # Shapes
/// * `state`: `[batch_size, P + T, d_sim]` → `[batch_size, P, d_sim]`
pub fn prefix_rows<B: Backend>(state: Tensor<B, 3>, n_prefixes: usize) -> Tensor<B, 3> {
    state.narrow(1, 0, n_prefixes)
}

/// The token rows of a state.
///
/// # Shapes
/// * `state`: `[batch_size, P + T, d_sim]` → `[batch_size, T, d_sim]`
pub fn token_rows<B: Backend>(state: Tensor<B, 3>, n_prefixes: usize) -> Tensor<B, 3> {
    let [_, n_rows, _] = state.dims();
    state.narrow(1, n_prefixes, n_rows - n_prefixes)
}

/// Replaces the prefix rows of a state (before every module, §4).
///
/// # Shapes
/// * `state`: `[batch_size, P + T, d_sim]`, `prefix`: `[batch_size, P, d_sim]` → `[batch_size, P + T, d_sim]`
pub fn with_prefix_rows<B: Backend>(state: Tensor<B, 3>, prefix: Tensor<B, 3>) -> Tensor<B, 3> {
    let [_, n_prefixes, _] = prefix.dims();
    Tensor::cat(vec![prefix, token_rows(state, n_prefixes)], 1)
}

/// Joins prefix rows and token rows into a state.
///
/// # Shapes
/// * `prefix`: `[batch_size, P, d_sim]`, `tokens`: `[batch_size, T, d_sim]` → `[batch_size, P + T, d_sim]`
pub fn join_rows<B: Backend>(prefix: Tensor<B, 3>, tokens: Tensor<B, 3>) -> Tensor<B, 3> {
    Tensor::cat(vec![prefix, tokens], 1)
}

/// Token-row dims `[memory_index, d_sim)` (a stored activation, §5.2).
///
/// # Shapes
/// * `state`: `[batch_size, P + T, d_sim]` → `[batch_size, T, d_sim - memory_index]`
pub fn token_memory<B: Backend>(
    state: Tensor<B, 3>,
    n_prefixes: usize,
    memory_index: usize,
) -> Tensor<B, 3> {
    let [_, _, d_sim] = state.dims();
    token_rows(state, n_prefixes).narrow(2, memory_index, d_sim - memory_index)
}

/// Overwrites token-row dims `[memory_index, d_sim)` with a stored activation (before every
/// backward module, §8); prefix rows are untouched.
///
/// # Shapes
/// * `state`: `[batch_size, P + T, d_sim]`, `stored`: `[batch_size, T, d_sim - memory_index]`
///   → `[batch_size, P + T, d_sim]`
pub fn with_token_memory<B: Backend>(
    state: Tensor<B, 3>,
    n_prefixes: usize,
    memory_index: usize,
    stored: Tensor<B, 3>,
) -> Tensor<B, 3> {
    let [batch_size, n_rows, d_sim] = state.dims();
    state.slice_assign(
        [0..batch_size, n_prefixes..n_rows, memory_index..d_sim],
        stored,
    )
}

/// Whether `B` copies a strided batched view faster one batch entry at a time. On flex a 3-d strided
/// view (e.g. a column range of a row range of a batched state) is copied element by element and a
/// 2-d one with a tiled copy, so per-entry copies pay; on a GPU backend each entry is a kernel launch
/// of its own (the structured step grew linearly with the batch on cuda: docs/performance.md), so one
/// batched copy is the cheaper. Decided by the backend's name (`flex`, `autodiff<flex>`).
pub fn per_entry_copies<B: Backend>(device: &B::Device) -> bool {
    B::name(device).contains("flex")
}

/// A contiguous copy of a (possibly strided) view, or the tensor itself when it already is one:
/// per batch entry a 2-d copy on flex, one batched copy elsewhere ([`per_entry_copies`]).
///
/// # Shapes
/// * `x`: `[batch_size, rows, width]` → same
pub fn contiguous<B: Backend>(x: Tensor<B, 3>) -> Tensor<B, 3> {
    let per_entry = per_entry_copies::<B>(&x.device());
    contiguous_with(x, per_entry)
}

/// [`contiguous`] with the copy strategy given: entry by entry (`per_entry`) or batched. Both give
/// the same values.
///
/// # Shapes
/// * `x`: `[batch_size, rows, width]` → same
pub fn contiguous_with<B: Backend>(x: Tensor<B, 3>, per_entry: bool) -> Tensor<B, 3> {
    let [batch_size, rows, width] = x.dims();
    if batch_size == 1 {
        return x.reshape([rows, width]).reshape([1, rows, width]);
    }
    if !per_entry {
        return x
            .reshape([batch_size * rows, width])
            .reshape([batch_size, rows, width]);
    }
    let parts: Vec<Tensor<B, 3>> = (0..batch_size)
        .map(|b| {
            x.clone()
                .narrow(0, b, 1)
                .reshape([rows, width])
                .reshape([1, rows, width])
        })
        .collect();
    Tensor::cat(parts, 0)
}

/// `row` repeated over `rows` rows, materialised (a same-shape operand keeps flex's elementwise ops
/// on their fast contiguous path; a broadcast one is walked element by element).
///
/// # Shapes
/// * `row`: `[batch_size, 1, width]` → `[batch_size, rows, width]`
pub fn repeat_rows<B: Backend>(row: Tensor<B, 3>, rows: usize) -> Tensor<B, 3> {
    let [batch_size, _, width] = row.dims();
    contiguous(row.expand([batch_size, rows, width]))
}

/// `column` repeated over `width` columns, materialised (see [`repeat_rows`]).
///
/// # Shapes
/// * `column`: `[batch_size, rows, 1]` → `[batch_size, rows, width]`
pub fn repeat_columns<B: Backend>(column: Tensor<B, 3>, width: usize) -> Tensor<B, 3> {
    let [batch_size, rows, _] = column.dims();
    contiguous(column.expand([batch_size, rows, width]))
}

/// Concatenates `parts` along dim 2, `(Some(t), _)` = `t`, `(None, width)` = a zero block of that
/// width (empty blocks are skipped); at least one part must be a tensor.
///
/// # Shapes
/// * tensors: `[batch_size, rows, *]` → `[batch_size, rows, Σ widths]`
pub fn cat_columns<B: Backend>(parts: Vec<(Option<Tensor<B, 3>>, usize)>) -> Tensor<B, 3> {
    let like = parts
        .iter()
        .find_map(|(t, _)| t.clone())
        .expect("cat_columns needs one tensor");
    let [batch_size, rows, _] = like.dims();
    let (device, dtype) = (like.device(), like.dtype());
    let tensors: Vec<Tensor<B, 3>> = parts
        .into_iter()
        .filter(|(t, width)| t.is_some() || *width > 0)
        .map(|(t, width)| {
            t.unwrap_or_else(|| Tensor::zeros([batch_size, rows, width], (&device, dtype)))
        })
        .collect();
    if tensors.len() == 1 {
        return tensors.into_iter().next().expect("one part");
    }
    Tensor::cat(tensors, 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::tensor::{Distribution, Tensor};

    /// Both copy strategies return the viewed values exactly (copies: no arithmetic, tolerance 0).
    #[test]
    fn contiguous_copies_agree_with_the_view() {
        let device = Default::default();
        let state = Tensor::<Flex, 3>::random([3, 9, 11], Distribution::Default, &device);
        let view = state.narrow(1, 2, 5).narrow(2, 3, 6);
        let expected = view.clone().into_data();
        for per_entry in [true, false] {
            let copy = contiguous_with(view.clone(), per_entry);
            assert_eq!(copy.dims(), [3, 5, 6]);
            assert_eq!(copy.into_data(), expected, "per_entry = {per_entry}");
        }
        assert!(per_entry_copies::<Flex>(&device));
    }
}
