//! Property-based test of the R data reader (issue 66 item 6): data frames of the Amazon
//! fine-food shape (`product`, `review`, a `score` factor) generated with arbitrary text, NA
//! reviews and factor codes in and out of range, written as `.rds` (plain or gzip), sometimes with
//! a column one row short or `row.names` counting other rows. An oracle says what each file means:
//! a consistent frame must read back as exactly its rows (an out-of-range code as NA, as documented
//! on [`super::Column::as_labels`]); an inconsistent one must be refused with a typed error.

use proptest::prelude::*;

use super::test_writer::*;
use super::{read_rds, Column, RDataError};

/// A generated frame: the columns as written and the row count `row.names` states.
#[derive(Debug, Clone)]
struct Frame {
    products: Vec<String>,
    reviews: Vec<Option<String>>,
    codes: Vec<i32>,
    row_names: i32,
    gzipped: bool,
}

impl Frame {
    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        int(&mut out, 0x313); // VECSXP, object, attributes
        int(&mut out, 3);
        let products: Vec<Option<&str>> = self.products.iter().map(|p| Some(p.as_str())).collect();
        strings(&mut out, 0, &products);
        let reviews: Vec<Option<&str>> = self.reviews.iter().map(Option::as_deref).collect();
        strings(&mut out, 0, &reviews);
        ints(&mut out, 0x300, &self.codes);
        tag_cell(&mut out, "levels");
        strings(&mut out, 0, &[Some("great"), Some("other")]);
        tag_cell(&mut out, "class");
        strings(&mut out, 0, &[Some("factor")]);
        int(&mut out, NIL);
        tag_cell(&mut out, "class");
        strings(
            &mut out,
            0,
            &[Some("tbl_df"), Some("tbl"), Some("data.frame")],
        );
        tag_cell(&mut out, "row.names");
        ints(&mut out, 0, &[i32::MIN, -self.row_names]);
        tag_cell(&mut out, "names");
        strings(
            &mut out,
            0,
            &[Some("product"), Some("review"), Some("score")],
        );
        int(&mut out, NIL);
        let rds = rds_of(&out);
        if self.gzipped {
            gzip(&rds)
        } else {
            rds
        }
    }

    /// The oracle: the three columns as labels, or `None` when the frame is inconsistent.
    #[allow(clippy::type_complexity)]
    fn meaning(&self) -> Option<(Vec<String>, Vec<Option<String>>, Vec<Option<String>>)> {
        let n = self.products.len();
        if self.reviews.len() != n || self.codes.len() != n || self.row_names as usize != n {
            return None;
        }
        let score = self
            .codes
            .iter()
            .map(|&c| match c {
                1 => Some("great".to_string()),
                2 => Some("other".to_string()),
                _ => None, // NA (i32::MIN) and out-of-range codes
            })
            .collect();
        Some((self.products.clone(), self.reviews.clone(), score))
    }
}

fn frame() -> impl Strategy<Value = Frame> {
    (0usize..6).prop_flat_map(|n| {
        let code = prop_oneof![6 => 1i32..3, 1 => Just(i32::MIN), 1 => -3i32..6];
        (
            prop::collection::vec("\\PC{0,12}", n),
            prop::collection::vec(prop::option::weighted(0.8, "\\PC{0,20}"), n),
            prop::collection::vec(code, n),
            // Which column (if any) loses its last row, and how far row.names is off.
            prop_oneof![6 => Just(3usize), 1 => 0usize..3],
            prop_oneof![6 => Just(0i32), 1 => -2i32..3],
            any::<bool>(),
        )
            .prop_map(move |(products, reviews, codes, short, off, gzipped)| {
                let mut frame = Frame {
                    products,
                    reviews,
                    codes,
                    row_names: (n as i32 + off).max(0),
                    gzipped,
                };
                match short {
                    0 => drop(frame.products.pop()),
                    1 => drop(frame.reviews.pop()),
                    2 => drop(frame.codes.pop()),
                    _ => {}
                }
                frame
            })
    })
}

fn labels(column: &Column) -> Vec<Option<String>> {
    column.as_labels().expect("text or factor column")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn a_data_frame_reads_as_its_rows_or_is_refused(frame in frame()) {
        let read = read_rds(&frame.bytes()).and_then(|object| object.to_data_frame());
        match (read, frame.meaning()) {
            (Ok(df), Some((products, reviews, score))) => {
                prop_assert_eq!(df.n_rows, products.len());
                let products: Vec<Option<String>> = products.into_iter().map(Some).collect();
                prop_assert_eq!(labels(df.column("product").unwrap()), products);
                prop_assert_eq!(labels(df.column("review").unwrap()), reviews);
                prop_assert_eq!(labels(df.column("score").unwrap()), score);
            }
            (Err(RDataError::DataFrame(_)), None) => {}
            (Ok(df), None) => prop_assert!(false, "{frame:?} was read: {df:?}"),
            (Err(e), meaning) => prop_assert!(false, "{frame:?}: {e} (oracle {meaning:?})"),
        }
    }
}

/// Generated files (each parses in microseconds).
const CASES: u32 = 2000;
