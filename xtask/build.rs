//! Computes the digest of the sources this binary is built from (`src/source_digest.rs`) and
//! hands it to the program as `TINT_SOURCE_DIGEST`, the code version of resume fingerprints.

include!("src/source_digest.rs");

fn main() {
    let manifest_dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let root = manifest_dir
        .parent()
        .expect("xtask sits in the workspace root")
        .to_path_buf();
    let digest = match source_digest(&root) {
        Ok(digest) => digest,
        Err(e) => panic!(
            "cannot read the workspace sources under {} for the code version: {e}",
            root.display()
        ),
    };
    println!("cargo:rustc-env=TINT_SOURCE_DIGEST={digest}");
    // Rerun when a hashed file changes or a file is added under a `src/` (cargo scans a
    // directory's files recursively); a new member changes the root manifest. Only paths that
    // exist: cargo reruns a script on every build while one it names is missing.
    let packages = source_packages(&root).expect("listed by source_digest above");
    let watched = TOP_FILES.iter().map(std::path::PathBuf::from).chain(
        packages
            .iter()
            .flat_map(|p| ["Cargo.toml", "build.rs", "src"].map(|name| p.join(name))),
    );
    for path in watched.map(|p| root.join(p)).filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
