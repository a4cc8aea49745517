//! GGUF metadata values: the thirteen value types of the specification, arrays included.

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataValue {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7.
    Bool(bool),
    /// Type 8.
    String(String),
    /// Type 9: elements all of one type (nested arrays are allowed by the format).
    Array(Vec<MetadataValue>),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

/// GGUF value type ids.
pub mod value_type {
    /// `uint8`.
    pub const U8: u32 = 0;
    /// `int8`.
    pub const I8: u32 = 1;
    /// `uint16`.
    pub const U16: u32 = 2;
    /// `int16`.
    pub const I16: u32 = 3;
    /// `uint32`.
    pub const U32: u32 = 4;
    /// `int32`.
    pub const I32: u32 = 5;
    /// `float32`.
    pub const F32: u32 = 6;
    /// `bool`.
    pub const BOOL: u32 = 7;
    /// `string`.
    pub const STRING: u32 = 8;
    /// `array`.
    pub const ARRAY: u32 = 9;
    /// `uint64`.
    pub const U64: u32 = 10;
    /// `int64`.
    pub const I64: u32 = 11;
    /// `float64`.
    pub const F64: u32 = 12;
}

impl MetadataValue {
    /// The name of this value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::U8(_) => "u8",
            Self::I8(_) => "i8",
            Self::U16(_) => "u16",
            Self::I16(_) => "i16",
            Self::U32(_) => "u32",
            Self::I32(_) => "i32",
            Self::F32(_) => "f32",
            Self::Bool(_) => "bool",
            Self::String(_) => "string",
            Self::Array(_) => "array",
            Self::U64(_) => "u64",
            Self::I64(_) => "i64",
            Self::F64(_) => "f64",
        }
    }

    /// The GGUF type id of this value.
    pub fn type_id(&self) -> u32 {
        match self {
            Self::U8(_) => value_type::U8,
            Self::I8(_) => value_type::I8,
            Self::U16(_) => value_type::U16,
            Self::I16(_) => value_type::I16,
            Self::U32(_) => value_type::U32,
            Self::I32(_) => value_type::I32,
            Self::F32(_) => value_type::F32,
            Self::Bool(_) => value_type::BOOL,
            Self::String(_) => value_type::STRING,
            Self::Array(_) => value_type::ARRAY,
            Self::U64(_) => value_type::U64,
            Self::I64(_) => value_type::I64,
            Self::F64(_) => value_type::F64,
        }
    }

    /// The value as a non-negative integer, if it is an integer type holding one.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Self::U8(v) => Some(v.into()),
            Self::U16(v) => Some(v.into()),
            Self::U32(v) => Some(v.into()),
            Self::U64(v) => Some(v),
            Self::I8(v) => u64::try_from(v).ok(),
            Self::I16(v) => u64::try_from(v).ok(),
            Self::I32(v) => u64::try_from(v).ok(),
            Self::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer, if it is an integer type that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Self::I8(v) => Some(v.into()),
            Self::I16(v) => Some(v.into()),
            Self::I32(v) => Some(v.into()),
            Self::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as a float, if it is a float type.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::F32(v) => Some(v.into()),
            Self::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a bool, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Self::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The elements, if the value is an array.
    pub fn as_array(&self) -> Option<&[MetadataValue]> {
        match self {
            Self::Array(items) => Some(items),
            _ => None,
        }
    }
}
