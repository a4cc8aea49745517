#![allow(clippy::print_stdout, clippy::print_stderr)] // tests report their measured values
//! Seeded mutants of a valid `.rds` / `.rda` stream (plain and gzip): truncation at every byte, byte
//! flips, huge lengths over every 4-byte field, deep nesting. Each must give a typed
//! [`super::RDataError`] or a correct read, never a panic (docs/reliability.md).

use super::test_writer::*;
use super::{read_rda, read_rds, MAX_DEPTH};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Attribute pairlist `names = items`, then `class = class`.
fn attrs(out: &mut Vec<u8>, names: &[&str], class: &str) {
    tag_cell(out, "names");
    let names: Vec<Option<&str>> = names.iter().copied().map(Some).collect();
    strings(out, 0, &names);
    tag_cell(out, "class");
    strings(out, 0, &[Some(class)]);
    int(out, NIL);
}

/// A version-3 XDR stream: a data frame-like list (ints, strings, doubles) with attributes.
fn valid_rds() -> Vec<u8> {
    let mut out = header();
    int(&mut out, 0x213); // VECSXP with attributes
    int(&mut out, 3);
    ints(&mut out, 0, &[1, 2, i32::MIN]);
    strings(&mut out, 0, &[Some("pos"), Some("neg"), Some("pos")]);
    reals(&mut out, &[0.5, -1.0, f64::NAN]);
    attrs(&mut out, &["id", "label", "score"], "list");
    out
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
    tag_cell(&mut rda, "frame");
    rda.extend(&base[23..]);
    int(&mut rda, NIL);
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
