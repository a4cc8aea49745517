//! Error paths: every rule of docs/construction.md §1.2 reported with its number and the offending values,
//! option validation (`TintOptions::validate` and every constructor that takes options), and the
//! shape errors of [`SimContext`] and the memory-index checks. No error may be a panic.

use burn::{
    backend::Flex,
    tensor::{DType, Tensor},
};
use tint_ops::{
    dims::MAX_POSITION_EMBEDDINGS, ActivationBackward, ActivationForward, AttentionBackprop,
    AttentionVariant, Derivative, DescentUpdate, GateMode, LayerNormBackwardDescent,
    LinearBackward, LinearBackwardDescent, LinearDescent, LinearForward, NormBackward, NormForward,
    NormKind, SelfAttentionBackward, SelfAttentionBackwardDescent, SelfAttentionForward,
    SimContext, TintDims, TintOpsError, TintOptions,
};

type B = Flex;

/// The `name = value` items of an error message (the text after the first `": "`, split on
/// `", "`), so `D = 8` does not match inside `Ds = 8`.
fn message_items(message: &str) -> Vec<String> {
    message
        .split(": ")
        .flat_map(|part| part.split(", "))
        .map(str::to_owned)
        .collect()
}

/// Asserts that the message names the rule (`rule` is a substring) and every `name = value` item.
fn assert_message(err: &TintOpsError, rule: &str, items: &[&str]) {
    let message = err.to_string();
    assert!(
        message.contains(rule),
        "message must name {rule:?}: {message}"
    );
    let found = message_items(&message);
    for item in items {
        assert!(
            found.iter().any(|f| f == item),
            "message must contain the value {item:?}: {message}"
        );
    }
}

fn dims_error(
    d: usize,
    h: usize,
    ds: usize,
    p: usize,
    hs: usize,
    tmax: usize,
    t: usize,
) -> TintOpsError {
    TintDims::new(d, h, ds, p, hs, tmax, t).expect_err("an invalid combination")
}

/// Every §1.2 rule (and `D % H == 0`): the variant with all its values, and a message that names
/// the rule and each value. Each tuple violates exactly the rule under test (the earlier rules hold).
#[test]
fn each_rule_is_reported_with_rule_and_values() {
    // Rule 1: D % P == 0.
    let err = dims_error(10, 2, 40, 4, 4, 8, 8);
    assert_eq!(
        err,
        TintOpsError::ModelNotMultipleOfPrefixes {
            d_model: 10,
            n_prefixes: 4
        }
    );
    assert_message(&err, "rule 1", &["D = 10", "P = 4"]);

    // Rule 2, Ds >= D (S+1): D = 8, P = 4, S = 2 needs Ds >= 24.
    let err = dims_error(8, 2, 20, 4, 5, 8, 8);
    assert_eq!(
        err,
        TintOpsError::SimWidthTooSmallForStacking {
            d_sim: 20,
            n_prefixes: 4,
            d_model: 8,
            stack: 2
        }
    );
    assert_message(&err, "rule 2", &["Ds = 20", "P = 4", "D = 8", "S = 2"]);
    // Rule 2, Ds % P == 0: Ds = 26 >= 24 but 26 % 4 != 0.
    let err = dims_error(8, 2, 26, 4, 2, 8, 8);
    assert_eq!(
        err,
        TintOpsError::SimWidthTooSmallForStacking {
            d_sim: 26,
            n_prefixes: 4,
            d_model: 8,
            stack: 2
        }
    );
    assert_message(&err, "rule 2", &["Ds = 26", "P = 4", "D = 8", "S = 2"]);

    // Rule 3: D = 8, P = 8, S = 1: Ds = 16 passes rule 2, fails Ds >= 4D.
    let err = dims_error(8, 2, 16, 8, 2, 8, 8);
    assert_eq!(
        err,
        TintOpsError::SimWidthTooSmallForMemory {
            d_sim: 16,
            d_model: 8
        }
    );
    assert_message(&err, "rule 3", &["Ds = 16", "D = 8"]);

    // D % H == 0 (the auxiliary heads).
    let err = dims_error(8, 3, 32, 4, 8, 8, 8);
    assert_eq!(
        err,
        TintOpsError::AuxHeadsDoNotDivideModel {
            d_model: 8,
            n_heads_aux: 3
        }
    );
    assert_message(&err, "D % H == 0", &["D = 8", "H = 3"]);

    // Rule 4, each clause on its own.
    for (h, hs, clause) in [
        (2, 3, "Ds % Hs != 0 (32 % 3)"),
        (2, 2, "hd = 16 does not divide D = 8"),
        (1, 8, "npart = D/hd = 2 does not divide H = 1"),
        (8, 4, "H = 8 > Hs = 4 (hd = 8, npart = 1)"),
    ] {
        let err = dims_error(8, h, 32, 4, hs, 8, 8);
        assert_eq!(
            err,
            TintOpsError::HeadLayout {
                d_sim: 32,
                n_heads_sim: hs,
                d_model: 8,
                n_heads_aux: h
            },
            "{clause}"
        );
        let (hs_item, h_item) = (format!("Hs = {hs}"), format!("H = {h}"));
        assert_message(&err, "rule 4", &["Ds = 32", &hs_item, "D = 8", &h_item]);
    }

    // Rule 5 cannot be violated once rules 1–4 hold (see the next test); its message.
    let err = TintOpsError::MemoryAlignment {
        d_sim: 30,
        d_model: 8,
        n_prefixes: 4,
        head_dim_sim: 6,
    };
    assert_message(&err, "rule 5", &["Ds = 30", "D = 8", "P = 4", "hd = 6"]);

    // Rule 6: T <= Tmax.
    let err = dims_error(8, 2, 32, 4, 4, 8, 9);
    assert_eq!(
        err,
        TintOpsError::SequenceTooLong {
            seq_length: 9,
            max_seq_length: 8,
            n_prefixes: 4,
            max_position_embeddings: MAX_POSITION_EMBEDDINGS
        }
    );
    assert_message(&err, "rule 6", &["T = 9", "Tmax = 8", "P = 4"]);
    // Rule 6: P + T <= 2048 (T <= Tmax holds); the boundary P + T = 2048 is valid.
    let err = dims_error(8, 2, 32, 4, 4, 4000, 2045);
    assert_eq!(
        err,
        TintOpsError::SequenceTooLong {
            seq_length: 2045,
            max_seq_length: 4000,
            n_prefixes: 4,
            max_position_embeddings: 2048
        }
    );
    assert_message(&err, "P + T <= 2048", &["T = 2045", "Tmax = 4000", "P = 4"]);
    assert!(TintDims::new(8, 2, 32, 4, 4, 4000, 2044).is_ok());
    // ... and through with_seq_length.
    let dims = TintDims::new(8, 2, 32, 4, 4, 10, 6).unwrap();
    let err = dims.with_seq_length(11).unwrap_err();
    assert_message(&err, "rule 6", &["T = 11", "Tmax = 10", "P = 4"]);
    assert_eq!(
        dims.with_seq_length(0).unwrap_err(),
        TintOpsError::ZeroSize {
            name: "T (seq_length)"
        }
    );
    assert_eq!(dims.with_seq_length(10).unwrap().seq_length(), 10);
}

/// Every size argument: zero is reported by name.
#[test]
fn zero_sizes_are_named() {
    let valid = [8, 2, 32, 4, 4, 8, 8];
    let names = [
        "D (d_model)",
        "H (n_heads_aux)",
        "Ds (d_sim)",
        "P (n_prefixes)",
        "Hs (n_heads_sim)",
        "Tmax (max_seq_length)",
        "T (seq_length)",
    ];
    assert!(TintDims::new(8, 2, 32, 4, 4, 8, 8).is_ok());
    for (i, name) in names.into_iter().enumerate() {
        let mut args = valid;
        args[i] = 0;
        let [d, h, ds, p, hs, tmax, t] = args;
        let err = dims_error(d, h, ds, p, hs, tmax, t);
        assert_eq!(err, TintOpsError::ZeroSize { name });
        assert_eq!(err.to_string(), format!("{name} must be positive (got 0)"));
    }
}

/// Which rule of §1.2 an `(D, H, Ds, P, Hs)` tuple violates first, written from the spec text
/// (independently of `TintDims::new`): 1, 2, 3, "D % H" (as 35), 4, 5, or `None`.
fn first_violation(d: usize, h: usize, ds: usize, p: usize, hs: usize) -> Option<u32> {
    if !d.is_multiple_of(p) {
        return Some(1);
    }
    let s = d / p;
    if !ds.is_multiple_of(p) || ds < d * (s + 1) {
        return Some(2);
    }
    if ds < 4 * d {
        return Some(3);
    }
    if !d.is_multiple_of(h) {
        return Some(35);
    }
    if !ds.is_multiple_of(hs) {
        return Some(4);
    }
    let hd = ds / hs;
    if !d.is_multiple_of(hd) || !h.is_multiple_of(d / hd) || h > hs {
        return Some(4);
    }
    for k in 1..=3 {
        let rest = ds - k * d;
        if !rest.is_multiple_of(p) || !rest.is_multiple_of(hd) {
            return Some(5);
        }
    }
    None
}

fn rule_of(err: &TintOpsError) -> u32 {
    match err {
        TintOpsError::ModelNotMultipleOfPrefixes { .. } => 1,
        TintOpsError::SimWidthTooSmallForStacking { .. } => 2,
        TintOpsError::SimWidthTooSmallForMemory { .. } => 3,
        TintOpsError::AuxHeadsDoNotDivideModel { .. } => 35,
        TintOpsError::HeadLayout { .. } => 4,
        TintOpsError::MemoryAlignment { .. } => 5,
        other => panic!("unexpected error {other}"),
    }
}

/// Exhaustive over a grid of small sizes: `TintDims::new` accepts exactly the tuples that satisfy
/// §1.2 and reports the first violated rule. Rule 5 (memory alignment) is never the first violated
/// rule: as the spec notes, `Ds - kD` is a multiple of `P` (rules 1, 2) and of `hd` (`hd | Ds` by
/// rule 4's `Ds % Hs == 0`, `hd | D` by rule 4), so its error path is unreachable through the
/// public constructor; the grid proves that on every tuple tried.
#[test]
fn validation_accepts_exactly_the_spec_and_rule_5_follows_from_rules_1_to_4() {
    let mut accepted = 0usize;
    let mut per_rule = std::collections::BTreeMap::<u32, usize>::new();
    for d in 1..=16 {
        for p in 1..=8 {
            for ds in 1..=64 {
                for hs in 1..=16 {
                    for h in 1..=8 {
                        let expected = first_violation(d, h, ds, p, hs);
                        assert_ne!(
                            expected,
                            Some(5),
                            "rule 5 violated alone: {d} {h} {ds} {p} {hs}"
                        );
                        match (TintDims::new(d, h, ds, p, hs, 4, 4), expected) {
                            (Ok(_), None) => accepted += 1,
                            (Err(err), Some(rule)) => {
                                assert_eq!(
                                    rule_of(&err),
                                    rule,
                                    "(D, H, Ds, P, Hs) = ({d}, {h}, {ds}, {p}, {hs}): {err}"
                                );
                                *per_rule.entry(rule).or_default() += 1;
                            }
                            (got, expected) => panic!(
                                "(D, H, Ds, P, Hs) = ({d}, {h}, {ds}, {p}, {hs}): got {got:?}, spec says {expected:?}"
                            ),
                        }
                    }
                }
            }
        }
    }
    // The grid is not vacuous: valid tuples and every reachable rule occur.
    assert!(accepted > 100, "only {accepted} valid tuples");
    for rule in [1, 2, 3, 35, 4] {
        assert!(
            per_rule.get(&rule).copied().unwrap_or(0) > 0,
            "rule {rule} never hit"
        );
    }
}

/// `TintOptions::validate`: each invalid option is reported by name, value and reason.
#[test]
fn options_validation_names_each_bad_option() {
    let base = TintOptions::default().with_float_dtype(DType::F64);
    let fd = |scale: f64| Derivative::FiniteDifference { scale };
    let cases: Vec<(TintOptions, &str, f64, &str)> = vec![
        (
            base.with_gate_scale(0.0),
            "gate_scale",
            0.0,
            "must be finite and > 0",
        ),
        (
            base.with_gate_scale(-10.0),
            "gate_scale",
            -10.0,
            "must be finite and > 0",
        ),
        (
            base.with_gate_scale(f64::NAN),
            "gate_scale",
            f64::NAN,
            "must be finite and > 0",
        ),
        (
            base.with_gate_scale(f64::INFINITY),
            "gate_scale",
            f64::INFINITY,
            "must be finite and > 0",
        ),
        (
            base.with_derivative(fd(0.0)),
            "scale_embeddings",
            0.0,
            "must be finite and > 0",
        ),
        (
            base.with_derivative(fd(-1000.0)),
            "scale_embeddings",
            -1000.0,
            "must be finite and > 0",
        ),
        (
            base.with_derivative(fd(f64::NAN)),
            "scale_embeddings",
            f64::NAN,
            "must be finite and > 0",
        ),
        (
            base.with_derivative(fd(f64::INFINITY)),
            "scale_embeddings",
            f64::INFINITY,
            "must be finite and > 0",
        ),
        (
            base.with_ln_epsilon(-1e-5),
            "ln_epsilon",
            -1e-5,
            "must be finite and >= 0",
        ),
        (
            base.with_ln_epsilon(f64::NAN),
            "ln_epsilon",
            f64::NAN,
            "must be finite and >= 0",
        ),
        (
            base.with_ln_epsilon(f64::INFINITY),
            "ln_epsilon",
            f64::INFINITY,
            "must be finite and >= 0",
        ),
        (
            base.with_inner_lr(f64::NAN),
            "inner_lr",
            f64::NAN,
            "must be finite",
        ),
        (
            base.with_inner_lr(f64::INFINITY),
            "inner_lr",
            f64::INFINITY,
            "must be finite",
        ),
        (
            base.with_inner_lr(f64::NEG_INFINITY),
            "inner_lr",
            f64::NEG_INFINITY,
            "must be finite",
        ),
    ];
    for (options, name, value, reason) in cases {
        let err = options.validate().expect_err(name);
        match &err {
            TintOpsError::BadOption {
                name: got_name,
                value: got_value,
                reason: got_reason,
            } => {
                assert_eq!(*got_name, name);
                assert!(
                    got_value == &value || (got_value.is_nan() && value.is_nan()),
                    "{name}: value {got_value} reported, {value} given"
                );
                assert_eq!(*got_reason, reason);
            }
            other => panic!("{name}: expected BadOption, got {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            format!("option {name} = {value} is invalid: {reason}")
        );
    }
    // A non-float dtype is named; the error carries no dtype value (the `value` field is an f64,
    // reported as NaN), so only the option and the reason can be checked.
    for dtype in [DType::I64, DType::U8] {
        let err = base.with_float_dtype(dtype).validate().unwrap_err();
        assert!(
            matches!(
                err,
                TintOpsError::BadOption {
                    name: "float_dtype",
                    reason: "must be a float dtype",
                    ..
                }
            ),
            "{dtype:?}: {err:?}"
        );
        assert!(err.to_string().contains("float_dtype"));
    }
    // The valid edges are accepted.
    for options in [
        TintOptions::default(),
        base,
        base.with_ln_epsilon(0.0),
        base.with_inner_lr(0.0),
        base.with_gate_scale(1e-300),
        base.with_gate_mode(GateMode::Tanh),
        base.with_derivative(Derivative::Exact),
        base.with_derivative(Derivative::Exact)
            .with_ln_epsilon(1e-12),
        base.with_float_dtype(DType::F32),
        base.with_float_dtype(DType::F16),
        base.with_float_dtype(DType::BF16),
    ] {
        assert_eq!(options.validate(), Ok(()), "{options:?}");
    }
}

fn error_of<T>(result: Result<T, TintOpsError>, what: &str) -> TintOpsError {
    match result {
        Ok(_) => panic!("{what}: constructed with invalid arguments"),
        Err(err) => err,
    }
}

/// Every module constructor that takes options rejects invalid ones up front (never a panic or a
/// NaN weight later).
#[test]
fn every_constructor_rejects_bad_options() {
    let dims = TintDims::new(8, 2, 32, 4, 4, 8, 6).unwrap();
    let device = Default::default();
    let base = TintOptions::default().with_float_dtype(DType::F64);
    let bad: [(TintOptions, &str); 4] = [
        (base.with_gate_scale(f64::NAN), "gate_scale"),
        (
            base.with_derivative(Derivative::FiniteDifference { scale: 0.0 }),
            "scale_embeddings",
        ),
        (base.with_ln_epsilon(-1.0), "ln_epsilon"),
        (base.with_inner_lr(f64::INFINITY), "inner_lr"),
    ];
    let mem = dims.linear_memory_index();
    for (options, name) in bad {
        let o = &options;
        let errors = [
            (
                "LinearForward",
                error_of(LinearForward::<B>::new(&dims, Some(mem), o, &device), name),
            ),
            (
                "LinearBackward",
                error_of(LinearBackward::<B>::new(&dims, Some(mem), o, &device), name),
            ),
            (
                "LinearDescent",
                error_of(
                    LinearDescent::<B>::new(&dims, mem, DescentUpdate::WeightAndBias, o, &device),
                    name,
                ),
            ),
            (
                "LinearBackwardDescent",
                error_of(
                    LinearBackwardDescent::<B>::new(
                        &dims,
                        mem,
                        DescentUpdate::WeightAndBias,
                        o,
                        &device,
                    ),
                    name,
                ),
            ),
            (
                "LayerNormForward",
                error_of(
                    NormForward::<B>::new(NormKind::Layer, &dims, o, &device),
                    name,
                ),
            ),
            (
                "LayerNormBackward",
                error_of(
                    NormBackward::<B>::new(NormKind::Layer, &dims, o, &device),
                    name,
                ),
            ),
            (
                "LayerNormBackwardDescent",
                error_of(LayerNormBackwardDescent::<B>::new(&dims, o, &device), name),
            ),
            (
                "ActivationForward",
                error_of(ActivationForward::<B>::new(&dims, o, &device), name),
            ),
            (
                "ActivationBackward",
                error_of(ActivationBackward::<B>::new(&dims, o, &device), name),
            ),
            (
                "SelfAttentionForward",
                error_of(
                    SelfAttentionForward::<B>::new(
                        &dims,
                        &AttentionVariant::multi_head(dims.n_heads_aux()),
                        o,
                        &device,
                    ),
                    name,
                ),
            ),
            (
                "SelfAttentionBackward",
                error_of(
                    SelfAttentionBackward::<B>::new(
                        &dims,
                        &AttentionVariant::multi_head(dims.n_heads_aux()),
                        o,
                        &device,
                    ),
                    name,
                ),
            ),
            (
                "SelfAttentionBackwardDescent",
                error_of(
                    SelfAttentionBackwardDescent::<B>::new(
                        &dims,
                        &AttentionVariant::multi_head(dims.n_heads_aux()),
                        AttentionBackprop::Skip,
                        o,
                        &device,
                    ),
                    name,
                ),
            ),
        ];
        for (module, err) in errors {
            assert!(
                matches!(err, TintOpsError::BadOption { name: n, .. } if n == name),
                "{module}: expected BadOption {name}, got {err:?}"
            );
        }
    }
    // The same constructors accept the valid options (so the errors above are about the options).
    assert!(LinearForward::<B>::new(&dims, Some(mem), &base, &device).is_ok());
    assert!(NormBackward::<B>::new(NormKind::Layer, &dims, &base, &device).is_ok());
    assert!(SelfAttentionBackwardDescent::<B>::new(
        &dims,
        &AttentionVariant::multi_head(dims.n_heads_aux()),
        AttentionBackprop::Skip,
        &base,
        &device
    )
    .is_ok());
}

/// Memory indices that do not fit in `Ds` or are not aligned to the head size (`P` for the linear
/// modules) are errors naming the index, the width, `Ds` and the head size.
#[test]
fn bad_memory_indices_are_reported_with_values() {
    let dims = TintDims::new(8, 2, 32, 4, 4, 8, 6).unwrap(); // D = 8, P = 4, Ds = 32
    let device = Default::default();
    let options = TintOptions::default().with_float_dtype(DType::F64);
    for (mem, why) in [
        (1, "not a multiple of P = 4"),
        (28, "28 + D = 36 > Ds = 32"),
    ] {
        let err = error_of(
            LinearForward::<B>::new(&dims, Some(mem), &options, &device),
            why,
        );
        assert_eq!(
            err,
            TintOpsError::BadMemoryIndex {
                memory_index: mem,
                width: 8,
                d_sim: 32,
                head_size: 4
            },
            "{why}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "memory index {mem} (width 8) does not fit in Ds = 32 or is not a multiple of the head size 4"
            )
        );
        let err = error_of(
            LinearDescent::<B>::new(&dims, mem, DescentUpdate::WeightAndBias, &options, &device),
            why,
        );
        assert!(
            matches!(err, TintOpsError::BadMemoryIndex { memory_index, d_sim: 32, head_size: 4, .. } if memory_index == mem),
            "{why}: {err:?}"
        );
    }
    // The valid memory indices of §2.4 are accepted.
    for mem in [
        dims.linear_memory_index(),
        dims.ln_memory_index(),
        dims.attn_memory_index(),
    ] {
        assert!(
            LinearForward::<B>::new(&dims, Some(mem), &options, &device).is_ok(),
            "{mem}"
        );
    }
}

fn zeros<const D: usize>(shape: [usize; D]) -> Tensor<B, D> {
    Tensor::zeros(shape, (&Default::default(), DType::F64))
}

fn assert_shape(err: TintOpsError, what: &'static str, expected: &[usize], actual: &[usize]) {
    let message = err.to_string();
    assert_eq!(
        err,
        TintOpsError::Shape {
            what,
            expected: expected.to_vec(),
            actual: actual.to_vec()
        }
    );
    assert_eq!(
        message,
        format!("{what}: expected shape {expected:?}, got {actual:?}")
    );
}

/// [`SimContext`]: a training mask, an ICL mask or a state of the wrong shape is a `Shape` error
/// naming the argument and both shapes.
#[test]
fn sim_context_shape_errors() {
    let dims = TintDims::new(8, 2, 32, 4, 4, 8, 6).unwrap(); // P = 4, T = 6, Ds = 32
    let device = Default::default();
    let err = SimContext::<B>::new(&dims, zeros([2, 7]), &device).unwrap_err();
    assert_shape(err, "train_mask", &[2, 6], &[2, 7]);
    let err = SimContext::<B>::new(&dims, zeros([2, 5]), &device).unwrap_err();
    assert_shape(err, "train_mask", &[2, 6], &[2, 5]);

    let ctx = SimContext::<B>::new(&dims, zeros([2, 6]), &device).unwrap();
    assert_eq!(ctx.n_rows(), 10);
    for bad in [[2, 6, 7], [2, 5, 6], [3, 6, 6], [1, 6, 6]] {
        let err = ctx.clone().with_icl_mask(zeros(bad)).unwrap_err();
        assert_shape(err, "icl_mask", &[2, 6, 6], &bad);
    }
    assert!(ctx.clone().with_icl_mask(zeros([2, 6, 6])).is_ok());

    for bad in [[2, 9, 32], [2, 10, 31], [3, 10, 32], [2, 6, 32]] {
        let err = ctx.check_state(&zeros(bad), 32).unwrap_err();
        assert_shape(err, "state", &[2, 10, 32], &bad);
    }
    assert_eq!(ctx.check_state(&zeros([2, 10, 32]), 32), Ok(()));
}
