//! The one table type of the reports: a header and rows of cells, rendered as a markdown table
//! (`| a | b |`, a separator row with each column's alignment, a row per line).

/// How a column's cells align in the rendered markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Left (the renderer's default): `---`.
    Left,
    /// Right (numbers): `---:`.
    Right,
}

impl Align {
    fn separator(self) -> &'static str {
        match self {
            Align::Left => "---",
            Align::Right => "---:",
        }
    }
}

/// A markdown table: a header, each column's alignment, and rows of cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles, every column left-aligned, and no row.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        Self {
            align: vec![Align::Left; header.len()],
            header,
            rows: Vec::new(),
        }
    }

    /// The same table with the columns from `from` on aligned `align` (numbers to the right).
    pub fn aligned_from(mut self, from: usize, align: Align) -> Self {
        for column in self.align.iter_mut().skip(from) {
            *column = align;
        }
        self
    }

    /// Appends a row. A row with fewer cells than the header is filled with empty cells; one with
    /// more cells than the header is an error in the caller's code (`debug_assert`) and is cut to
    /// the header's width in release builds.
    pub fn push_row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut row: Vec<String> = cells.into_iter().map(Into::into).collect();
        debug_assert!(
            row.len() <= self.header.len(),
            "a row of {} cells in a table of {} columns",
            row.len(),
            self.header.len()
        );
        row.resize(self.header.len(), String::new());
        self.rows.push(row);
    }

    /// Rows so far.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the table has no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The markdown: the header line, the separator line and one line per row, each ended by a
    /// newline.
    pub fn to_markdown(&self) -> String {
        let line = |cells: &[String]| {
            let mut out = String::from("|");
            for cell in cells {
                out.push(' ');
                out.push_str(cell);
                out.push_str(" |");
            }
            out.push('\n');
            out
        };
        let mut out = line(&self.header);
        out.push('|');
        for align in &self.align {
            out.push_str(align.separator());
            out.push('|');
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_renders_its_header_alignment_and_rows() {
        let mut table = Table::new(["what", "s", "x"]).aligned_from(1, Align::Right);
        assert!(table.is_empty());
        table.push_row(["a", "1.5", "2"]);
        table.push_row(["b"]);
        assert_eq!(table.len(), 2);
        assert_eq!(
            table.to_markdown(),
            "| what | s | x |\n|---|---:|---:|\n| a | 1.5 | 2 |\n| b |  |  |\n"
        );
        assert_eq!(Table::new(["a"]).to_markdown(), "| a |\n|---|\n");
    }
}
