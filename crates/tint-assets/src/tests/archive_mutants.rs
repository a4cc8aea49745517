#![allow(clippy::print_stdout)] // the test reports its measured counts

use std::fs;
use std::io::Write;

use super::*;
use crate::archive::{check_all_picked, extract, finish_held, Sink};
use crate::AssetError;

/// Seeded mutants of every archive kind the fetcher reads (tar.gz with a nested tar.gz, zip, .deb with
/// data.tar / .gz / .xz, an R lazy-load database): truncation at every structural boundary (ar and tar
/// headers, every 512-byte tar block) and at random points, byte flips, huge sizes in ar headers. Each
/// must give a typed error or a correct extraction, never a panic (docs/reliability.md).
#[test]
fn archive_mutants_never_panic() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::panic::{catch_unwind, AssertUnwindSafe};

    let dir = temp_dir("mutants");
    let inner = tar_gz(&[("inner/wanted.txt", b"nested")]);
    let tgz = tar_gz(&[
        ("package/data/a.txt", b"first"),
        ("package/one.json", b"{}"),
        ("package/inner.tar.gz", &inner),
    ]);
    let wanted: &[(&str, &[u8])] = &[
        ("./usr/share/fake/wanted.txt", b"odd-sized!"),
        ("./usr/share/fake/other.txt", b"no"),
    ];
    let data_tar = tar_plain(wanted);
    let (rdx, rdb) = lazy_load_db();
    let r_tar = tar_plain(&[
        ("./usr/lib/R/site-library/fake/data/Rdata.rdx", &rdx),
        ("./usr/lib/R/site-library/fake/data/Rdata.rdb", &rdb),
    ]);
    let zip_bytes = {
        let mut out = std::io::Cursor::new(Vec::new());
        let mut writer = zip::ZipWriter::new(&mut out);
        let options =
            zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        writer.start_file("package/one.json", options).unwrap();
        writer.write_all(b"{\"a\": 1}").unwrap();
        writer.start_file("package/data/b.txt", options).unwrap();
        writer.write_all(b"second").unwrap();
        writer.finish().unwrap();
        drop(writer);
        out.into_inner()
    };
    let fake_picks = fake_asset("").picks;
    let zip_picks: &[Pick] = &[Pick::File {
        member: "package/one.json",
        dest: "one.json",
    }];
    let cases: Vec<(&str, Vec<u8>, &[Pick])> = vec![
        ("fake.tgz", tgz, fake_picks),
        ("fake.zip", zip_bytes, zip_picks),
        ("plain.deb", deb("data.tar", &data_tar), DEB_PICKS),
        ("gz.deb", deb("data.tar.gz", &gz(&data_tar)), DEB_PICKS),
        ("xz.deb", deb("data.tar.xz", &xz(&data_tar)), DEB_PICKS),
        ("r.deb", deb("data.tar", &r_tar), R_PICKS),
    ];
    let run = |name: &str, bytes: &[u8], picks: &[Pick]| -> Result<(), AssetError> {
        let package = dir.join(name);
        fs::write(&package, bytes).unwrap();
        let out = dir.join("out");
        if out.exists() {
            fs::remove_dir_all(&out).unwrap();
        }
        let mut sink = Sink::new(&out);
        extract(&package, picks, &mut sink)?;
        finish_held(picks, &mut sink)?;
        check_all_picked(picks, &sink.extracted)
    };
    let mut rng = StdRng::seed_from_u64(25);
    let (mut mutants, mut loaded, mut errors, mut panics) = (0usize, 0usize, 0usize, vec![]);
    for (name, bytes, picks) in &cases {
        run(name, bytes, picks).unwrap_or_else(|e| panic!("{name} unmutated: {e:#}"));
        // Structural boundaries: the ar magic and every 60-byte member header, every 512-byte tar
        // block of plain tars, and the first 64 bytes (compression headers) byte by byte.
        let mut cuts: Vec<usize> = (0..64.min(bytes.len())).collect();
        cuts.extend((0..bytes.len()).step_by(512));
        if name.ends_with(".deb") {
            let mut pos = 8;
            while pos + 60 <= bytes.len() {
                cuts.extend([pos, pos + 16, pos + 48, pos + 58, pos + 60]);
                let size: usize = std::str::from_utf8(&bytes[pos + 48..pos + 58])
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                pos += 60 + size + size % 2;
            }
        }
        cuts.sort();
        cuts.dedup();
        let mut variants: Vec<(String, Vec<u8>)> = cuts
            .into_iter()
            .map(|at| (format!("{name} truncated at {at}"), bytes[..at].to_vec()))
            .collect();
        for i in 0..150 {
            let mut m = bytes.clone();
            let what = if name.ends_with(".deb") && i % 5 == 0 {
                // A huge or malformed size field in the last member header.
                let at = bytes.len() - 1 - bytes.iter().rev().position(|&b| b == b'`').unwrap();
                let field = at.saturating_sub(10);
                let values: [&[u8]; 4] =
                    [b"9999999999", b"-1        ", b"1e9       ", b"          "];
                let v = values[rng.random_range(0..values.len())];
                m[field..field + 10].copy_from_slice(v);
                format!("{name}: size field {}", String::from_utf8_lossy(v))
            } else if i % 3 == 0 {
                let at = rng.random_range(0..m.len());
                m.truncate(at);
                format!("{name}: random cut at {at}")
            } else {
                for _ in 0..rng.random_range(1..=4) {
                    let at = rng.random_range(0..m.len());
                    m[at] ^= rng.random_range(1..=255u8);
                }
                format!("{name}: flips {i}")
            };
            variants.push((what, m));
        }
        for (what, m) in variants {
            mutants += 1;
            match catch_unwind(AssertUnwindSafe(|| run(name, &m, picks))) {
                Ok(Ok(())) => loaded += 1,
                Ok(Err(e)) => {
                    assert!(!e.chain().is_empty());
                    errors += 1
                }
                Err(_) => panics.push(what),
            }
        }
    }
    println!(
        "archives: {mutants} mutants, {loaded} extracted, {errors} typed errors, {} panics",
        panics.len()
    );
    assert!(mutants >= 1000, "{mutants} mutants");
    assert!(
        panics.is_empty(),
        "panics: {:?}",
        &panics[..panics.len().min(5)]
    );
    fs::remove_dir_all(&dir).ok();
}
