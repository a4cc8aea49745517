//! Parsing a GGUF file: header, metadata, tensor infos, alignment, and access to (dequantised) tensor data.
//!
//! Layout (GGUF v2/v3, little-endian): magic `GGUF`, `u32` version, `u64` tensor count, `u64` metadata count,
//! the metadata key/values, the tensor infos (name, `u32` n_dims, `u64` dims innermost-first, `u32` ggml type,
//! `u64` offset relative to the data section), then padding to `general.alignment` (default 32) and the data.

use std::collections::BTreeMap;
use std::path::Path;

use super::value::value_type;
use super::{dequantize, GgmlType, GgufError, MetadataValue};

/// The alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The four magic bytes at the start of every GGUF file.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The most dimensions ggml tensors have.
const MAX_DIMS: u32 = 4;
/// Deepest nesting of metadata arrays this reader accepts (real files nest at most once).
pub const MAX_ARRAY_DEPTH: u32 = 8;
/// Most metadata values (array elements included, summed over the file) this reader accepts. Each costs
/// about 32 bytes in memory; the largest real vocabularies (256k tokens, their scores, types and merges)
/// need about 1.5M.
pub const MAX_METADATA_VALUES: u64 = 1 << 23;

/// One tensor's entry in the tensor-info table.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// The tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions as GGUF stores them: innermost (contiguous) first.
    pub dims: Vec<u64>,
    /// Element type.
    pub ty: GgmlType,
    /// Offset of the data relative to the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// The shape in row-major order (outermost first), as PyTorch/HF and burn write it.
    ///
    /// A GGUF matrix with dims `[n_in, n_out]` is the row-major `[n_out, n_in]` matrix of an HF `nn.Linear`.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// Number of elements (saturating at `u64::MAX`; [`GgufFile::from_bytes`] refuses shapes that
    /// overflow).
    pub fn n_elements(&self) -> u64 {
        self.checked_n_elements().unwrap_or(u64::MAX)
    }

    /// Bytes of data (saturating at `u64::MAX`; [`GgufFile::from_bytes`] refuses sizes that overflow).
    pub fn n_bytes(&self) -> u64 {
        self.checked_n_bytes().unwrap_or(u64::MAX)
    }

    fn checked_n_elements(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }

    fn checked_n_bytes(&self) -> Option<u64> {
        (self.checked_n_elements()? / self.ty.block_len() as u64)
            .checked_mul(self.ty.block_bytes() as u64)
    }
}

/// A dequantised tensor: `f32` values in row-major order and their shape (outermost first).
#[derive(Debug, Clone, PartialEq)]
pub struct DequantizedTensor {
    /// Values, row-major.
    pub data: Vec<f32>,
    /// Shape, outermost first.
    pub shape: Vec<usize>,
}

/// A parsed GGUF file held in memory.
#[derive(Debug, Clone)]
pub struct GgufFile {
    /// The format version (2 or 3).
    pub version: u32,
    /// All metadata key/values.
    pub metadata: BTreeMap<String, MetadataValue>,
    /// The tensor infos in file order.
    pub tensors: Vec<TensorInfo>,
    /// The data-section alignment.
    pub alignment: u64,
    /// Absolute offset of the data section.
    pub data_offset: u64,
    bytes: Vec<u8>,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Metadata values read so far (array elements included).
    values: u64,
}

/// The fewest bytes one value of GGUF type `type_id` takes in the file (0 for an unknown type, whose
/// arrays fail on their first element).
fn min_value_bytes(type_id: u32) -> u64 {
    match type_id {
        value_type::U8 | value_type::I8 | value_type::BOOL => 1,
        value_type::U16 | value_type::I16 => 2,
        value_type::U32 | value_type::I32 | value_type::F32 => 4,
        value_type::U64 | value_type::I64 | value_type::F64 | value_type::STRING => 8,
        value_type::ARRAY => 12,
        _ => 0,
    }
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<&'a [u8], GgufError> {
        let remaining = (self.bytes.len() - self.pos) as u64;
        if n > remaining {
            return Err(GgufError::Truncated {
                what: what(),
                offset: self.pos as u64,
                needed: n,
                len: self.bytes.len() as u64,
            });
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N], GgufError> {
        Ok(self
            .take(N as u64, what)?
            .try_into()
            .expect("take returns N bytes"))
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let len = self.u64(what)?;
        let offset = self.pos as u64;
        let raw = self.take(len, what)?;
        String::from_utf8(raw.to_vec()).map_err(|_| GgufError::InvalidUtf8 { offset })
    }

    fn value(&mut self, type_id: u32, key: &str, depth: u32) -> Result<MetadataValue, GgufError> {
        let what = || format!("value of metadata key {key:?}");
        self.values += 1;
        if self.values > MAX_METADATA_VALUES {
            return Err(GgufError::LimitExceeded {
                what: format!("number of metadata values (at key {key:?})"),
                found: self.values,
                limit: MAX_METADATA_VALUES,
            });
        }
        Ok(match type_id {
            value_type::U8 => MetadataValue::U8(self.array::<1>(&what)?[0]),
            value_type::I8 => MetadataValue::I8(self.array::<1>(&what)?[0] as i8),
            value_type::U16 => MetadataValue::U16(u16::from_le_bytes(self.array(&what)?)),
            value_type::I16 => MetadataValue::I16(i16::from_le_bytes(self.array(&what)?)),
            value_type::U32 => MetadataValue::U32(self.u32(&what)?),
            value_type::I32 => MetadataValue::I32(i32::from_le_bytes(self.array(&what)?)),
            value_type::F32 => MetadataValue::F32(f32::from_le_bytes(self.array(&what)?)),
            value_type::BOOL => MetadataValue::Bool(self.array::<1>(&what)?[0] != 0),
            value_type::STRING => MetadataValue::String(self.string(&what)?),
            value_type::U64 => MetadataValue::U64(self.u64(&what)?),
            value_type::I64 => MetadataValue::I64(i64::from_le_bytes(self.array(&what)?)),
            value_type::F64 => MetadataValue::F64(f64::from_le_bytes(self.array(&what)?)),
            value_type::ARRAY => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(GgufError::LimitExceeded {
                        what: format!("nesting depth of the arrays of metadata key {key:?}"),
                        found: u64::from(depth) + 1,
                        limit: u64::from(MAX_ARRAY_DEPTH),
                    });
                }
                let element_type = self.u32(&what)?;
                let len = self.u64(&what)?;
                // A length whose smallest encoding runs past the end of the file is truncation, and a count
                // above the value limit is refused: both are checked before anything is allocated.
                let remaining = (self.bytes.len() - self.pos) as u64;
                let needed = len.saturating_mul(min_value_bytes(element_type));
                if needed > remaining {
                    return Err(GgufError::Truncated {
                        what: format!("{len} elements of the array of metadata key {key:?}"),
                        offset: self.pos as u64,
                        needed,
                        len: self.bytes.len() as u64,
                    });
                }
                let total = self.values.saturating_add(len);
                if total > MAX_METADATA_VALUES {
                    return Err(GgufError::LimitExceeded {
                        what: format!("number of metadata values (array of metadata key {key:?})"),
                        found: total,
                        limit: MAX_METADATA_VALUES,
                    });
                }
                // Growth is amortised: the capacity never exceeds what the elements already read justify.
                let mut items = Vec::with_capacity(len.min(1024) as usize);
                for _ in 0..len {
                    items.push(self.value(element_type, key, depth + 1)?);
                }
                MetadataValue::Array(items)
            }
            _ => {
                return Err(GgufError::UnknownValueType {
                    key: key.to_string(),
                    type_id,
                })
            }
        })
    }
}

impl GgufFile {
    /// Reads and parses a GGUF file.
    ///
    /// # Errors
    /// [`GgufError::Io`] if the file cannot be read, otherwise those of [`GgufFile::from_bytes`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, GgufError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(bytes)
    }

    /// Parses a GGUF file held in memory and checks that every tensor's data lies inside it.
    ///
    /// # Errors
    /// Truncation, bad magic or version, unknown value or tensor types, bad alignment, invalid shapes and
    /// out-of-bounds tensor data are all typed [`GgufError`]s.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, GgufError> {
        let mut cursor = Cursor {
            bytes: &bytes,
            pos: 0,
            values: 0,
        };
        let magic: [u8; 4] = cursor.array(&|| "magic".to_string())?;
        if magic != GGUF_MAGIC {
            return Err(GgufError::BadMagic { found: magic });
        }
        let version = cursor.u32(&|| "version".to_string())?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion { version });
        }
        let tensor_count = cursor.u64(&|| "tensor count".to_string())?;
        let metadata_count = cursor.u64(&|| "metadata count".to_string())?;

        let mut metadata = BTreeMap::new();
        for index in 0..metadata_count {
            let key = cursor.string(&|| format!("key of metadata entry {index}"))?;
            let type_id = cursor.u32(&|| format!("type of metadata key {key:?}"))?;
            let value = cursor.value(type_id, &key, 0)?;
            if metadata.contains_key(&key) {
                return Err(GgufError::Duplicate {
                    what: "metadata key",
                    name: key,
                });
            }
            metadata.insert(key, value);
        }

        // No capacity from the count: each entry takes at least 24 bytes, so the loop ends at the file's end.
        let mut tensors: Vec<TensorInfo> = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for index in 0..tensor_count {
            let name = cursor.string(&|| format!("name of tensor {index}"))?;
            if !names.insert(name.clone()) {
                return Err(GgufError::Duplicate {
                    what: "tensor",
                    name,
                });
            }
            let what = || format!("info of tensor {name:?}");
            let n_dims = cursor.u32(&what)?;
            if n_dims > MAX_DIMS {
                return Err(GgufError::BadTensorShape {
                    tensor: name,
                    dims: vec![],
                    reason: format!("{n_dims} dims (at most {MAX_DIMS})"),
                });
            }
            let dims = (0..n_dims)
                .map(|_| cursor.u64(&what))
                .collect::<Result<Vec<_>, _>>()?;
            let type_id = cursor.u32(&what)?;
            let offset = cursor.u64(&what)?;
            let Some(ty) = GgmlType::from_id(type_id) else {
                return Err(GgufError::UnknownTensorType {
                    tensor: name,
                    type_id,
                });
            };
            let info = TensorInfo {
                name,
                dims,
                ty,
                offset,
            };
            let bad_shape = |reason: String| GgufError::BadTensorShape {
                tensor: info.name.clone(),
                dims: info.dims.clone(),
                reason,
            };
            if info.checked_n_elements().is_none() {
                return Err(bad_shape("element count overflows u64".to_string()));
            }
            if info.checked_n_bytes().is_none() {
                return Err(bad_shape(format!(
                    "byte count of {} data overflows u64",
                    ty.name()
                )));
            }
            if !info
                .dims
                .first()
                .copied()
                .unwrap_or(1)
                .is_multiple_of(ty.block_len() as u64)
            {
                return Err(bad_shape(format!(
                    "rows are not a multiple of the {} block length {}",
                    ty.name(),
                    ty.block_len()
                )));
            }
            tensors.push(info);
        }

        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(value) => value.as_u64().ok_or_else(|| GgufError::MetadataType {
                key: "general.alignment".to_string(),
                expected: "unsigned integer",
                found: value.type_name(),
            })?,
        };
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(GgufError::BadAlignment { alignment });
        }
        let len = bytes.len() as u64;
        let data_offset = (cursor.pos as u64)
            .div_ceil(alignment)
            .checked_mul(alignment)
            .ok_or(GgufError::BadAlignment { alignment })?;
        let mut ranges = Vec::with_capacity(tensors.len());
        for info in &tensors {
            if !info.offset.is_multiple_of(alignment) {
                return Err(GgufError::MisalignedTensor {
                    tensor: info.name.clone(),
                    offset: info.offset,
                    alignment,
                });
            }
            let start = data_offset.checked_add(info.offset);
            let end = start.and_then(|s| s.checked_add(info.n_bytes()));
            match (start, end) {
                (Some(start), Some(end)) if end <= len => ranges.push((start, end, &info.name)),
                _ => {
                    return Err(GgufError::TensorOutOfBounds {
                        tensor: info.name.clone(),
                        start: start.unwrap_or(u64::MAX),
                        end: end.unwrap_or(u64::MAX),
                        len,
                    })
                }
            }
        }
        // Tensor data must not overlap (zero-sized tensors occupy nothing).
        ranges.retain(|(start, end, _)| end > start);
        ranges.sort();
        for pair in ranges.windows(2) {
            let ((a_start, a_end, a), (b_start, b_end, b)) = (pair[0], pair[1]);
            if b_start < a_end {
                return Err(GgufError::OverlappingTensors {
                    first: a.clone(),
                    first_start: a_start,
                    first_end: a_end,
                    second: b.clone(),
                    second_start: b_start,
                    second_end: b_end,
                });
            }
        }
        Ok(Self {
            version,
            metadata,
            tensors,
            alignment,
            data_offset,
            bytes,
        })
    }

    /// The value of a metadata key.
    ///
    /// # Errors
    /// [`GgufError::MissingMetadata`] if absent.
    pub fn get(&self, key: &str) -> Result<&MetadataValue, GgufError> {
        self.metadata
            .get(key)
            .ok_or_else(|| GgufError::MissingMetadata {
                key: key.to_string(),
            })
    }

    fn typed<'a, T>(
        &'a self,
        key: &str,
        expected: &'static str,
        convert: impl Fn(&'a MetadataValue) -> Option<T>,
    ) -> Result<T, GgufError> {
        let value = self.get(key)?;
        convert(value).ok_or_else(|| GgufError::MetadataType {
            key: key.to_string(),
            expected,
            found: value.type_name(),
        })
    }

    /// A metadata value that must be a non-negative integer.
    ///
    /// # Errors
    /// Missing key or wrong type.
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        self.typed(key, "unsigned integer", MetadataValue::as_u64)
    }

    /// A metadata value that must be a float.
    ///
    /// # Errors
    /// Missing key or wrong type.
    pub fn get_f64(&self, key: &str) -> Result<f64, GgufError> {
        self.typed(key, "float", MetadataValue::as_f64)
    }

    /// A metadata value that must be a string.
    ///
    /// # Errors
    /// Missing key or wrong type.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        self.typed(key, "string", MetadataValue::as_str)
    }

    /// A metadata value that must be a bool.
    ///
    /// # Errors
    /// Missing key or wrong type.
    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        self.typed(key, "bool", MetadataValue::as_bool)
    }

    /// A metadata value that must be an array.
    ///
    /// # Errors
    /// Missing key or wrong type.
    pub fn get_array(&self, key: &str) -> Result<&[MetadataValue], GgufError> {
        self.typed(key, "array", MetadataValue::as_array)
    }

    /// A metadata array whose elements must all be strings.
    ///
    /// # Errors
    /// Missing key or wrong type.
    pub fn get_string_array(&self, key: &str) -> Result<Vec<&str>, GgufError> {
        self.get_array(key)?
            .iter()
            .map(|v| {
                v.as_str().ok_or_else(|| GgufError::MetadataType {
                    key: key.to_string(),
                    expected: "array of strings",
                    found: v.type_name(),
                })
            })
            .collect()
    }

    /// The info of a tensor.
    ///
    /// # Errors
    /// [`GgufError::MissingTensor`].
    pub fn tensor_info(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.tensors
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| GgufError::MissingTensor {
                tensor: name.to_string(),
            })
    }

    /// The raw (possibly quantised) bytes of a tensor.
    ///
    /// # Errors
    /// [`GgufError::MissingTensor`].
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8], GgufError> {
        let info = self.tensor_info(name)?;
        // Bounds were checked in `from_bytes`.
        let start = (self.data_offset + info.offset) as usize;
        Ok(&self.bytes[start..start + info.n_bytes() as usize])
    }

    /// A tensor dequantised to `f32`, with its row-major shape.
    ///
    /// # Errors
    /// [`GgufError::MissingTensor`], [`GgufError::UnsupportedTensorType`].
    pub fn tensor_f32(&self, name: &str) -> Result<DequantizedTensor, GgufError> {
        let info = self.tensor_info(name)?;
        let data = dequantize(
            info.ty,
            self.tensor_bytes(name)?,
            info.n_elements() as usize,
            name,
        )?;
        Ok(DequantizedTensor {
            data,
            shape: info.shape(),
        })
    }
}
