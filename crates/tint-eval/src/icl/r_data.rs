//! A reader for R's serialization format: `.rds` files (one object, `saveRDS`) and `.rda` / `.RData`
//! files (named objects, `save`), gzip-compressed or not, in the XDR (big-endian binary) format of
//! serialization versions 2 and 3.
//!
//! Enough of R's object model is supported to read data frames of character, factor, integer, double
//! and logical columns: `NULL`, symbols, pairlists (with tags and attributes), `CHARSXP` strings
//! (including `NA`), character / integer / double / logical vectors, generic vectors (lists), back
//! references to symbols, and the ALTREP compact sequences and wrappers R writes for row names and
//! vectors. Anything else (environments, closures, language objects, bytecode, external pointers,
//! S4 objects, …) is a typed [`RDataError`] naming the SEXP type and the byte offset in the
//! decompressed stream; so is truncated input.
//!
//! Layout of a stream: an optional `RDX2\n` / `RDX3\n` line (`.rda` files), the format `X\n`, the
//! format version, the writing and the minimal reading R versions, for version 3 the native
//! encoding, then one item. An item starts with a 32-bit flags word: type in bits 0–7, "is object"
//! bit 8, "has attributes" bit 9, "has tag" bit 10, the `gp` levels in bits 12–27.

use std::borrow::Cow;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Deepest nesting of items accepted (pairlist chains are read iteratively and do not count).
pub const MAX_DEPTH: usize = 512;

/// Longest ALTREP compact sequence expanded (a corrupt length must not allocate gigabytes).
pub const MAX_COMPACT_LENGTH: f64 = (1u64 << 27) as f64;

/// Errors of the R data reader.
#[derive(Debug, thiserror::Error)]
pub enum RDataError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The gzip layer is corrupt or truncated.
    #[error("gzip-compressed R data is corrupt or truncated: {0}")]
    Gzip(#[source] std::io::Error),
    /// The data is compressed with a method this reader does not decode.
    #[error("R data compressed with {method} is not supported (re-save it with gzip: `saveRDS(x, file)`)")]
    UnsupportedCompression {
        /// `bzip2` or `xz`.
        method: &'static str,
    },
    /// The stream does not start with a known R serialization header.
    #[error("not R serialized data (starts with {found:?})")]
    BadMagic {
        /// The first bytes, escaped.
        found: String,
    },
    /// An R serialization format other than XDR binary.
    #[error("R serialization format {format:?} is not supported (only XDR binary, `X`)")]
    UnsupportedFormat {
        /// `ascii` or `native binary`.
        format: &'static str,
    },
    /// A serialization version other than 2 or 3.
    #[error("R serialization version {version} is not supported (only 2 and 3)")]
    UnsupportedVersion {
        /// The version found.
        version: i32,
    },
    /// The stream ends inside an item.
    #[error("R data truncated at byte {offset}: {what} needs {needed} byte(s), {available} left")]
    Truncated {
        /// Offset in the decompressed stream.
        offset: usize,
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// A known SEXP type this reader does not support.
    #[error("unsupported R object type {name} (SEXP type {code}) at byte {offset}")]
    UnsupportedSexp {
        /// R's name of the type, e.g. `ENVSXP`.
        name: &'static str,
        /// The type code.
        code: u32,
        /// Offset of the item's flags in the decompressed stream.
        offset: usize,
    },
    /// A SEXP type code R does not define.
    #[error("unknown R object type {code} at byte {offset}")]
    UnknownSexp {
        /// The type code.
        code: u32,
        /// Offset of the item's flags in the decompressed stream.
        offset: usize,
    },
    /// An ALTREP class this reader cannot expand.
    #[error("unsupported ALTREP class {class:?} at byte {offset}")]
    UnsupportedAltrep {
        /// The class name, e.g. `deferred_string`.
        class: String,
        /// Offset of the item's flags.
        offset: usize,
    },
    /// A back reference to an object not read yet.
    #[error("reference #{index} at byte {offset}, but only {known} referable object(s) were read")]
    BadReference {
        /// 1-based reference index.
        index: usize,
        /// Referable objects read so far.
        known: usize,
        /// Offset of the item's flags.
        offset: usize,
    },
    /// A negative or impossible length.
    #[error("invalid length {length} at byte {offset}")]
    BadLength {
        /// The length as written.
        length: i64,
        /// Offset of the length word.
        offset: usize,
    },
    /// A well-formed item of the wrong kind where the format requires another (e.g. a symbol whose
    /// name is not a string).
    #[error("at byte {offset}: expected {expected}, found {found}")]
    Unexpected {
        /// What the format requires.
        expected: &'static str,
        /// What was found.
        found: String,
        /// Offset of the item.
        offset: usize,
    },
    /// Items nested deeper than [`MAX_DEPTH`].
    #[error("R data nested deeper than {MAX_DEPTH} levels at byte {offset}")]
    TooDeep {
        /// Offset of the item's flags.
        offset: usize,
    },
    /// A data-frame view of an object failed (not a data frame, missing column, wrong column type).
    #[error("R data frame: {0}")]
    DataFrame(String),
    /// An `.rda` file lacks a requested object.
    #[error("R data holds no object named {name:?} (it holds: {available})")]
    MissingObject {
        /// The name looked for.
        name: String,
        /// The names present, comma separated.
        available: String,
    },
}

/// The value of an R object.
#[derive(Debug, Clone, PartialEq)]
pub enum RValue {
    /// `NULL`.
    Null,
    /// A symbol (name).
    Symbol(String),
    /// A pairlist: (tag, value) cells in order.
    Pairlist(Vec<(Option<String>, RObject)>),
    /// One `CHARSXP` string (`None`: `NA_character_`).
    Char(Option<String>),
    /// A character vector (`None`: `NA`).
    Strings(Vec<Option<String>>),
    /// An integer vector (`None`: `NA_integer_`); factors are integer vectors with `levels`.
    Integers(Vec<Option<i32>>),
    /// A double vector (`NA_real_` is a NaN).
    Reals(Vec<f64>),
    /// A logical vector (`None`: `NA`).
    Logicals(Vec<Option<bool>>),
    /// A generic vector (list; a data frame is a list of columns).
    List(Vec<RObject>),
}

/// An R object: its value and attributes (`names`, `class`, `levels`, `row.names`, …) in order.
#[derive(Debug, Clone, PartialEq)]
pub struct RObject {
    /// The value.
    pub value: RValue,
    /// The attributes, by name.
    pub attributes: Vec<(String, RObject)>,
}

impl RObject {
    /// An object without attributes.
    pub fn new(value: RValue) -> Self {
        Self {
            value,
            attributes: Vec::new(),
        }
    }

    /// The attribute `name`.
    pub fn attr(&self, name: &str) -> Option<&RObject> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// The non-NA strings of a character attribute such as `class`, `names` or `levels` (NA → "").
    pub fn string_attr(&self, name: &str) -> Option<Vec<String>> {
        match &self.attr(name)?.value {
            RValue::Strings(s) => Some(s.iter().map(|s| s.clone().unwrap_or_default()).collect()),
            _ => None,
        }
    }

    /// Whether `class` includes `class`.
    pub fn inherits(&self, class: &str) -> bool {
        self.string_attr("class")
            .is_some_and(|c| c.iter().any(|c| c == class))
    }

    /// A short description of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self.value {
            RValue::Null => "NULL",
            RValue::Symbol(_) => "symbol",
            RValue::Pairlist(_) => "pairlist",
            RValue::Char(_) => "CHARSXP",
            RValue::Strings(_) => "character vector",
            RValue::Integers(_) => "integer vector",
            RValue::Reals(_) => "double vector",
            RValue::Logicals(_) => "logical vector",
            RValue::List(_) => "list",
        }
    }

    /// Views a `data.frame` (also a tibble) as named columns.
    ///
    /// # Errors
    ///
    /// [`RDataError::DataFrame`] when the object is not a list with class `data.frame`, names do not
    /// match the columns, a column has an unsupported type, or columns differ in length.
    pub fn to_data_frame(&self) -> Result<DataFrame, RDataError> {
        let bad = |reason: String| RDataError::DataFrame(reason);
        if !self.inherits("data.frame") {
            return Err(bad(format!(
                "object is a {} without class data.frame",
                self.type_name()
            )));
        }
        let RValue::List(columns) = &self.value else {
            return Err(bad(format!(
                "a data frame must be a list, not a {}",
                self.type_name()
            )));
        };
        let names = self
            .string_attr("names")
            .ok_or_else(|| bad("no names attribute".into()))?;
        if names.len() != columns.len() {
            return Err(bad(format!(
                "{} names for {} columns",
                names.len(),
                columns.len()
            )));
        }
        let mut out = Vec::with_capacity(columns.len());
        for (name, column) in names.iter().zip(columns) {
            let column = match &column.value {
                RValue::Integers(codes) if column.inherits("factor") => Column::Factor {
                    codes: codes.clone(),
                    levels: column
                        .string_attr("levels")
                        .ok_or_else(|| bad(format!("factor column {name:?} has no levels")))?,
                },
                RValue::Strings(s) => Column::Strings(s.clone()),
                RValue::Integers(v) => Column::Integers(v.clone()),
                RValue::Reals(v) => Column::Reals(v.clone()),
                RValue::Logicals(v) => Column::Logicals(v.clone()),
                _ => {
                    return Err(bad(format!(
                        "column {name:?} is a {}, not an atomic vector",
                        column.type_name()
                    )))
                }
            };
            out.push((name.clone(), column));
        }
        let n_rows = out.first().map_or(0, |(_, c)| c.len());
        if let Some((name, c)) = out.iter().find(|(_, c)| c.len() != n_rows) {
            return Err(bad(format!(
                "column {name:?} has {} rows, the first column {n_rows}",
                c.len()
            )));
        }
        Ok(DataFrame {
            columns: out,
            n_rows,
        })
    }
}

/// One column of a [`DataFrame`].
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// A character column.
    Strings(Vec<Option<String>>),
    /// A factor: 1-based codes into `levels`.
    Factor {
        /// Codes (`None`: NA).
        codes: Vec<Option<i32>>,
        /// Level labels.
        levels: Vec<String>,
    },
    /// An integer column.
    Integers(Vec<Option<i32>>),
    /// A double column.
    Reals(Vec<f64>),
    /// A logical column.
    Logicals(Vec<Option<bool>>),
}

impl Column {
    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Column::Strings(v) => v.len(),
            Column::Factor { codes, .. } => codes.len(),
            Column::Integers(v) => v.len(),
            Column::Reals(v) => v.len(),
            Column::Logicals(v) => v.len(),
        }
    }

    /// Whether the column has no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The column as text: strings as they are, factor codes as their level labels (an NA or
    /// out-of-range code is `None`); `None` for numeric and logical columns.
    pub fn as_labels(&self) -> Option<Vec<Option<String>>> {
        match self {
            Column::Strings(v) => Some(v.clone()),
            Column::Factor { codes, levels } => Some(
                codes
                    .iter()
                    .map(|c| {
                        c.and_then(|c| usize::try_from(c).ok())
                            .and_then(|c| c.checked_sub(1))
                            .and_then(|c| levels.get(c).cloned())
                    })
                    .collect(),
            ),
            _ => None,
        }
    }
}

/// A data frame: named columns of equal length.
#[derive(Debug, Clone, PartialEq)]
pub struct DataFrame {
    /// (name, column) in order.
    pub columns: Vec<(String, Column)>,
    /// Number of rows.
    pub n_rows: usize,
}

impl DataFrame {
    /// The column called `name`.
    ///
    /// # Errors
    ///
    /// [`RDataError::DataFrame`] when there is none.
    pub fn column(&self, name: &str) -> Result<&Column, RDataError> {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
            .ok_or_else(|| {
                let names: Vec<&str> = self.columns.iter().map(|(n, _)| n.as_str()).collect();
                RDataError::DataFrame(format!(
                    "no column {name:?} (columns: {})",
                    names.join(", ")
                ))
            })
    }
}

// SEXP type codes (R's Rinternals.h) and the serialization pseudo-types (serialize.c).
const NILSXP: u32 = 0;
const SYMSXP: u32 = 1;
const LISTSXP: u32 = 2;
const CHARSXP: u32 = 9;
const LGLSXP: u32 = 10;
const INTSXP: u32 = 13;
const REALSXP: u32 = 14;
const STRSXP: u32 = 16;
const VECSXP: u32 = 19;
const ALTREP_SXP: u32 = 238;
const NILVALUE_SXP: u32 = 254;
const REFSXP: u32 = 255;

/// R's name of a SEXP type code, `None` for a code R does not define.
pub fn sexp_name(code: u32) -> Option<&'static str> {
    Some(match code {
        0 => "NILSXP",
        1 => "SYMSXP",
        2 => "LISTSXP",
        3 => "CLOSXP",
        4 => "ENVSXP",
        5 => "PROMSXP",
        6 => "LANGSXP",
        7 => "SPECIALSXP",
        8 => "BUILTINSXP",
        9 => "CHARSXP",
        10 => "LGLSXP",
        13 => "INTSXP",
        14 => "REALSXP",
        15 => "CPLXSXP",
        16 => "STRSXP",
        17 => "DOTSXP",
        18 => "ANYSXP",
        19 => "VECSXP",
        20 => "EXPRSXP",
        21 => "BCODESXP",
        22 => "EXTPTRSXP",
        23 => "WEAKREFSXP",
        24 => "RAWSXP",
        25 => "S4SXP",
        238 => "ALTREP_SXP",
        239 => "ATTRLISTSXP",
        240 => "ATTRLANGSXP",
        241 => "BASEENV_SXP",
        242 => "EMPTYENV_SXP",
        243 => "BCREPREF",
        244 => "BCREPDEF",
        245 => "GENERICREFSXP",
        246 => "CLASSREFSXP",
        247 => "PERSISTSXP",
        248 => "PACKAGESXP",
        249 => "NAMESPACESXP",
        250 => "BASENAMESPACE_SXP",
        251 => "MISSINGARG_SXP",
        252 => "UNBOUNDVALUE_SXP",
        253 => "GLOBALENV_SXP",
        254 => "NILVALUE_SXP",
        255 => "REFSXP",
        _ => return None,
    })
}

const HAS_ATTR: u32 = 1 << 9;
const HAS_TAG: u32 = 1 << 10;
/// `gp` bits of a `CHARSXP` (levels, i.e. flags >> 12).
const LATIN1_MASK: u32 = 1 << 2;
const NA_INTEGER: i32 = i32::MIN;

/// Undoes a gzip layer if there is one; rejects bzip2 and xz with a clear error.
///
/// # Errors
///
/// [`RDataError::Gzip`], [`RDataError::UnsupportedCompression`].
pub fn decompress(bytes: &[u8]) -> Result<Cow<'_, [u8]>, RDataError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(RDataError::Gzip)?;
        Ok(Cow::Owned(out))
    } else if bytes.starts_with(b"BZh") {
        Err(RDataError::UnsupportedCompression { method: "bzip2" })
    } else if bytes.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Err(RDataError::UnsupportedCompression { method: "xz" })
    } else {
        Ok(Cow::Borrowed(bytes))
    }
}

/// Reads one serialized object (an `.rds` file's content, gzip-compressed or not).
///
/// # Errors
///
/// Any [`RDataError`] of the stream.
pub fn read_rds(bytes: &[u8]) -> Result<RObject, RDataError> {
    let data = decompress(bytes)?;
    if data.starts_with(b"RD") {
        return Err(RDataError::BadMagic {
            found: "an .rda header: use read_rda".into(),
        });
    }
    let mut reader = Reader::new(&data);
    reader.header()?;
    reader.item(0)
}

/// Reads the named objects of an `.rda` / `.RData` file (`RDX2` / `RDX3`, gzip-compressed or not).
///
/// # Errors
///
/// Any [`RDataError`] of the stream; [`RDataError::Unexpected`] when the top level is not a tagged
/// pairlist.
pub fn read_rda(bytes: &[u8]) -> Result<Vec<(String, RObject)>, RDataError> {
    let data = decompress(bytes)?;
    match data.get(..5) {
        Some(b"RDX2\n" | b"RDX3\n") => {}
        Some(b"RDA2\n" | b"RDA3\n") => {
            return Err(RDataError::UnsupportedFormat { format: "ascii" })
        }
        Some(b"RDB2\n" | b"RDB3\n") => {
            return Err(RDataError::UnsupportedFormat {
                format: "native binary",
            })
        }
        _ => {
            return Err(RDataError::BadMagic {
                found: escape(&data[..data.len().min(8)]),
            })
        }
    }
    let mut reader = Reader::new(&data);
    reader.pos = 5;
    reader.header()?;
    let offset = reader.pos;
    let top = reader.item(0)?;
    match top.value {
        RValue::Pairlist(cells) => cells
            .into_iter()
            .map(|(tag, value)| {
                tag.map(|t| (t, value))
                    .ok_or_else(|| RDataError::Unexpected {
                        expected: "a tag (object name) on every top-level cell",
                        found: "an untagged cell".into(),
                        offset,
                    })
            })
            .collect(),
        RValue::Null => Ok(Vec::new()),
        _ => Err(RDataError::Unexpected {
            expected: "a pairlist of named objects",
            found: top.type_name().into(),
            offset,
        }),
    }
}

/// Reads an `.rds` file.
///
/// # Errors
///
/// [`RDataError::Io`] or as [`read_rds`].
pub fn read_rds_file(path: &Path) -> Result<RObject, RDataError> {
    read_rds(&read_file(path)?)
}

/// Reads an `.rda` / `.RData` file.
///
/// # Errors
///
/// [`RDataError::Io`] or as [`read_rda`].
pub fn read_rda_file(path: &Path) -> Result<Vec<(String, RObject)>, RDataError> {
    read_rda(&read_file(path)?)
}

/// Takes object `name` out of the objects of an `.rda` file.
///
/// # Errors
///
/// [`RDataError::MissingObject`].
pub fn take_object(
    objects: &mut Vec<(String, RObject)>,
    name: &str,
) -> Result<RObject, RDataError> {
    match objects.iter().position(|(n, _)| n == name) {
        Some(i) => Ok(objects.remove(i).1),
        None => Err(RDataError::MissingObject {
            name: name.to_string(),
            available: objects
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, RDataError> {
    std::fs::read(path).map_err(|source| RDataError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn escape(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// A cursor over a decompressed XDR stream.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    /// Referable objects (symbols) in order of appearance; REFSXP indices are 1-based.
    refs: Vec<String>,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self {
            data,
            pos: 0,
            refs: Vec::new(),
        }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], RDataError> {
        let available = self.data.len() - self.pos;
        if n > available {
            return Err(RDataError::Truncated {
                offset: self.pos,
                what,
                needed: n,
                available,
            });
        }
        let bytes = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn int(&mut self, what: &'static str) -> Result<i32, RDataError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn header(&mut self) -> Result<(), RDataError> {
        let start = self.pos;
        match self.data.get(start..start + 2) {
            Some(b"X\n") => {}
            Some(b"A\n") => return Err(RDataError::UnsupportedFormat { format: "ascii" }),
            Some(b"B\n") => {
                return Err(RDataError::UnsupportedFormat {
                    format: "native binary",
                })
            }
            _ => {
                let end = self.data.len().min(start + 8);
                return Err(RDataError::BadMagic {
                    found: escape(&self.data[start..end]),
                });
            }
        }
        self.pos += 2;
        let version = self.int("the format version")?;
        if !(2..=3).contains(&version) {
            return Err(RDataError::UnsupportedVersion { version });
        }
        self.int("the writer's R version")?;
        self.int("the minimal reader's R version")?;
        if version == 3 {
            let offset = self.pos;
            let n = self.int("the native encoding's length")?;
            let n = usize::try_from(n).map_err(|_| RDataError::BadLength {
                length: n.into(),
                offset,
            })?;
            self.take(n, "the native encoding")?;
        }
        Ok(())
    }

    /// A vector length: one int, or -1 followed by two ints (upper and lower halves of a long
    /// length). Checked against the bytes left (each element needs at least `min_element_bytes`).
    fn length(&mut self, min_element_bytes: usize) -> Result<usize, RDataError> {
        let offset = self.pos;
        let n = self.int("a length")?;
        let n: i64 = if n == -1 {
            let upper = self.int("a long length")?;
            let lower = self.int("a long length")?;
            (i64::from(upper) << 32) + i64::from(lower as u32)
        } else {
            n.into()
        };
        let bad = || RDataError::BadLength { length: n, offset };
        let n = usize::try_from(n).map_err(|_| bad())?;
        let needed = n.checked_mul(min_element_bytes).ok_or_else(bad)?;
        let available = self.data.len() - self.pos;
        if needed > available {
            return Err(RDataError::Truncated {
                offset: self.pos,
                what: "a vector's elements",
                needed,
                available,
            });
        }
        Ok(n)
    }

    fn unsupported(code: u32, offset: usize) -> RDataError {
        match sexp_name(code) {
            Some(name) => RDataError::UnsupportedSexp { name, code, offset },
            None => RDataError::UnknownSexp { code, offset },
        }
    }

    /// Reads one item (recursively).
    fn item(&mut self, depth: usize) -> Result<RObject, RDataError> {
        let offset = self.pos;
        if depth > MAX_DEPTH {
            return Err(RDataError::TooDeep { offset });
        }
        let flags = self.int("an item's flags")? as u32;
        let code = flags & 0xff;
        let levels = flags >> 12;
        let has_attr = flags & HAS_ATTR != 0;
        match code {
            NILVALUE_SXP | NILSXP => Ok(RObject::new(RValue::Null)),
            REFSXP => {
                let mut index = (flags >> 8) as usize;
                if index == 0 {
                    let i = self.int("a reference index")?;
                    index = usize::try_from(i).map_err(|_| RDataError::BadLength {
                        length: i.into(),
                        offset,
                    })?;
                }
                match index.checked_sub(1).and_then(|i| self.refs.get(i)) {
                    Some(name) => Ok(RObject::new(RValue::Symbol(name.clone()))),
                    None => Err(RDataError::BadReference {
                        index,
                        known: self.refs.len(),
                        offset,
                    }),
                }
            }
            SYMSXP => {
                let name_offset = self.pos;
                let name = self.item(depth + 1)?;
                let RValue::Char(Some(name)) = name.value else {
                    return Err(RDataError::Unexpected {
                        expected: "a non-NA CHARSXP as a symbol's name",
                        found: name.type_name().into(),
                        offset: name_offset,
                    });
                };
                self.refs.push(name.clone());
                Ok(RObject::new(RValue::Symbol(name)))
            }
            LISTSXP => self.pairlist(flags, depth),
            ALTREP_SXP => self.altrep(offset, depth),
            CHARSXP => {
                let len_offset = self.pos;
                let n = self.int("a string's length")?;
                let value = if n == -1 {
                    None
                } else {
                    let n = usize::try_from(n).map_err(|_| RDataError::BadLength {
                        length: n.into(),
                        offset: len_offset,
                    })?;
                    let bytes = self.take(n, "a string's bytes")?;
                    Some(if levels & LATIN1_MASK != 0 {
                        bytes.iter().map(|&b| char::from(b)).collect()
                    } else {
                        String::from_utf8_lossy(bytes).into_owned()
                    })
                };
                if has_attr {
                    // R discards a CHARSXP's attributes.
                    self.item(depth + 1)?;
                }
                Ok(RObject::new(RValue::Char(value)))
            }
            LGLSXP | INTSXP | REALSXP | STRSXP | VECSXP => {
                let value = match code {
                    LGLSXP | INTSXP => {
                        let n = self.length(4)?;
                        let bytes = self.take(4 * n, "a vector's elements")?;
                        let ints = bytes.chunks_exact(4).map(|b| {
                            let v = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                            (v != NA_INTEGER).then_some(v)
                        });
                        if code == LGLSXP {
                            RValue::Logicals(ints.map(|v| v.map(|v| v != 0)).collect())
                        } else {
                            RValue::Integers(ints.collect())
                        }
                    }
                    REALSXP => {
                        let n = self.length(8)?;
                        let bytes = self.take(8 * n, "a vector's elements")?;
                        RValue::Reals(
                            bytes
                                .chunks_exact(8)
                                .map(|b| f64::from_be_bytes(b.try_into().expect("8 bytes")))
                                .collect(),
                        )
                    }
                    STRSXP => {
                        let n = self.length(4)?;
                        let mut strings = Vec::with_capacity(n);
                        for _ in 0..n {
                            let at = self.pos;
                            let s = self.item(depth + 1)?;
                            match s.value {
                                RValue::Char(s) => strings.push(s),
                                _ => {
                                    return Err(RDataError::Unexpected {
                                        expected: "a CHARSXP in a character vector",
                                        found: s.type_name().into(),
                                        offset: at,
                                    })
                                }
                            }
                        }
                        RValue::Strings(strings)
                    }
                    _ => {
                        let n = self.length(4)?;
                        let mut items = Vec::with_capacity(n);
                        for _ in 0..n {
                            items.push(self.item(depth + 1)?);
                        }
                        RValue::List(items)
                    }
                };
                let attributes = if has_attr {
                    self.attributes(depth)?
                } else {
                    Vec::new()
                };
                Ok(RObject { value, attributes })
            }
            _ => Err(Self::unsupported(code, offset)),
        }
    }

    /// The attribute pairlist that follows a vector.
    fn attributes(&mut self, depth: usize) -> Result<Vec<(String, RObject)>, RDataError> {
        let offset = self.pos;
        let list = self.item(depth + 1)?;
        attributes_of(list, offset)
    }

    /// A pairlist whose first cell's flags were `flags`; the CDR chain is followed iteratively.
    fn pairlist(&mut self, mut flags: u32, depth: usize) -> Result<RObject, RDataError> {
        let mut cells = Vec::new();
        let mut attributes = Vec::new();
        loop {
            if flags & HAS_ATTR != 0 {
                let attrs = self.attributes(depth)?;
                if cells.is_empty() {
                    attributes = attrs;
                }
            }
            let tag = if flags & HAS_TAG != 0 {
                let at = self.pos;
                let tag = self.item(depth + 1)?;
                match tag.value {
                    RValue::Symbol(s) => Some(s),
                    RValue::Null => None,
                    _ => {
                        return Err(RDataError::Unexpected {
                            expected: "a symbol as a pairlist tag",
                            found: tag.type_name().into(),
                            offset: at,
                        })
                    }
                }
            } else {
                None
            };
            let car = self.item(depth + 1)?;
            cells.push((tag, car));
            // The CDR: another LISTSXP cell continues the chain; NULL ends it.
            let offset = self.pos;
            let next = self.int("a pairlist's tail")? as u32;
            match next & 0xff {
                LISTSXP => flags = next,
                NILVALUE_SXP | NILSXP => break,
                code => {
                    return Err(match sexp_name(code) {
                        Some(name) => RDataError::Unexpected {
                            expected: "a pairlist cell or NULL as a pairlist's tail",
                            found: name.into(),
                            offset,
                        },
                        None => RDataError::UnknownSexp { code, offset },
                    })
                }
            }
        }
        Ok(RObject {
            value: RValue::Pairlist(cells),
            attributes,
        })
    }

    /// An ALTREP item: class info (a pairlist: class symbol, package symbol, type), state,
    /// attributes. Compact integer / real sequences and the `wrap_*` classes are expanded.
    fn altrep(&mut self, offset: usize, depth: usize) -> Result<RObject, RDataError> {
        let info = self.item(depth + 1)?;
        let class = match &info.value {
            RValue::Pairlist(cells) => match cells.first() {
                Some((
                    _,
                    RObject {
                        value: RValue::Symbol(s),
                        ..
                    },
                )) => s.clone(),
                _ => String::new(),
            },
            _ => String::new(),
        };
        if class.is_empty() {
            return Err(RDataError::Unexpected {
                expected: "an ALTREP class pairlist starting with a symbol",
                found: info.type_name().into(),
                offset,
            });
        }
        let state = self.item(depth + 1)?;
        let attr_offset = self.pos;
        let attr = self.item(depth + 1)?;
        let attributes = attributes_of(attr, attr_offset)?;
        let unsupported = || RDataError::UnsupportedAltrep {
            class: class.clone(),
            offset,
        };
        let value = match class.as_str() {
            "compact_intseq" | "compact_realseq" => {
                let info: Vec<f64> = match &state.value {
                    RValue::Reals(v) => v.clone(),
                    RValue::Integers(v) => {
                        v.iter().map(|v| v.map_or(f64::NAN, f64::from)).collect()
                    }
                    _ => return Err(unsupported()),
                };
                let [n, first, step] = info[..] else {
                    return Err(unsupported());
                };
                if !(n.fract() == 0.0 && first.is_finite() && step.is_finite()) {
                    return Err(unsupported());
                }
                if !(0.0..=MAX_COMPACT_LENGTH).contains(&n) {
                    return Err(RDataError::BadLength {
                        length: n as i64,
                        offset,
                    });
                }
                let n = n as usize;
                if class == "compact_intseq" {
                    let values = (0..n).map(|i| {
                        let v = first + step * i as f64;
                        (v.abs() <= f64::from(i32::MAX)).then_some(v as i32)
                    });
                    RValue::Integers(values.collect())
                } else {
                    RValue::Reals((0..n).map(|i| first + step * i as f64).collect())
                }
            }
            c if c.starts_with("wrap_") => match state.value {
                // The state is CONS(wrapped vector, metadata).
                RValue::Pairlist(mut cells) if !cells.is_empty() => cells.swap_remove(0).1.value,
                RValue::List(mut items) if !items.is_empty() => items.swap_remove(0).value,
                _ => return Err(unsupported()),
            },
            _ => return Err(unsupported()),
        };
        Ok(RObject { value, attributes })
    }
}

fn attributes_of(list: RObject, offset: usize) -> Result<Vec<(String, RObject)>, RDataError> {
    match list.value {
        RValue::Null => Ok(Vec::new()),
        RValue::Pairlist(cells) => Ok(cells
            .into_iter()
            .map(|(tag, value)| (tag.unwrap_or_default(), value))
            .collect()),
        _ => Err(RDataError::Unexpected {
            expected: "a pairlist of attributes",
            found: list.type_name().into(),
            offset,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::print_stdout, clippy::print_stderr)] // tests report their measured values
mod mutation_tests {
    //! Seeded mutants of a valid `.rds` / `.rda` stream (plain and gzip): truncation at every byte, byte
    //! flips, huge lengths over every 4-byte field, deep nesting. Each must give a typed
    //! [`RDataError`] or a correct read, never a panic (docs/reliability.md).

    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::io::Write;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    fn int(out: &mut Vec<u8>, v: i32) {
        out.extend(v.to_be_bytes());
    }

    fn charsxp(out: &mut Vec<u8>, s: &str) {
        int(out, 0x0004_0009);
        int(out, s.len() as i32);
        out.extend(s.as_bytes());
    }

    fn strsxp(out: &mut Vec<u8>, items: &[&str]) {
        int(out, 0x10);
        int(out, items.len() as i32);
        for s in items {
            charsxp(out, s);
        }
    }

    /// Attribute pairlist `names = items`, then `class = class`.
    fn attrs(out: &mut Vec<u8>, names: &[&str], class: &str) {
        int(out, 0x402);
        int(out, 1);
        charsxp(out, "names");
        strsxp(out, names);
        int(out, 0x402);
        int(out, 1);
        charsxp(out, "class");
        strsxp(out, &[class]);
        int(out, 0xfe);
    }

    /// A version-3 XDR stream: a data frame-like list (ints, strings, doubles) with attributes.
    fn valid_rds() -> Vec<u8> {
        let mut out = b"X\n".to_vec();
        for v in [3, 0x0004_0200, 0x0003_0500, 5] {
            int(&mut out, v);
        }
        out.extend(b"UTF-8");
        int(&mut out, 0x213); // VECSXP with attributes
        int(&mut out, 3);
        int(&mut out, 0x0d); // INTSXP
        int(&mut out, 3);
        for v in [1, 2, -2147483648] {
            int(&mut out, v);
        }
        strsxp(&mut out, &["pos", "neg", "pos"]);
        int(&mut out, 0x0e); // REALSXP
        int(&mut out, 3);
        for v in [0.5f64, -1.0, f64::NAN] {
            out.extend(v.to_be_bytes());
        }
        attrs(&mut out, &["id", "label", "score"], "list");
        out
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    fn nested(depth: usize) -> Vec<u8> {
        let mut out = valid_rds()[..23].to_vec();
        for _ in 0..depth {
            int(&mut out, 0x13);
            int(&mut out, 1);
        }
        int(&mut out, 0xfe);
        out
    }

    #[test]
    fn r_data_mutants_never_panic() {
        let base = valid_rds();
        read_rds(&base).expect("the unmutated stream reads");
        let mut rda = b"RDX3\n".to_vec();
        rda.extend(&base[..23]);
        rda.extend(0x402i32.to_be_bytes());
        rda.extend(1i32.to_be_bytes());
        charsxp(&mut rda, "frame");
        rda.extend(&base[23..]);
        rda.extend(0xfei32.to_be_bytes());
        read_rda(&rda).expect("the unmutated .rda reads");

        let mut mutants: Vec<(String, bool, Vec<u8>)> = Vec::new();
        for (name, is_rda, bytes) in [("rds", false, &base), ("rda", true, &rda)] {
            for at in 0..bytes.len() {
                mutants.push((
                    format!("{name} truncated at {at}"),
                    is_rda,
                    bytes[..at].to_vec(),
                ));
            }
            for at in (0..bytes.len().saturating_sub(4)).step_by(4) {
                for huge in [i32::MAX, -1, 1 << 30] {
                    let mut m = bytes.clone();
                    m[at..at + 4].copy_from_slice(&huge.to_be_bytes());
                    mutants.push((format!("{name}: {huge} at {at}"), is_rda, m));
                }
            }
        }
        for depth in [10, MAX_DEPTH, MAX_DEPTH + 1, 40_000] {
            mutants.push((format!("nested {depth}"), false, nested(depth)));
        }
        let mut rng = StdRng::seed_from_u64(24);
        for i in 0..600 {
            let (source, is_rda) = if i % 2 == 0 {
                (&base, false)
            } else {
                (&rda, true)
            };
            let mut m = source.clone();
            for _ in 0..rng.random_range(1..=4) {
                let at = rng.random_range(0..m.len());
                m[at] ^= rng.random_range(1..=255u8);
            }
            let m = if i % 3 == 0 {
                // A gzip stream of the mutant, itself cut or flipped.
                let mut z = gzip(&m);
                let at = rng.random_range(0..z.len());
                if rng.random_bool(0.5) {
                    z.truncate(at);
                } else {
                    z[at] ^= 0x5a;
                }
                z
            } else {
                m
            };
            mutants.push((format!("random mutant {i}"), is_rda, m));
        }
        let (mut read, mut errors, mut panics) = (0usize, 0usize, Vec::new());
        for (what, is_rda, bytes) in &mutants {
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                if *is_rda {
                    read_rda(bytes).map(|objects| {
                        for (_, object) in objects {
                            let _ = object.to_data_frame();
                        }
                    })
                } else {
                    read_rds(bytes).map(|object| {
                        let _ = object.to_data_frame();
                    })
                }
            }));
            match outcome {
                Ok(Ok(())) => read += 1,
                Ok(Err(_)) => errors += 1,
                Err(_) => panics.push(what.clone()),
            }
        }
        println!(
            "R data: {} mutants, {read} read, {errors} typed errors, {} panics",
            mutants.len(),
            panics.len()
        );
        assert!(mutants.len() >= 1000, "{} mutants", mutants.len());
        assert!(
            panics.is_empty(),
            "panics: {:?}",
            &panics[..panics.len().min(5)]
        );
    }
}
