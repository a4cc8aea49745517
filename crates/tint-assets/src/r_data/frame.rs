//! A data-frame view of an R object: named columns of equal length.

use super::RDataError;

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
