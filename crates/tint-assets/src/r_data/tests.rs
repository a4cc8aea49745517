//! The R data reader on streams written by hand with [`super::test_writer`]: every supported type,
//! data frames and factors, typed errors (moved from tint-eval's ICL tests with the reader).

use super::test_writer as rb;
use super::test_writer::rds_of;
use super::{read_rda, read_rds, Column, RDataError, RObject, RValue, MAX_DEPTH};

fn str_values(items: &[Option<&str>]) -> RValue {
    RValue::Strings(items.iter().map(|s| s.map(String::from)).collect())
}

#[test]
fn r_data_reads_every_supported_type() {
    use rb::*;
    // NILVALUE_SXP and NILSXP.
    assert_eq!(
        read_rds(&rds_of(&[0, 0, 0, 0xfe])).unwrap().value,
        RValue::Null
    );
    assert_eq!(
        read_rds(&rds_of(&[0, 0, 0, 0])).unwrap().value,
        RValue::Null
    );

    // STRSXP of CHARSXPs: ASCII, NA, UTF-8, Latin-1.
    let mut b = Vec::new();
    int(&mut b, 0x10);
    int(&mut b, 4);
    chars(&mut b, 64, Some(b"ab"));
    chars(&mut b, 0, None);
    chars(&mut b, 8, Some("é".as_bytes()));
    chars(&mut b, 4, Some(&[0xe9]));
    assert_eq!(
        read_rds(&rds_of(&b)).unwrap().value,
        str_values(&[Some("ab"), None, Some("é"), Some("é")])
    );

    // INTSXP with NA, LGLSXP with NA, REALSXP with NA_real_ (a NaN) and infinity.
    let mut b = Vec::new();
    ints(&mut b, 0, &[1, i32::MIN, -3]);
    assert_eq!(
        read_rds(&rds_of(&b)).unwrap().value,
        RValue::Integers(vec![Some(1), None, Some(-3)])
    );
    let mut b = Vec::new();
    int(&mut b, 0x0a);
    int(&mut b, 3);
    for v in [1, 0, i32::MIN] {
        int(&mut b, v);
    }
    assert_eq!(
        read_rds(&rds_of(&b)).unwrap().value,
        RValue::Logicals(vec![Some(true), Some(false), None])
    );
    let mut b = Vec::new();
    int(&mut b, 0x0e);
    int(&mut b, 3);
    for v in [1.5f64, f64::NEG_INFINITY, f64::NAN] {
        b.extend(v.to_be_bytes());
    }
    let RValue::Reals(v) = read_rds(&rds_of(&b)).unwrap().value else {
        panic!("not reals");
    };
    assert_eq!(&v[..2], &[1.5, f64::NEG_INFINITY]);
    assert!(v[2].is_nan());

    // A long length (-1, upper half, lower half).
    let mut b = Vec::new();
    int(&mut b, 0x0d);
    for v in [-1, 0, 2, 7, 8] {
        int(&mut b, v);
    }
    assert_eq!(
        read_rds(&rds_of(&b)).unwrap().value,
        RValue::Integers(vec![Some(7), Some(8)])
    );

    // SYMSXP, then a VECSXP whose attribute tags reuse it by REFSXP (index in the flags and, for
    // index 0, in the next word).
    let mut b = Vec::new();
    int(&mut b, 0x213);
    int(&mut b, 2);
    symbol(&mut b, "names"); // ref #1
    int(&mut b, 0x0e);
    int(&mut b, 0);
    int(&mut b, 0x402);
    int(&mut b, (1 << 8) | 0xff);
    strings(&mut b, 0, &[Some("s"), Some("r")]);
    int(&mut b, 0x402);
    int(&mut b, 0xff);
    int(&mut b, 1);
    strings(&mut b, 0, &[Some("again")]);
    int(&mut b, NIL);
    let list = read_rds(&rds_of(&b)).unwrap();
    assert_eq!(
        list.value,
        RValue::List(vec![
            RObject::new(RValue::Symbol("names".into())),
            RObject::new(RValue::Reals(vec![])),
        ])
    );
    assert_eq!(list.attributes.len(), 2);
    assert_eq!(list.string_attr("names").unwrap(), ["s", "r"]);

    // LISTSXP: a pairlist with attributes on its first cell, tags and an untagged cell.
    let mut b = Vec::new();
    int(&mut b, 0x602); // attributes + tag
    tag_cell(&mut b, "comment");
    strings(&mut b, 0, &[Some("hi")]);
    int(&mut b, NIL);
    symbol(&mut b, "a");
    ints(&mut b, 0, &[1]);
    int(&mut b, 0x02); // untagged second cell
    chars(&mut b, 64, Some(b"z"));
    int(&mut b, NIL);
    let pairlist = read_rds(&rds_of(&b)).unwrap();
    assert_eq!(
        pairlist.value,
        RValue::Pairlist(vec![
            (
                Some("a".into()),
                RObject::new(RValue::Integers(vec![Some(1)]))
            ),
            (None, RObject::new(RValue::Char(Some("z".into())))),
        ])
    );
    assert_eq!(pairlist.string_attr("comment").unwrap(), ["hi"]);

    // ALTREP compact_intseq (state c(n, first, step) as doubles) with attributes, and wrap_real.
    let altrep = |class: &str, state: &dyn Fn(&mut Vec<u8>), attrs: bool| {
        let mut b = Vec::new();
        int(&mut b, 238);
        int(&mut b, 0x02);
        symbol(&mut b, class);
        int(&mut b, 0x02);
        symbol(&mut b, "base");
        int(&mut b, 0x02);
        ints(&mut b, 0, &[13]);
        int(&mut b, NIL);
        state(&mut b);
        if attrs {
            tag_cell(&mut b, "names");
            strings(&mut b, 0, &[Some("a"), Some("b"), Some("c")]);
        }
        int(&mut b, NIL);
        read_rds(&rds_of(&b))
    };
    let seq = altrep(
        "compact_intseq",
        &|b| {
            int(b, 0x0e);
            int(b, 3);
            for v in [3.0f64, 10.0, -2.0] {
                b.extend(v.to_be_bytes());
            }
        },
        true,
    )
    .unwrap();
    assert_eq!(
        seq.value,
        RValue::Integers(vec![Some(10), Some(8), Some(6)])
    );
    assert_eq!(seq.string_attr("names").unwrap(), ["a", "b", "c"]);
    let wrapped = altrep(
        "wrap_real",
        &|b| {
            int(b, 0x02);
            int(b, 0x0e);
            int(b, 1);
            b.extend(2.5f64.to_be_bytes());
            int(b, 0x02);
            ints(b, 0, &[0, 0]);
            int(b, NIL);
        },
        false,
    )
    .unwrap();
    assert_eq!(wrapped.value, RValue::Reals(vec![2.5]));
    let err = altrep("deferred_string", &|b| int(b, NIL), false).unwrap_err();
    assert!(
        matches!(&err, RDataError::UnsupportedAltrep { class, offset: 23 } if class == "deferred_string"),
        "{err}"
    );

    // Gzip-compressed, and an .rda file (RDX3 + a tagged top-level pairlist).
    let mut b = Vec::new();
    ints(&mut b, 0, &[4]);
    assert_eq!(
        read_rds(&rb::gzip(&rds_of(&b))).unwrap().value,
        RValue::Integers(vec![Some(4)])
    );
    let mut rda = b"RDX3\n".to_vec();
    rda.extend(rds_of(&[]));
    tag_cell(&mut rda, "x");
    ints(&mut rda, 0, &[5]);
    tag_cell(&mut rda, "y");
    strings(&mut rda, 0, &[None]);
    int(&mut rda, NIL);
    let objects = read_rda(&rb::gzip(&rda)).unwrap();
    assert_eq!(objects.len(), 2);
    assert_eq!(objects[0].0, "x");
    assert_eq!(objects[1].1.value, str_values(&[None]));
}

#[test]
fn r_data_data_frames_and_factors() {
    let mut b = Vec::new();
    rb::fine_food_frame(
        &mut b,
        &[
            ("B01", Some("Yum"), 1),
            ("B02", None, 2),
            ("B03", Some("Meh"), i32::MIN),
        ],
    );
    let frame = read_rds(&rds_of(&b)).unwrap();
    assert!(frame.inherits("data.frame") && frame.inherits("tbl_df"));
    let df = frame.to_data_frame().unwrap();
    assert_eq!(df.n_rows, 3);
    let score = df.column("score").unwrap();
    assert!(matches!(score, Column::Factor { levels, .. } if levels == &["great", "other"]));
    assert_eq!(
        score.as_labels().unwrap(),
        vec![Some("great".into()), Some("other".into()), None]
    );
    assert_eq!(
        df.column("review").unwrap().as_labels().unwrap(),
        vec![Some("Yum".into()), None, Some("Meh".into())]
    );
    assert!(matches!(df.column("rating"), Err(RDataError::DataFrame(_))));
    // A plain list is no data frame.
    let list = RObject::new(RValue::List(vec![]));
    assert!(matches!(
        list.to_data_frame(),
        Err(RDataError::DataFrame(_))
    ));
}

#[test]
fn r_data_errors_are_typed() {
    use rb::*;
    let header_len = rb::header().len();
    // Truncation anywhere in a valid stream.
    let mut b = Vec::new();
    fine_food_frame(&mut b, &[("B01", Some("Good"), 1), ("B02", Some("Bad"), 2)]);
    let full = rds_of(&b);
    read_rds(&full).unwrap();
    for cut in header_len..full.len() {
        match read_rds(&full[..cut]) {
            Err(RDataError::Truncated { offset, .. }) => assert!(offset <= cut, "{cut}"),
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    for cut in 0..header_len {
        assert!(read_rds(&full[..cut]).is_err(), "{cut}");
    }
    // A truncated gzip layer.
    let zipped = rb::gzip(&full);
    assert!(matches!(
        read_rds(&zipped[..zipped.len() / 2]),
        Err(RDataError::Gzip(_))
    ));

    // Unknown and unsupported SEXP types, with the offset of their flags.
    let err = read_rds(&rds_of(&[0, 0, 0, 99])).unwrap_err();
    assert!(
        matches!(err, RDataError::UnknownSexp { code: 99, offset } if offset == header_len),
        "{err}"
    );
    let mut b = Vec::new();
    int(&mut b, 0x13);
    int(&mut b, 1);
    int(&mut b, 0x04); // ENVSXP inside a list
    let err = read_rds(&rds_of(&b)).unwrap_err();
    assert!(
        matches!(err, RDataError::UnsupportedSexp { name: "ENVSXP", code: 4, offset } if offset == header_len + 8),
        "{err}"
    );
    assert!(err.to_string().contains("ENVSXP"));
    for (code, name) in [
        (3i32, "CLOSXP"),
        (6, "LANGSXP"),
        (24, "RAWSXP"),
        (253, "GLOBALENV_SXP"),
    ] {
        let err = read_rds(&rds_of(&code.to_be_bytes())).unwrap_err();
        assert!(
            matches!(err, RDataError::UnsupportedSexp { name: n, .. } if n == name),
            "{err}"
        );
    }
    // A back reference before any symbol, a negative length, a symbol named by a non-string.
    let err = read_rds(&rds_of(&((3 << 8) | 0xff_i32).to_be_bytes())).unwrap_err();
    assert!(
        matches!(
            err,
            RDataError::BadReference {
                index: 3,
                known: 0,
                ..
            }
        ),
        "{err}"
    );
    let mut b = Vec::new();
    int(&mut b, 0x0d);
    int(&mut b, -5);
    assert!(matches!(
        read_rds(&rds_of(&b)),
        Err(RDataError::BadLength { length: -5, .. })
    ));
    let mut b = Vec::new();
    int(&mut b, 0x01);
    ints(&mut b, 0, &[1]);
    assert!(matches!(
        read_rds(&rds_of(&b)),
        Err(RDataError::Unexpected { .. })
    ));
    // A huge length is a truncation, not an allocation.
    let mut b = Vec::new();
    int(&mut b, 0x0e);
    int(&mut b, i32::MAX);
    assert!(matches!(
        read_rds(&rds_of(&b)),
        Err(RDataError::Truncated { .. })
    ));
    // Deep nesting.
    let mut b = Vec::new();
    for _ in 0..=MAX_DEPTH + 1 {
        int(&mut b, 0x13);
        int(&mut b, 1);
    }
    assert!(matches!(
        read_rds(&rds_of(&b)),
        Err(RDataError::TooDeep { .. })
    ));

    // Headers: other formats, versions, compressions, and an .rda given to read_rds.
    let mut ascii = b"A\n".to_vec();
    ascii.extend(&rb::header()[2..]);
    assert!(matches!(
        read_rds(&ascii),
        Err(RDataError::UnsupportedFormat { format: "ascii" })
    ));
    let mut v4 = rb::header();
    v4[5] = 4;
    assert!(matches!(
        read_rds(&v4),
        Err(RDataError::UnsupportedVersion { version: 4 })
    ));
    assert!(matches!(
        read_rds(b"BZh91AY&SY"),
        Err(RDataError::UnsupportedCompression { method: "bzip2" })
    ));
    assert!(matches!(
        read_rds(b"\xfd7zXZ\0\0"),
        Err(RDataError::UnsupportedCompression { method: "xz" })
    ));
    assert!(matches!(
        read_rds(b"hello"),
        Err(RDataError::BadMagic { .. })
    ));
    assert!(matches!(read_rda(&full), Err(RDataError::BadMagic { .. })));
}
