// The digest of the sources a binary is built from: what a resume fingerprint compares, so a
// report made by one build resumes with any build of the same sources (a later commit that only
// changed documents, tests, scripts or results), and with no build of other sources.
//
// Shared by the build script (which computes it at build time, `TINT_SOURCE_DIGEST`) and the
// binary's tests (which recompute it), through `include!`: plain `std`, no dependencies but
// `sha2`.

/// The files at the workspace root that enter the program: the manifest, the lock file and
/// cargo's configuration (those present).
pub(crate) const TOP_FILES: [&str; 3] = ["Cargo.toml", "Cargo.lock", ".cargo/config.toml"];

/// The packages whose sources make the program, relative to the workspace root: `xtask` and every
/// folder under `crates/` and `vendor/`.
pub(crate) fn source_packages(root: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut packages = vec![std::path::PathBuf::from("xtask")];
    for parent in ["crates", "vendor"] {
        let dir = root.join(parent);
        if !dir.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                packages.push(std::path::Path::new(parent).join(entry.file_name()));
            }
        }
    }
    Ok(packages)
}

/// The files that make the program, relative to the workspace root, sorted: [`TOP_FILES`], and
/// each of [`source_packages`]' manifest, build script and everything under its `src/`; not
/// tests, benches, examples, documents or results.
pub(crate) fn source_files(root: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files: Vec<std::path::PathBuf> = TOP_FILES
        .iter()
        .filter(|top| root.join(top).is_file())
        .map(std::path::PathBuf::from)
        .collect();
    for package in source_packages(root)? {
        for name in ["Cargo.toml", "build.rs"] {
            if root.join(&package).join(name).is_file() {
                files.push(package.join(name));
            }
        }
        collect_files(root, &package.join("src"), &mut files)?;
    }
    files.sort();
    Ok(files)
}

/// Every file under `root/dir`, recursively, as paths relative to `root`.
fn collect_files(
    root: &std::path::Path,
    dir: &std::path::Path,
    files: &mut Vec<std::path::PathBuf>,
) -> std::io::Result<()> {
    let full = root.join(dir);
    if !full.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(&full)? {
        let entry = entry?;
        let path = dir.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            collect_files(root, &path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

/// SHA-256 (hex, first 16 digits) over [`source_files`]: each file's relative path (with `/`),
/// length and bytes.
pub(crate) fn source_digest(root: &std::path::Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for file in source_files(root)? {
        let name = file.to_string_lossy().replace('\\', "/");
        let bytes = std::fs::read(root.join(&file))?;
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(hex[..16].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_digest_is_the_digest_of_this_checkout() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        assert_eq!(source_digest(root).unwrap(), env!("TINT_SOURCE_DIGEST"));
    }

    #[test]
    fn a_source_change_changes_the_digest_and_a_test_change_does_not() {
        let root = std::env::temp_dir().join(format!("tint-source-digest-{}", std::process::id()));
        let write = |path: &str, text: &str| {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("Cargo.toml", "[workspace]");
        write("crates/a/Cargo.toml", "[package]");
        write("crates/a/src/lib.rs", "pub fn f() {}");
        write("crates/a/tests/t.rs", "#[test] fn t() {}");
        write("xtask/src/main.rs", "fn main() {}");
        let before = source_digest(&root).unwrap();
        let listed: Vec<String> = source_files(&root)
            .unwrap()
            .iter()
            .map(|f| f.to_string_lossy().replace('\\', "/"))
            .collect();
        assert_eq!(
            listed,
            [
                "Cargo.toml",
                "crates/a/Cargo.toml",
                "crates/a/src/lib.rs",
                "xtask/src/main.rs"
            ]
        );
        write("crates/a/tests/t.rs", "#[test] fn t() { assert!(true) }");
        write("docs/notes.md", "text");
        assert_eq!(source_digest(&root).unwrap(), before);
        write("crates/a/src/lib.rs", "pub fn f() { }");
        let edited = source_digest(&root).unwrap();
        assert_ne!(edited, before);
        write("crates/a/src/more.rs", "");
        assert_ne!(source_digest(&root).unwrap(), edited);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
