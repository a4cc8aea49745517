//! The vectorised f32 `exp` of the vendored burn-flex (vendor/README.md, "burn-flex: a vectorised
//! f32 `exp`"; `burn_flex::ops::exp_f32`) and the ops that use it — `exp`, `sigmoid`, `softmax` on
//! the `flex` backend — against the scalar forms they replace, bit for bit (tolerance 0): the
//! kernel repeats glibc's `expf` operation for operation, so any difference is a bug. On a libm
//! other than x86-64 glibc with FMA, `f32::exp` itself may round differently; these tests state
//! which build they compare with when they fail.

use burn::{
    backend::Flex,
    tensor::{activation, Tensor, TensorData},
};
use burn_flex::ops::exp_f32::{exp_in_place_by, sigmoid_in_place, ExpKernel};

type B = Flex;

/// Inputs that leave glibc's table path or sit on its edges, mixed with ordinary ones so that
/// every chunk of the kernel (64 values) sees both kinds: ±0, ±∞, NaN, the smallest subnormal,
/// ±88 (the table path's bound), the overflow and underflow bounds of `expf` and values past them.
fn edge_values() -> Vec<f32> {
    let edges = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(1),
        -f32::from_bits(1),
        88.0,
        -88.0,
        f32::from_bits(0x42af_ffff),
        -f32::from_bits(0x42af_ffff),
        88.72283,
        88.7229,
        89.0,
        -103.27893,
        -103.5,
        -103.97208,
        -104.0,
        f32::MAX,
        f32::MIN,
        1e-8,
        -1e-8,
    ];
    (0..300)
        .map(|i| {
            if i % 7 == 0 {
                edges[(i / 7) % edges.len()]
            } else {
                (i as f32 * 0.731).sin() * 30.0
            }
        })
        .collect()
}

/// Every `stride`-th f32 bit pattern of magnitude below 88 (the table path), both signs.
fn table_path_values(stride: u32) -> Vec<f32> {
    (0..0x42b0_0000u32)
        .step_by(stride as usize)
        .flat_map(|bits| [f32::from_bits(bits), -f32::from_bits(bits)])
        .collect()
}

/// The first index where `got` and `want` differ in bits (NaN equal to NaN of the same bits).
fn first_mismatch(inputs: &[f32], got: &[f32], want: &[f32]) -> Option<String> {
    got.iter()
        .zip(want)
        .position(|(g, w)| g.to_bits() != w.to_bits())
        .map(|i| {
            format!(
                "x = {:e} (bits {:#010x}): got {:e} ({:#010x}), scalar {:e} ({:#010x}); the kernel \
                 repeats x86-64 glibc's FMA `expf`, which this libm may not be",
                inputs[i],
                inputs[i].to_bits(),
                got[i],
                got[i].to_bits(),
                want[i],
                want[i].to_bits()
            )
        })
}

/// Every kernel this CPU has against `f32::exp`; returns how many ran (the scalar one always does).
#[allow(clippy::print_stderr)] // says which kernels this CPU lacks
fn check_exp(inputs: &[f32]) -> usize {
    let want: Vec<f32> = inputs.iter().map(|x| x.exp()).collect();
    let mut ran = 0;
    for kernel in ExpKernel::ALL {
        let mut got = inputs.to_vec();
        if !exp_in_place_by(kernel, &mut got) {
            eprintln!("{kernel:?}: not on this CPU, not checked");
            continue;
        }
        ran += 1;
        if let Some(message) = first_mismatch(inputs, &got, &want) {
            panic!("the {kernel:?} exp differs from f32::exp at {message}");
        }
    }
    ran
}

/// burn-flex 0.21.0's scalar `sigmoid_f32`, the form the kernel replaces.
fn sigmoid_scalar(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// burn-flex 0.21.0's softmax row: max, `exp(x - max)` summed in order, times `1 / sum`.
fn softmax_row_scalar(row: &[f32]) -> Vec<f32> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = row.iter().map(|x| (x - max).exp()).collect();
    let mut sum = 0.0f32;
    for e in &exps {
        sum += e;
    }
    let inv = 1.0 / sum;
    exps.iter().map(|e| e * inv).collect()
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn tensor_values<const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().expect("f32 data")
}

/// Every 61st bit pattern of the table path (≈ 37 million values, both signs) and the edges, by
/// every kernel this CPU has (the edges' 300 values end in a tail shorter than 16 and than 8,
/// which the vector kernels hand on).
#[test]
fn exp_kernels_equal_f32_exp() {
    assert!(check_exp(&edge_values()) >= 1);
    assert!(check_exp(&table_path_values(61)) >= 1);
}

/// Every bit pattern of the table path (≈ 2.2 billion values, each kernel; about a minute here):
/// `cargo test -p tint-ops --test all flex_exp:: -- --ignored`.
#[test]
#[ignore = "exhaustive, minutes; the sampled test runs every 61st value"]
fn exp_kernels_equal_f32_exp_on_every_table_path_value() {
    for start in 0..16u32 {
        let inputs: Vec<f32> = (start * 0x042b_0000..(start + 1) * 0x042b_0000)
            .flat_map(|bits| [f32::from_bits(bits), -f32::from_bits(bits)])
            .collect();
        check_exp(&inputs);
    }
}

#[test]
fn sigmoid_kernel_equals_the_scalar_sigmoid() {
    let mut inputs = edge_values();
    inputs.extend(table_path_values(997));
    let mut got = inputs.clone();
    sigmoid_in_place(&mut got);
    let want: Vec<f32> = inputs.iter().map(|&x| sigmoid_scalar(x)).collect();
    if let Some(message) = first_mismatch(&inputs, &got, &want) {
        panic!("sigmoid_in_place differs from the scalar sigmoid at {message}");
    }
}

/// The tensor ops through burn's API on the three storage cases of the mend (a fresh contiguous
/// tensor changed in place, a shared one copied first, a strided view), against the scalar forms.
#[test]
fn exp_sigmoid_and_softmax_ops_equal_their_scalar_forms() {
    let device = Default::default();
    let values = edge_values();
    let rows = 12;
    let cols = values.len() / rows;
    let x = Tensor::<B, 2>::from_data(
        TensorData::new(values[..rows * cols].to_vec(), [rows, cols]),
        &device,
    );
    let cases = [
        ("fresh", x.clone() * 1.0),
        ("shared", x.clone()),
        ("transposed", x.clone().transpose()),
        ("column view", x.clone().narrow(1, 3, cols - 5)),
    ];
    for (name, t) in cases {
        let inputs = tensor_values(t.clone());
        let exp = tensor_values(t.clone().exp());
        let want: Vec<f32> = inputs.iter().map(|x| x.exp()).collect();
        assert_eq!(bits(&exp), bits(&want), "exp, {name}");
        let sigmoid = tensor_values(activation::sigmoid(t.clone()));
        let want: Vec<f32> = inputs.iter().map(|&x| sigmoid_scalar(x)).collect();
        assert_eq!(bits(&sigmoid), bits(&want), "sigmoid, {name}");
    }
    // Softmax rows of finite values (a row holding NaN or ∞ is NaN in both forms), wide enough
    // for several kernel chunks and a tail.
    let finite: Vec<f32> = (0..7 * 203)
        .map(|i| (i as f32 * 0.37).sin() * 40.0 - (i % 5) as f32 * 20.0)
        .collect();
    let x = Tensor::<B, 2>::from_data(TensorData::new(finite.clone(), [7, 203]), &device);
    let got = tensor_values(activation::softmax(x, 1));
    let want: Vec<f32> = finite.chunks(203).flat_map(softmax_row_scalar).collect();
    assert_eq!(bits(&got), bits(&want), "softmax");
}
