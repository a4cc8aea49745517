//! The XDR item reader: a cursor over a decompressed stream that reads one item at a time.

use super::sexp::*;
use super::{RDataError, RObject, RValue, MAX_COMPACT_LENGTH, MAX_DEPTH};

/// A cursor over a decompressed XDR stream.
pub(super) struct Reader<'a> {
    data: &'a [u8],
    pub(super) pos: usize,
    /// Referable objects (symbols) in order of appearance; REFSXP indices are 1-based.
    refs: Vec<String>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
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

    pub(super) fn header(&mut self) -> Result<(), RDataError> {
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
    pub(super) fn item(&mut self, depth: usize) -> Result<RObject, RDataError> {
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

/// `bytes` as printable ASCII with the rest escaped (`\x..`), for error messages.
pub(super) fn escape(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}
