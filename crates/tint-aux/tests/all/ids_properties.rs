//! Property-based tests of the token-ids reader (issue 66 item 6): structured hostile files —
//! ragged, empty, negative, fractional, textual, null and out-of-`i64` ids, masks of other shapes
//! or values, unknown keys — generated from a description whose meaning an independent oracle
//! states. The reader must return exactly the described ids when the oracle says the file is
//! valid, and otherwise a typed `InvalidIds` error naming the file; never a panic, never a load of
//! anything else.

use std::path::Path;

use proptest::prelude::*;
use tint_aux::ids::TokenIds;
use tint_aux::AuxError;

/// One entry of a generated matrix.
#[derive(Debug, Clone)]
enum Entry {
    Int(i64),
    /// A number with a fraction.
    Fraction(f64),
    /// Beyond `i64` (`9223372036854775808` and more).
    Huge(u64),
    Text(String),
    Null,
}

impl Entry {
    fn json(&self) -> String {
        match self {
            Entry::Int(v) => v.to_string(),
            Entry::Fraction(v) => format!("{v:?}"),
            Entry::Huge(extra) => {
                format!("{}", u128::from(i64::MAX as u64) + 1 + u128::from(*extra))
            }
            Entry::Text(t) => format!("{t:?}"),
            Entry::Null => "null".into(),
        }
    }

    fn as_int(&self) -> Option<i64> {
        match self {
            Entry::Int(v) => Some(*v),
            _ => None,
        }
    }
}

fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![
        8 => (0i64..50_000).prop_map(Entry::Int),
        1 => (i64::MIN..0).prop_map(Entry::Int),
        1 => any::<i64>().prop_map(Entry::Int),
        1 => (-1e6f64..1e6).prop_filter("a fraction", |v| v.fract() != 0.0).prop_map(Entry::Fraction),
        1 => (0u64..1000).prop_map(Entry::Huge),
        1 => "[a-z0-9]{0,4}".prop_map(Entry::Text),
        1 => Just(Entry::Null),
    ]
}

/// Rows of entries: mostly rectangular (rows share a length), sometimes ragged or empty.
fn matrix(entries: BoxedStrategy<Entry>) -> impl Strategy<Value = Vec<Vec<Entry>>> {
    prop_oneof![
        4 => (1usize..4, 1usize..6).prop_flat_map(move |(rows, cols)| {
            prop::collection::vec(prop::collection::vec(entries.clone(), cols), rows)
        }),
        1 => prop::collection::vec(prop::collection::vec(entry(), 0..5), 0..4),
    ]
}

/// A described ids file.
#[derive(Debug, Clone)]
struct IdsFile {
    input_ids: Vec<Vec<Entry>>,
    train_mask: Option<Vec<Vec<Entry>>>,
    unknown_key: bool,
}

impl IdsFile {
    fn json(&self) -> String {
        let matrix = |m: &Vec<Vec<Entry>>| {
            let rows: Vec<String> = m
                .iter()
                .map(|r| {
                    format!(
                        "[{}]",
                        r.iter().map(Entry::json).collect::<Vec<_>>().join(", ")
                    )
                })
                .collect();
            format!("[{}]", rows.join(", "))
        };
        let mut fields = vec![format!("\"input_ids\": {}", matrix(&self.input_ids))];
        if let Some(mask) = &self.train_mask {
            fields.push(format!("\"train_mask\": {}", matrix(mask)));
        }
        if self.unknown_key {
            fields.push("\"attention_mask\": [[1]]".into());
        }
        format!("{{{}}}", fields.join(", "))
    }

    /// The oracle: the ids the file means, or `None` when the reader must refuse it.
    fn meaning(&self) -> Option<TokenIds> {
        let ints = |m: &Vec<Vec<Entry>>| -> Option<Vec<Vec<i64>>> {
            m.iter()
                .map(|r| r.iter().map(Entry::as_int).collect())
                .collect()
        };
        let rectangular = |m: &Vec<Vec<i64>>| {
            !m.is_empty() && !m[0].is_empty() && m.iter().all(|r| r.len() == m[0].len())
        };
        if self.unknown_key {
            return None;
        }
        let input_ids = ints(&self.input_ids)?;
        if !rectangular(&input_ids) || input_ids.iter().flatten().any(|&id| id < 0) {
            return None;
        }
        let train_mask = match &self.train_mask {
            None => None,
            Some(mask) => {
                let mask = ints(mask)?;
                let same_shape = rectangular(&mask)
                    && mask.len() == input_ids.len()
                    && mask[0].len() == input_ids[0].len();
                if !same_shape || mask.iter().flatten().any(|&m| m != 0 && m != 1) {
                    return None;
                }
                Some(mask)
            }
        };
        Some(TokenIds {
            input_ids,
            train_mask,
        })
    }
}

fn ids_file() -> impl Strategy<Value = IdsFile> {
    let mask_entry = prop_oneof![
        6 => (0i64..2).prop_map(Entry::Int),
        1 => entry(),
    ]
    .boxed();
    (
        matrix(entry().boxed()),
        prop::option::weighted(0.5, matrix(mask_entry)),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(input_ids, train_mask, unknown_key)| IdsFile {
            input_ids,
            train_mask,
            unknown_key,
        })
}

/// A mask that is valid for the ids it sits beside half of the time.
fn ids_file_with_fitting_mask() -> impl Strategy<Value = IdsFile> {
    (1usize..4, 1usize..6).prop_flat_map(|(rows, cols)| {
        (
            prop::collection::vec(prop::collection::vec(0i64..50_000, cols), rows),
            prop::collection::vec(prop::collection::vec(0i64..2, cols), rows),
        )
            .prop_map(|(ids, mask)| IdsFile {
                input_ids: ids
                    .into_iter()
                    .map(|r| r.into_iter().map(Entry::Int).collect())
                    .collect(),
                train_mask: Some(
                    mask.into_iter()
                        .map(|r| r.into_iter().map(Entry::Int).collect())
                        .collect(),
                ),
                unknown_key: false,
            })
    })
}

fn check(file: &IdsFile) -> Result<(), TestCaseError> {
    let path = Path::new("hostile/ids.json");
    let text = file.json();
    match (TokenIds::parse(&text, path), file.meaning()) {
        (Ok(read), Some(meant)) => prop_assert_eq!(read, meant, "{}", text),
        (Err(AuxError::InvalidIds { path: named, .. }), None) => {
            prop_assert_eq!(named, path.to_path_buf())
        }
        (Ok(read), None) => prop_assert!(false, "accepted {text}: {read:?}"),
        (Err(e), meaning) => prop_assert!(false, "{text}: {e} (oracle {meaning:?})"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn an_ids_file_is_read_as_it_means_or_refused_by_name(file in ids_file()) {
        check(&file)?;
    }

    #[test]
    fn a_fitting_mask_is_read_beside_its_ids(file in ids_file_with_fitting_mask()) {
        prop_assert!(file.meaning().is_some());
        check(&file)?;
    }
}

/// Generated files per property (each parses in microseconds).
const CASES: u32 = 2000;
