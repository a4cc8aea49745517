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
    // Rerun when a hashed file changes, or a file is added under a `src/` (cargo scans
    // directories); a new member changes the root manifest.
    let files = source_files(&root).expect("listed above");
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let mut src_dirs: Vec<_> = files
        .iter()
        .filter_map(|f| {
            let mut dir = f.as_path();
            while let Some(parent) = dir.parent() {
                if dir.ends_with("src") {
                    return Some(dir.to_path_buf());
                }
                dir = parent;
            }
            None
        })
        .collect();
    src_dirs.dedup();
    for dir in src_dirs {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
}
