//! Tests of the archive readers, the install step and the R lazy-load extraction (moved from
//! `xtask/src/fetch.rs`), with their fixtures: tar / zip / ar / .deb writers and a lazy-load database
//! written with the shared R writer [`crate::r_data::test_writer`].

mod archive_mutants;
mod install;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::checksum::sha256_file;
use crate::manifest::{Asset, Client, Pick};
use crate::r_data::test_writer as r;

pub(super) fn tar_gz(members: &[(&str, &[u8])]) -> Vec<u8> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    for (path, data) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, path, *data).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

pub(super) fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tint-fetch-{tag}-{}", std::process::id()));
    if dir.exists() {
        fs::remove_dir_all(&dir).unwrap();
    }
    fs::create_dir_all(&dir).unwrap();
    dir
}

pub(super) const NESTED_PICKS: &[Pick] = &[Pick::File {
    member: "inner/wanted.txt",
    dest: "wanted.txt",
}];

pub(super) fn fake_asset(sha256: &'static str) -> Asset {
    Asset {
        name: "fake",
        description: "test",
        client: Client::Npm { spec: "fake@0" },
        package_file: "fake.tgz",
        sha256,
        picks: &[
            Pick::Dir {
                prefix: "package/data/",
                suffix: ".txt",
                dest_dir: "data",
            },
            Pick::File {
                member: "package/one.json",
                dest: "one.json",
            },
            Pick::Nested {
                member: "package/inner.tar.gz",
                picks: NESTED_PICKS,
            },
        ],
        main_path: "data",
    }
}

pub(super) fn tar_plain(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, path, *data).unwrap();
    }
    builder.into_inner().unwrap()
}

pub(super) fn xz(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    lzma_rs::xz_compress(&mut std::io::BufReader::new(bytes), &mut out).unwrap();
    out
}

pub(super) fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// A Unix `ar` archive (GNU-style names ending in `/`, odd sizes padded with `\n`).
pub(super) fn ar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = b"!<arch>\n".to_vec();
    for (name, data) in members {
        let header = format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            format!("{name}/"),
            0,
            0,
            0,
            100644,
            data.len()
        );
        assert_eq!(header.len(), 60);
        out.extend(header.as_bytes());
        out.extend(*data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    out
}

pub(super) fn deb(data_name: &str, data: &[u8]) -> Vec<u8> {
    ar(&[
        ("debian-binary", b"2.0\n"),
        (
            "control.tar.gz",
            &tar_gz(&[("./control", b"Package: fake\n")]),
        ),
        (data_name, data),
    ])
}

pub(super) const DEB_PICKS: &[Pick] = &[Pick::File {
    member: "usr/share/fake/wanted.txt",
    dest: "wanted.txt",
}];

pub(super) fn deb_asset(sha256: &'static str, picks: &'static [Pick]) -> Asset {
    Asset {
        name: "fake-deb",
        description: "test",
        client: Client::Apt {
            package: "fake",
            version: "1.0-1",
        },
        package_file: "fake_1.0-1_all.deb",
        sha256,
        picks,
        main_path: "",
    }
}

pub(super) fn leak_hash(path: &Path) -> &'static str {
    Box::leak(sha256_file(path).unwrap().into_boxed_str())
}

pub(super) fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.extend(walk(&path).into_iter().map(|f| format!("{name}/{f}")));
        } else {
            out.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    out
}

/// An `.rdx` index and `.rdb` data holding `alpha` = c("x", "y") (raw LZMA2, type `Z`) and
/// `beta` = 1:3 (stored, type `0`), compression scheme 3.
pub(super) fn lazy_load_db() -> (Vec<u8>, Vec<u8>) {
    let mut alpha = r::header();
    r::strings(&mut alpha, 0, &[Some("x"), Some("y")]);
    let mut beta = r::header();
    r::ints(&mut beta, 0, &[1, 2, 3]);
    let mut rdb = Vec::new();
    let mut locations = Vec::new();
    for (kind, object) in [(b'Z', &alpha), (b'0', &beta)] {
        let start = rdb.len();
        rdb.extend((object.len() as u32).to_be_bytes());
        rdb.push(kind);
        if kind == b'Z' {
            lzma_rs::lzma2_compress(&mut object.as_slice(), &mut rdb).unwrap();
        } else {
            rdb.extend(object);
        }
        locations.push([start as i32, (rdb.len() - start) as i32]);
    }
    let mut rdx = r::header();
    r::int(&mut rdx, 0x213); // list with attributes
    r::int(&mut rdx, 3);
    r::int(&mut rdx, 0x213); // variables
    r::int(&mut rdx, 2);
    for l in &locations {
        r::ints(&mut rdx, 0, l);
    }
    r::names_attr(&mut rdx, &["alpha", "beta"]);
    r::int(&mut rdx, 0x13); // references: empty list
    r::int(&mut rdx, 0);
    r::ints(&mut rdx, 0, &[3]); // compressed
    r::names_attr(&mut rdx, &["variables", "references", "compressed"]);
    (gz(&rdx), rdb)
}

pub(super) const R_PICKS: &[Pick] = &[Pick::RLazyLoad {
    db: "usr/lib/R/site-library/fake/data/Rdata",
    objects: &["alpha", "beta"],
}];

/// [`crate::install_from_package`] without progress reporting.
pub(super) fn install(
    asset: &Asset,
    package: &Path,
    cache: &Path,
) -> Result<(), crate::AssetError> {
    crate::install_from_package(asset, package, cache, &mut |_| {})
}

/// Whether the cache directory `dir` holds a complete copy of `asset`.
pub(super) fn manifest_ok(asset: &Asset, dir: &Path) -> bool {
    crate::cache::cache_status(asset, dir).is_complete()
}
