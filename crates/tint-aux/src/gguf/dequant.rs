//! Dequantisation of ggml tensor data to `f32`.
//!
//! Block layouts follow llama.cpp's `ggml-quants.c` (`dequantize_row_q8_0`, `_q4_0`, `_q4_1`): each block of
//! 32 elements starts with an f16 scale `d` (and, for Q4_1, an f16 minimum `m`), followed by the quants.
//! In the 4-bit formats byte `j` holds element `j` in its low nibble and element `j + 16` in its high nibble.

use half::{bf16, f16};
use rayon::prelude::*;

use super::{GgmlType, GgufError};

/// Elements per block of the 32-element formats.
pub const QK: usize = 32;

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// Dequantises one Q8_0 block (34 bytes: f16 `d`, 32 × i8 `q`): `w = d·q`.
pub fn dequantize_q8_0_block(block: &[u8; 34]) -> [f32; QK] {
    let d = f16_at(block, 0);
    std::array::from_fn(|i| d * f32::from(block[2 + i] as i8))
}

/// Dequantises one Q4_0 block (18 bytes: f16 `d`, 16 bytes of nibbles): `w = d·(q − 8)`.
pub fn dequantize_q4_0_block(block: &[u8; 18]) -> [f32; QK] {
    let d = f16_at(block, 0);
    let quants = &block[2..];
    std::array::from_fn(|i| {
        let byte = quants[i % 16];
        let q = if i < 16 { byte & 0x0f } else { byte >> 4 };
        d * (f32::from(q) - 8.0)
    })
}

/// Dequantises one Q4_1 block (20 bytes: f16 `d`, f16 `m`, 16 bytes of nibbles): `w = d·q + m`.
pub fn dequantize_q4_1_block(block: &[u8; 20]) -> [f32; QK] {
    let d = f16_at(block, 0);
    let m = f16_at(block, 2);
    let quants = &block[4..];
    std::array::from_fn(|i| {
        let byte = quants[i % 16];
        let q = if i < 16 { byte & 0x0f } else { byte >> 4 };
        d * f32::from(q) + m
    })
}

/// Decodes whole blocks into `out` (empty on entry), in parallel over blocks with rayon: blocks
/// are independent, and the SmolLM2 GGUF holds ~4M of them (the result is the same bit for bit).
fn dequantize_blocks<const N: usize>(
    bytes: &[u8],
    out: &mut Vec<f32>,
    block_fn: fn(&[u8; N]) -> [f32; QK],
) {
    out.resize(bytes.len() / N * QK, 0.0);
    out.par_chunks_mut(QK)
        .zip(bytes.par_chunks_exact(N))
        .for_each(|(values, chunk)| {
            let block: &[u8; N] = chunk.try_into().expect("chunks_exact yields N bytes");
            values.copy_from_slice(&block_fn(block));
        });
}

/// Dequantises `n_elements` values of type `ty` from `bytes` (exactly the tensor's data).
///
/// `tensor` names the tensor for error messages.
///
/// # Errors
/// [`GgufError::UnsupportedTensorType`] for types other than F32, F16, BF16, Q8_0, Q4_0, Q4_1;
/// [`GgufError::BadTensorShape`] when `n_elements` is not a whole number of blocks or `bytes` has the wrong length.
pub fn dequantize(
    ty: GgmlType,
    bytes: &[u8],
    n_elements: usize,
    tensor: &str,
) -> Result<Vec<f32>, GgufError> {
    if !ty.is_supported() {
        return Err(GgufError::UnsupportedTensorType {
            tensor: tensor.to_string(),
            type_name: ty.name(),
        });
    }
    let bad_shape = |reason: String| GgufError::BadTensorShape {
        tensor: tensor.to_string(),
        dims: vec![n_elements as u64],
        reason,
    };
    if !n_elements.is_multiple_of(ty.block_len()) {
        return Err(bad_shape(format!(
            "{n_elements} elements is not a multiple of the {} block length {}",
            ty.name(),
            ty.block_len()
        )));
    }
    let expected_bytes = n_elements / ty.block_len() * ty.block_bytes();
    if bytes.len() != expected_bytes {
        return Err(bad_shape(format!(
            "{} bytes given, {} expected",
            bytes.len(),
            expected_bytes
        )));
    }
    let mut out = Vec::with_capacity(n_elements);
    match ty {
        GgmlType::F32 => out.extend(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        ),
        GgmlType::F16 => out.extend(
            bytes
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()),
        ),
        GgmlType::Bf16 => out.extend(
            bytes
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32()),
        ),
        GgmlType::Q8_0 => dequantize_blocks(bytes, &mut out, dequantize_q8_0_block),
        GgmlType::Q4_0 => dequantize_blocks(bytes, &mut out, dequantize_q4_0_block),
        GgmlType::Q4_1 => dequantize_blocks(bytes, &mut out, dequantize_q4_1_block),
        _ => unreachable!("is_supported() was checked above"),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f16 bytes of a value that f16 represents exactly.
    fn h(v: f32) -> [u8; 2] {
        let x = f16::from_f32(v);
        assert_eq!(x.to_f32(), v, "test values must be exact in f16");
        x.to_le_bytes()
    }

    #[test]
    fn q8_0_block_by_hand() {
        // d = 0.5; q = -16..16 → w = q / 2.
        let mut block = [0u8; 34];
        block[..2].copy_from_slice(&h(0.5));
        for i in 0..32 {
            block[2 + i] = (i as i8 - 16) as u8;
        }
        let w = dequantize_q8_0_block(&block);
        for i in 0..32 {
            assert_eq!(w[i], (i as f32 - 16.0) * 0.5, "element {i}");
        }
        // Extremes of int8: -128·0.5 = -64, 127·0.5 = 63.5.
        block[2] = 0x80;
        block[3] = 0x7f;
        let w = dequantize_q8_0_block(&block);
        assert_eq!((w[0], w[1]), (-64.0, 63.5));
    }

    #[test]
    fn q4_0_block_by_hand() {
        // d = 2; byte j = (hi << 4) | lo with lo = j, hi = 15 - j.
        // Element j (j < 16) = 2·(j − 8); element j + 16 = 2·(15 − j − 8).
        let mut block = [0u8; 18];
        block[..2].copy_from_slice(&h(2.0));
        for j in 0..16u8 {
            block[2 + j as usize] = ((15 - j) << 4) | j;
        }
        let w = dequantize_q4_0_block(&block);
        for j in 0..16 {
            assert_eq!(w[j], 2.0 * (j as f32 - 8.0), "low nibble {j}");
            assert_eq!(w[j + 16], 2.0 * (7.0 - j as f32), "high nibble {j}");
        }
    }

    #[test]
    fn q4_1_block_by_hand() {
        // d = 0.25, m = -1; byte 0 = 0xF3: element 0 = 0.25·3 − 1 = −0.25, element 16 = 0.25·15 − 1 = 2.75.
        let mut block = [0u8; 20];
        block[..2].copy_from_slice(&h(0.25));
        block[2..4].copy_from_slice(&h(-1.0));
        block[4] = 0xf3;
        block[5] = 0x0a; // element 1 = 0.25·10 − 1 = 1.5, element 17 = 0.25·0 − 1 = −1.
        let w = dequantize_q4_1_block(&block);
        assert_eq!(w[0], -0.25);
        assert_eq!(w[16], 2.75);
        assert_eq!(w[1], 1.5);
        assert_eq!(w[17], -1.0);
        // Every other byte is 0 → w = m.
        for i in (2..16).chain(18..32) {
            assert_eq!(w[i], -1.0, "element {i}");
        }
    }

    #[test]
    fn plain_types_and_multi_block_order() {
        let f32s: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            dequantize(GgmlType::F32, &f32s, 2, "t").unwrap(),
            vec![1.5, -2.0]
        );
        let f16s: Vec<u8> = [h(0.125), h(-3.0)].concat();
        assert_eq!(
            dequantize(GgmlType::F16, &f16s, 2, "t").unwrap(),
            vec![0.125, -3.0]
        );
        let bf16s: Vec<u8> = [
            bf16::from_f32(-0.5).to_le_bytes(),
            bf16::from_f32(256.0).to_le_bytes(),
        ]
        .concat();
        assert_eq!(
            dequantize(GgmlType::Bf16, &bf16s, 2, "t").unwrap(),
            vec![-0.5, 256.0]
        );

        // Two Q8_0 blocks: the second block's elements follow the first's.
        let mut two = vec![0u8; 68];
        two[..2].copy_from_slice(&h(1.0));
        two[2] = 7;
        two[34..36].copy_from_slice(&h(-1.0));
        two[36] = 5;
        let w = dequantize(GgmlType::Q8_0, &two, 64, "t").unwrap();
        assert_eq!((w[0], w[32], w.len()), (7.0, -5.0, 64));
    }

    #[test]
    fn unsupported_types_and_bad_lengths_are_typed_errors() {
        let err = dequantize(GgmlType::Q4K, &[0; 144], 256, "blk.0.ffn_up.weight").unwrap_err();
        assert!(matches!(
            err,
            GgufError::UnsupportedTensorType {
                type_name: "Q4_K",
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "unsupported type Q4_K in tensor \"blk.0.ffn_up.weight\" (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)"
        );
        assert!(matches!(
            dequantize(GgmlType::Q8_0, &[0; 34], 31, "t"),
            Err(GgufError::BadTensorShape { .. })
        ));
        assert!(matches!(
            dequantize(GgmlType::F32, &[0; 7], 2, "t"),
            Err(GgufError::BadTensorShape { .. })
        ));
    }
}
