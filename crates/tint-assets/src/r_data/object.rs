//! R objects: a value and its attributes.

use super::{Column, DataFrame, RDataError};

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

    /// How many rows the `row.names` attribute names, if it has one: R's compact form
    /// `c(NA, -n)` (or `c(NA, n)`) counts `n`, any other vector its length.
    fn row_names_count(&self) -> Option<usize> {
        let names = self.attr("row.names")?;
        Some(match &names.value {
            RValue::Integers(v) if v.len() == 2 && v[0].is_none() => {
                v[1].map_or(0, |n| n.unsigned_abs() as usize)
            }
            RValue::Integers(v) => v.len(),
            RValue::Strings(v) => v.len(),
            RValue::Reals(v) => v.len(),
            RValue::Logicals(v) => v.len(),
            _ => return None,
        })
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
        if let Some(named) = self.row_names_count() {
            if named != n_rows {
                return Err(bad(format!(
                    "row.names count {named} rows, the columns {n_rows}"
                )));
            }
        }
        Ok(DataFrame {
            columns: out,
            n_rows,
        })
    }
}
