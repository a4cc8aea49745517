//! ggml tensor types: ids, names, block sizes and bytes per block.

/// A ggml tensor type as stored in a GGUF tensor info.
///
/// Only the types with [`GgmlType::is_supported`] can be dequantised; the others are known so that their
/// byte sizes (and hence the bounds of every tensor in the file) can still be checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    /// 32-bit float (id 0).
    F32,
    /// IEEE half (id 1).
    F16,
    /// 32 4-bit values with one f16 scale, `w = d·(q − 8)` (id 2).
    Q4_0,
    /// 32 4-bit values with an f16 scale and an f16 minimum, `w = d·q + m` (id 3).
    Q4_1,
    /// Id 6.
    Q5_0,
    /// Id 7.
    Q5_1,
    /// 32 int8 values with one f16 scale, `w = d·q` (id 8).
    Q8_0,
    /// Id 9.
    Q8_1,
    /// Id 10.
    Q2K,
    /// Id 11.
    Q3K,
    /// Id 12.
    Q4K,
    /// Id 13.
    Q5K,
    /// Id 14.
    Q6K,
    /// Id 15.
    Q8K,
    /// Id 24.
    I8,
    /// Id 25.
    I16,
    /// Id 26.
    I32,
    /// Id 27.
    I64,
    /// Id 28.
    F64,
    /// bfloat16 (id 30).
    Bf16,
}

impl GgmlType {
    /// The type with this ggml id, if it is one of the known ones.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            9 => Self::Q8_1,
            10 => Self::Q2K,
            11 => Self::Q3K,
            12 => Self::Q4K,
            13 => Self::Q5K,
            14 => Self::Q6K,
            15 => Self::Q8K,
            24 => Self::I8,
            25 => Self::I16,
            26 => Self::I32,
            27 => Self::I64,
            28 => Self::F64,
            30 => Self::Bf16,
            _ => return None,
        })
    }

    /// The ggml id of this type.
    pub fn id(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q8_1 => 9,
            Self::Q2K => 10,
            Self::Q3K => 11,
            Self::Q4K => 12,
            Self::Q5K => 13,
            Self::Q6K => 14,
            Self::Q8K => 15,
            Self::I8 => 24,
            Self::I16 => 25,
            Self::I32 => 26,
            Self::I64 => 27,
            Self::F64 => 28,
            Self::Bf16 => 30,
        }
    }

    /// The llama.cpp name of this type.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::Q4_0 => "Q4_0",
            Self::Q4_1 => "Q4_1",
            Self::Q5_0 => "Q5_0",
            Self::Q5_1 => "Q5_1",
            Self::Q8_0 => "Q8_0",
            Self::Q8_1 => "Q8_1",
            Self::Q2K => "Q2_K",
            Self::Q3K => "Q3_K",
            Self::Q4K => "Q4_K",
            Self::Q5K => "Q5_K",
            Self::Q6K => "Q6_K",
            Self::Q8K => "Q8_K",
            Self::I8 => "I8",
            Self::I16 => "I16",
            Self::I32 => "I32",
            Self::I64 => "I64",
            Self::F64 => "F64",
            Self::Bf16 => "BF16",
        }
    }

    /// Elements per block (1 for plain types).
    pub fn block_len(self) -> usize {
        match self {
            Self::Q4_0 | Self::Q4_1 | Self::Q5_0 | Self::Q5_1 | Self::Q8_0 | Self::Q8_1 => 32,
            Self::Q2K | Self::Q3K | Self::Q4K | Self::Q5K | Self::Q6K | Self::Q8K => 256,
            _ => 1,
        }
    }

    /// Bytes per block (ggml's `type_size`).
    pub fn block_bytes(self) -> usize {
        match self {
            Self::F32 | Self::I32 => 4,
            Self::F16 | Self::Bf16 | Self::I16 => 2,
            Self::I8 => 1,
            Self::I64 | Self::F64 => 8,
            Self::Q4_0 => 18,
            Self::Q4_1 => 20,
            Self::Q5_0 => 22,
            Self::Q5_1 => 24,
            Self::Q8_0 => 34,
            Self::Q8_1 => 36,
            Self::Q2K => 84,
            Self::Q3K => 110,
            Self::Q4K => 144,
            Self::Q5K => 176,
            Self::Q6K => 210,
            Self::Q8K => 292,
        }
    }

    /// Whether [`dequantize`](super::dequantize) handles this type.
    pub fn is_supported(self) -> bool {
        matches!(
            self,
            Self::F32 | Self::F16 | Self::Bf16 | Self::Q8_0 | Self::Q4_0 | Self::Q4_1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_unknown_ids_are_rejected() {
        for id in 0..64 {
            if let Some(ty) = GgmlType::from_id(id) {
                assert_eq!(ty.id(), id);
            }
        }
        assert_eq!(GgmlType::from_id(4), None, "Q4_2 was removed from ggml");
        assert_eq!(GgmlType::from_id(999), None);
    }
}
