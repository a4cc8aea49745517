//! The command-line cases of issue 20's "Why" list, replayed against the built `xtask` binary on
//! the committed micro GPT-2 (the loader cases are in `crates/tint-aux/tests/all/hostile_inputs.rs`):
//!
//! - no silent NaN in `eval lm` / `eval icl`: a NaN weight or a step of 1e300 fails with the method,
//!   the block or example and where the value first appeared; `--allow-non-finite` records it;
//! - `eval lm --out x.md` is refused before anything is read or written;
//! - `eval lm --resume --methods vanilla` on a two-method report keeps both methods' cells;
//! - `logits` fails on non-finite logits naming a NaN weight or the simulated update of
//!   `--inner-lr 1e300`, and on an all-zero `train_mask`, writing nothing;
//! - `eval lm --resume` refuses a report made from other checkpoint content, and recomputes a
//!   hand-edited cell (perplexity −5);
//! - `logits --out` on a symlink writes its target and keeps the link; `--out /dev/null` leaves the
//!   device node a character device; new outputs get mode `0666 & !umask` (0644 under umask 022);
//!   an output path that cannot be created is named in the error;
//! - a failed command states each cause once and exits with status 1.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn micro() -> PathBuf {
    root().join("fixtures/official-tint/micro-gpt2-random")
}

fn text() -> PathBuf {
    root().join("fixtures/text/sotu-1790-washington.txt")
}

/// A fresh scratch directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tint-cli-probe-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `xtask ARGS` under umask 022 (so file modes are known).
fn xtask(args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg("umask 022; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the command failed and its stderr holds every one of `needles`.
fn fails_with(output: &Output, needles: &[&str]) {
    let err = stderr(output);
    assert!(!output.status.success(), "must fail; stderr:\n{err}");
    for needle in needles {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
}

fn succeeds(output: &Output) {
    assert!(
        output.status.success(),
        "must succeed; stderr:\n{}",
        stderr(output)
    );
}

/// A copy of the micro GPT-2 whose `transformer.h.1.mlp.c_fc.weight` starts with a NaN.
fn poisoned(dir: &Path) -> PathBuf {
    let model = dir.join("nan-model");
    std::fs::create_dir_all(&model).unwrap();
    for file in ["config.json", "tokenizer.json", "vocab.json", "merges.txt"] {
        std::fs::copy(micro().join(file), model.join(file)).unwrap();
    }
    let mut bytes = std::fs::read(micro().join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let offset = header["transformer.h.1.mlp.c_fc.weight"]["data_offsets"][0]
        .as_u64()
        .unwrap() as usize;
    bytes[8 + n + offset..8 + n + offset + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(model.join("model.safetensors"), bytes).unwrap();
    model
}

/// `eval lm` on the fixture text with small blocks; `extra` adds or overrides flags.
fn eval_lm(model: &Path, out: &Path, extra: &[&str]) -> Output {
    let text = text();
    let mut args = vec![
        "eval",
        "lm",
        "--model",
        model.to_str().unwrap(),
        "--text",
        text.to_str().unwrap(),
        "--block-size",
        "32",
        "--max-blocks",
        "2",
        "--train-fraction",
        "0.5",
        "--tune-blocks",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    xtask(&args)
}

/// `cargo xtask eval icl` of the task `mr` read from `data` with `model`, writing `out`; `extra`
/// holds the rest (methods, shots, seeds, sizes).
fn eval_icl(model: &Path, data: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "eval",
        "icl",
        "--model",
        model.to_str().unwrap(),
        "--task",
        "mr",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    xtask(&args)
}

/// Labelled examples as the JSON lines of a standard-layout task file.
fn jsonl_lines(texts: &[(&str, u8)]) -> String {
    texts
        .iter()
        .map(|(t, l)| format!("{}\n", serde_json::json!({"text": t, "label": l})))
        .collect()
}

/// A task folder `DIR/mr` with `pool` as its `train.jsonl` and `test` as its `test.jsonl`.
fn icl_data(dir: &Path, pool: &[(&str, u8)], test: &[(&str, u8)]) -> PathBuf {
    let data = dir.join("mr");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("train.jsonl"), jsonl_lines(pool)).unwrap();
    std::fs::write(data.join("test.jsonl"), jsonl_lines(test)).unwrap();
    data
}

/// The evaluation examples of the small ICL tasks: one of each class.
const TWO_TEST_EXAMPLES: &[(&str, u8)] = &[("lovely film", 1), ("awful plot", 0)];

/// A task folder `DIR/mr` whose pool repeats `("good", 1), ("bad", 0)` `pairs` times, evaluated on
/// [`TWO_TEST_EXAMPLES`].
fn good_bad_task(dir: &Path, pairs: usize) -> PathBuf {
    icl_data(
        dir,
        &[("good", 1), ("bad", 0)].repeat(pairs),
        TWO_TEST_EXAMPLES,
    )
}

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn eval_lm_names_a_nan_weight_and_records_it_only_when_allowed() {
    let dir = scratch("lm-nan");
    let model = poisoned(&dir);
    let out = dir.join("lm.json");
    let run = eval_lm(&model, &out, &["--methods", "vanilla"]);
    fails_with(
        &run,
        &[
            "--allow-non-finite",
            "method vanilla: non-finite NLL",
            "evaluation block 0 at train fraction 0.5",
            "checkpoint weights: weight `transformer.h.1.mlp.c_fc.weight` in ",
            "nan-model/model.safetensors (1 of 4096 values non-finite)",
        ],
    );
    assert!(!out.exists(), "nothing is written for a failed cell");
    // The adaptive methods are tuned first: every grid value diverges, and the error says why.
    let run = eval_lm(&model, &out, &["--methods", "vanilla,dyn-eval"]);
    fails_with(
        &run,
        &[
            "none can be chosen",
            "(eta = 1e-5, tuning)",
            "checkpoint weights",
        ],
    );
    // Recorded when allowed: NaN as null, the run finishes.
    let run = eval_lm(
        &model,
        &out,
        &["--methods", "vanilla", "--allow-non-finite"],
    );
    succeeds(&run);
    let json = report(&out);
    assert!(
        json["results"][0]["blocks"][0]["sum_nll"].is_null(),
        "{json}"
    );
    assert!(stderr(&run).contains("non-finite NLL recorded"));
    assert_eq!(mode(&out), 0o644);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn eval_lm_names_the_update_of_a_1e300_step() {
    let dir = scratch("lm-step");
    let run = eval_lm(
        &micro(),
        &dir.join("lm.json"),
        &["--methods", "tint-ref", "--inner-lr", "1e300"],
    );
    fails_with(
        &run,
        &[
            "method tint-ref: non-finite NLL",
            "so it first appears in the update (tint-ref: inner_lr 1e300, 1 simulated step(s))",
        ],
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn eval_icl_names_a_nan_weight_and_records_it_only_when_allowed() {
    let dir = scratch("icl-nan");
    let model = poisoned(&dir);
    let pool = [
        ("a joy", 1),
        ("so dull", 0),
        ("great fun", 1),
        ("a mess", 0),
        ("moving", 1),
        ("boring", 0),
    ];
    let data = icl_data(&dir, &pool, TWO_TEST_EXAMPLES);
    let out = dir.join("icl.json");
    let icl = |extra: &[&str]| {
        let mut args = vec![
            "--methods",
            "icl",
            "--shots",
            "0",
            "--seeds",
            "0",
            "--n-test",
            "2",
            "--n-dev",
            "2",
            "--max-input-tokens",
            "16",
        ];
        args.extend_from_slice(extra);
        eval_icl(&model, &data, &out, &args)
    };
    fails_with(
        &icl(&[]),
        &[
            "--allow-non-finite",
            "method icl: non-finite label-word score",
            "the calibration prompt",
            "checkpoint weights: weight",
        ],
    );
    let run = icl(&["--allow-non-finite"]);
    succeeds(&run);
    assert!(stderr(&run).contains("2 prediction(s) from non-finite scores recorded"));
    let json = report(&out);
    assert!(
        json["cells"][0]["runs"][0]["predictions"][0]["scores"][0].is_null(),
        "{json}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn eval_lm_refuses_a_markdown_out_and_resume_keeps_other_methods() {
    let dir = scratch("lm-out");
    let md = dir.join("x.md");
    std::fs::write(&md, "# notes\n").unwrap();
    let run = eval_lm(&micro(), &md, &["--methods", "vanilla"]);
    fails_with(&run, &["--out", "x.md", ".json"]);
    assert_eq!(std::fs::read_to_string(&md).unwrap(), "# notes\n");
    assert!(!dir.join("x.json").exists());

    let out = dir.join("lm.json");
    let first = eval_lm(
        &micro(),
        &out,
        &["--methods", "vanilla,dyn-eval", "--inner-lr", "1e-3"],
    );
    succeeds(&first);
    let before = report(&out);
    assert_eq!(before["results"].as_array().unwrap().len(), 2);
    let resumed = eval_lm(
        &micro(),
        &out,
        &["--methods", "vanilla", "--inner-lr", "1e-3", "--resume"],
    );
    succeeds(&resumed);
    let after = report(&out);
    let methods: Vec<&str> = after["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["vanilla", "dyn-eval"], "merge keeps dyn-eval");
    assert_eq!(
        after["results"][1], before["results"][1],
        "the dyn-eval cell is kept as stored"
    );
    assert!(stderr(&resumed).contains("resuming: 2 stored cells"));
    for file in ["lm.json", "lm.md", "lm.svg", "lm-paired.svg"] {
        assert_eq!(mode(&dir.join(file)), 0o644, "{file}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn logits_out_writes_through_symlinks_and_leaves_dev_null_a_device() {
    let dir = scratch("logits");
    let ids = dir.join("ids.json");
    std::fs::write(&ids, r#"{"input_ids": [[1, 2, 3, 4]]}"#).unwrap();
    let target = dir.join("real.safetensors");
    let link = dir.join("link.safetensors");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let logits = |out: &Path| {
        xtask(&[
            "logits",
            "--model",
            micro().to_str().unwrap(),
            "--ids",
            ids.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    succeeds(&logits(&link));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link is kept"
    );
    let bytes = std::fs::read(&target).unwrap();
    assert!(bytes.len() > 4 * 4 * 4096, "the target holds the logits");
    assert_eq!(mode(&target), 0o644);
    // Written again through the link: the target is replaced, its mode kept.
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    succeeds(&logits(&link));
    assert_eq!(mode(&target), 0o600);
    // A character device is written in place, never replaced by a regular file.
    succeeds(&logits(Path::new("/dev/null")));
    let null = std::fs::metadata("/dev/null").unwrap();
    assert!(
        null.file_type().is_char_device(),
        "/dev/null stays a device"
    );
    assert!(
        !std::fs::read_dir("/dev").unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".null.tmp")),
        "no temporary file left in /dev"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// TinT flags that fit the micro GPT-2 (the official golden's sizes).
const MICRO_TINT: [&str; 7] = [
    "--tint",
    "--tint-hidden-size",
    "160",
    "--tint-prefixes",
    "8",
    "--tint-heads",
    "20",
];

#[test]
fn logits_fails_on_non_finite_outputs_and_useless_masks_writing_nothing() {
    let dir = scratch("logits-nan");
    let model = poisoned(&dir);
    let ids = dir.join("ids.json");
    std::fs::write(
        &ids,
        r#"{"input_ids": [[1, 2, 3, 4, 5, 6]], "train_mask": [[1, 1, 1, 0, 0, 0]]}"#,
    )
    .unwrap();
    let zero = dir.join("zero.json");
    std::fs::write(
        &zero,
        r#"{"input_ids": [[1, 2, 3, 4, 5, 6]], "train_mask": [[0, 0, 0, 0, 0, 0]]}"#,
    )
    .unwrap();
    let out = dir.join("out.safetensors");
    let logits = |model: &Path, ids: &Path, extra: &[&str]| {
        let mut args = vec![
            "logits",
            "--model",
            model.to_str().unwrap(),
            "--ids",
            ids.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        xtask(&args)
    };
    fails_with(
        &logits(&model, &ids, &[]),
        &[
            "--allow-non-finite",
            "non-finite values",
            "in logits: weight",
            "(1 of 4096 values non-finite)",
        ],
    );
    let mut blow_up = MICRO_TINT.to_vec();
    blow_up.extend(["--inner-lr", "1e300"]);
    fails_with(
        &logits(&micro(), &ids, &blow_up),
        &[
            "in final_logits",
            "first_logits are finite, so the simulated update made them non-finite (inner_lr 1e300",
        ],
    );
    fails_with(
        &logits(&micro(), &zero, &MICRO_TINT),
        &["train_mask row 0 has no training token"],
    );
    // The step rules of `eval lm`: a negative step or no step at all is refused by its flag.
    for (arg, flag, rule) in [
        ("--inner-lr=-1e-3", "--inner-lr", "finite, non-negative"),
        ("--steps=0", "--steps", "at least one step"),
    ] {
        let mut bad = MICRO_TINT.to_vec();
        bad.push(arg);
        fails_with(&logits(&micro(), &ids, &bad), &[flag, rule]);
    }
    assert!(!out.exists(), "nothing written");
    blow_up.push("--allow-non-finite");
    succeeds(&logits(&micro(), &ids, &blow_up));
    assert!(out.exists(), "written when allowed");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn eval_lm_resume_refuses_changed_weights_and_recomputes_a_tampered_cell() {
    let dir = scratch("lm-resume");
    let model = dir.join("model");
    std::fs::create_dir_all(&model).unwrap();
    for file in std::fs::read_dir(micro()).unwrap() {
        let file = file.unwrap().path();
        std::fs::copy(&file, model.join(file.file_name().unwrap())).unwrap();
    }
    let out = dir.join("lm.json");
    succeeds(&eval_lm(&model, &out, &["--methods", "vanilla"]));
    let honest = report(&out)["results"][0]["perplexity"]["value"].clone();
    // A hand-edited perplexity is not reused.
    let mut tampered = report(&out);
    tampered["results"][0]["perplexity"]["value"] = serde_json::json!(-5.0);
    std::fs::write(&out, tampered.to_string()).unwrap();
    let resumed = eval_lm(&model, &out, &["--methods", "vanilla", "--resume"]);
    succeeds(&resumed);
    assert!(
        stderr(&resumed).contains("stored cell recomputed"),
        "{}",
        stderr(&resumed)
    );
    assert_eq!(report(&out)["results"][0]["perplexity"]["value"], honest);
    // The same path with other weights: the fingerprint's content hash differs.
    let poisoned_model = poisoned(&dir);
    std::fs::copy(
        poisoned_model.join("model.safetensors"),
        model.join("model.safetensors"),
    )
    .unwrap();
    fails_with(
        &eval_lm(&model, &out, &["--methods", "vanilla", "--resume"]),
        &["--resume", "checkpoint SHA-256", "in the report"],
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_output_path_that_cannot_be_created_is_named() {
    let dir = scratch("no-dir");
    let file = dir.join("plain-file");
    std::fs::write(&file, "not a directory").unwrap();
    let ids = dir.join("ids.json");
    std::fs::write(&ids, r#"{"input_ids": [[1, 2, 3]]}"#).unwrap();
    let out = file.join("out.safetensors");
    let run = xtask(&[
        "logits",
        "--model",
        micro().to_str().unwrap(),
        "--ids",
        ids.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    fails_with(&run, &[file.to_str().unwrap()]);
    let lm = eval_lm(&micro(), &file.join("lm.json"), &["--methods", "vanilla"]);
    fails_with(&lm, &[file.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a directory");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_error_states_each_cause_once_and_exits_with_status_1() {
    // The workspace's errors write their cause into their own message; the report must not repeat
    // it under "Caused by" (xtask/src/error_report.rs). The backtrace is left out of the check.
    let run = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["eval", "cgt", "--preset", "nope"])
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .unwrap();
    fails_with(
        &run,
        &[
            "Error: --preset: ",
            "unknown preset \"nope\"; known: icl-tiny",
        ],
    );
    let err = stderr(&run);
    assert_eq!(
        err.matches("unknown preset").count(),
        1,
        "repeated cause in:\n{err}"
    );
    assert!(!err.contains("Caused by"), "{err}");
    assert_eq!(run.status.code(), Some(1));
}

/// Issue 66: a text too short for one block (here empty) is refused naming the file.
#[test]
fn eval_lm_names_a_text_too_short_for_one_block() {
    let dir = scratch("lm-empty-text");
    let text = dir.join("empty.txt");
    std::fs::write(&text, "").unwrap();
    let run = xtask(&[
        "eval",
        "lm",
        "--model",
        micro().to_str().unwrap(),
        "--text",
        text.to_str().unwrap(),
        "--methods",
        "vanilla",
        "--out",
        dir.join("lm.json").to_str().unwrap(),
    ]);
    fails_with(&run, &[&format!("cutting {} into blocks", text.display())]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 66, findings 4b and 12 at the command line: `eval lm` refuses a repeated method, and a
/// `--text` that never ends (`/dev/zero`) with the size limit, writing nothing.
#[test]
fn eval_lm_refuses_repeated_methods_and_an_endless_text() {
    let dir = scratch("lm-repeats-endless");
    let out = dir.join("lm.json");
    let run = eval_lm(&micro(), &out, &["--methods", "vanilla,vanilla"]);
    fails_with(&run, &["--methods = vanilla (in vanilla,vanilla)"]);
    let run = xtask(&[
        "eval",
        "lm",
        "--model",
        micro().to_str().unwrap(),
        "--text",
        "/dev/zero",
        "--methods",
        "vanilla",
        "--out",
        out.to_str().unwrap(),
    ]);
    fails_with(&run, &["/dev/zero", "more than the limit of"]);
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 66, finding 25: a bad value is named by the flag the user gave (`--shots`, `--n-test`),
/// not by the library's variable (`k`, `n_test`).
#[test]
fn eval_icl_names_the_flag_of_a_bad_value() {
    let dir = scratch("icl-flag-names");
    let data = good_bad_task(&dir, 2);
    let micro = micro();
    let out = dir.join("icl.json");
    let run_with = |shots: &str, n_test: &str, methods: &str| {
        eval_icl(
            &micro,
            &data,
            &out,
            &[
                "--methods",
                methods,
                "--shots",
                shots,
                "--seeds",
                "0",
                "--n-test",
                n_test,
                "--n-dev",
                "1",
            ],
        )
    };
    fails_with(&run_with("9", "2", "icl"), &["invalid setting --shots = 9"]);
    fails_with(
        &run_with("2", "0", "icl"),
        &["invalid setting --n-test = 0"],
    );
    // Finding 12 at the command line: a repeated method is refused, not run twice.
    fails_with(
        &run_with("2", "2", "icl,icl"),
        &["--methods = icl (in icl,icl)"],
    );
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 66 item 4: every ICL cell stores the SHA-256 of its inputs (examples, template,
/// settings); `--resume` reuses a cell whose digest this run computes again, and recomputes one
/// whose stored digest differs (here: edited), saying why, and stores the right digest again.
#[test]
fn eval_icl_resume_recomputes_a_cell_whose_input_digest_differs() {
    let dir = scratch("icl-digest");
    let data = good_bad_task(&dir, 2);
    let out = dir.join("icl.json");
    let micro = micro();
    let run_with = |max_input_tokens: &str| {
        eval_icl(
            &micro,
            &data,
            &out,
            &[
                "--methods",
                "icl",
                "--shots",
                "2",
                "--seeds",
                "0",
                "--n-test",
                "2",
                "--n-dev",
                "2",
                "--max-input-tokens",
                max_input_tokens,
                "--resume",
            ],
        )
    };
    let run = || run_with("16");
    succeeds(&run());
    let digest = report(&out)["cells"][0]["inputs_sha256"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(digest.len(), 64, "{digest}");
    let again = run();
    succeeds(&again);
    assert!(stderr(&again).contains("reused"), "{}", stderr(&again));
    let edited = std::fs::read_to_string(&out)
        .unwrap()
        .replace(&digest, &"0".repeat(64));
    std::fs::write(&out, edited).unwrap();
    let recomputed = run();
    succeeds(&recomputed);
    assert!(
        stderr(&recomputed).contains("digest of its inputs differ"),
        "{}",
        stderr(&recomputed)
    );
    assert_eq!(report(&out)["cells"][0]["inputs_sha256"], digest.as_str());
    // Issue 66: a refused --resume names the setting that differs, with both values.
    fails_with(
        &run_with("20"),
        &[
            "--resume: the report was made with other settings",
            "max_input_tokens (16 → 20)",
        ],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Seed pieces (issue 62 item 7): `eval icl --seeds 0` and `--seeds 1` with `--tune-per-seed`,
/// merged by `icl-merge`, give the cells of one run with `--seeds 0,1`: the same predictions,
/// accuracies, spreads, tuned steps and rows (run times and input digests aside).
#[test]
fn eval_icl_seed_pieces_merge_into_the_cells_of_one_run() {
    let dir = scratch("icl-seeds");
    let data = good_bad_task(&dir, 4);
    let micro = micro();
    let run = |seeds: &str, out: &Path| {
        succeeds(&eval_icl(
            &micro,
            &data,
            out,
            &[
                "--methods",
                "icl,dyn-eval",
                "--shots",
                "0,2",
                "--seeds",
                seeds,
                "--n-test",
                "2",
                "--n-dev",
                "4",
                "--balanced",
                "--max-input-tokens",
                "16",
                "--tune",
                "lr=1e-2,1e-1,1",
                "--tune-extend",
                "8",
                "--tune-per-seed",
            ],
        ));
    };
    let (whole, s0, s1, merged) = (
        dir.join("whole.json"),
        dir.join("s0.json"),
        dir.join("s1.json"),
        dir.join("merged.json"),
    );
    run("0,1", &whole);
    run("0", &s0);
    run("1", &s1);
    succeeds(&xtask(&[
        "eval",
        "icl-merge",
        "--out",
        merged.to_str().unwrap(),
        s0.to_str().unwrap(),
        s1.to_str().unwrap(),
    ]));
    // Run times and input digests differ by design; everything else must not.
    let strip = |mut cells: serde_json::Value| {
        for cell in cells.as_array_mut().unwrap() {
            cell["inputs_sha256"] = serde_json::Value::Null;
            for run in cell["runs"].as_array_mut().unwrap() {
                run["seconds"] = serde_json::Value::Null;
            }
        }
        cells
    };
    let (whole, merged) = (report(&whole), report(&merged));
    assert_eq!(
        strip(merged["cells"].clone()),
        strip(whole["cells"].clone())
    );
    let steps = |r: &serde_json::Value| -> Vec<(String, f64)> {
        let mut steps: Vec<(String, f64)> = r["tuning"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["method"].as_str().unwrap().to_string(),
                    t["choice"].as_f64().unwrap(),
                )
            })
            .collect();
        steps.sort_by(|a, b| a.0.cmp(&b.0));
        steps
    };
    assert_eq!(steps(&merged), steps(&whole));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--tune-per-seed` with two formats: every (format, seed) gets its own bracketed step, each
/// cell runs each seed with its own, and the rows say the step is per seed.
#[test]
fn eval_icl_tunes_every_format_and_seed() {
    let dir = scratch("icl-tune");
    // Two texts, each always with the same label: a step on the demonstrations helps on the dev
    // examples (the same texts) up to a size, so every grid has an interior best even on the
    // random micro model.
    let data = good_bad_task(&dir, 4);
    let out = dir.join("icl.json");
    let micro = micro();
    let run = eval_icl(
        &micro,
        &data,
        &out,
        &[
            "--methods",
            "dyn-eval",
            "--shots",
            "2",
            "--seeds",
            "0,1",
            "--formats",
            "single,multi",
            "--n-test",
            "2",
            "--n-dev",
            "4",
            "--balanced",
            "--max-input-tokens",
            "16",
            "--tune",
            "lr=1e-2,1e-1,1",
            "--tune-extend",
            "8",
            "--tune-per-seed",
            "--balanced-test",
        ],
    );
    succeeds(&run);
    let json = report(&out);
    let tuning: Vec<&str> = json["tuning"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        tuning,
        [
            "dyn-eval on mr [single, label], seed 0",
            "dyn-eval on mr [single, label], seed 1",
            "dyn-eval on mr [multi, label], seed 0",
            "dyn-eval on mr [multi, label], seed 1",
        ]
    );
    for t in json["tuning"].as_array().unwrap() {
        assert_eq!(t["interior"], true, "{t}");
    }
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for cell in cells {
        assert_eq!(cell["key"]["method"], "dyn-eval(lr=per-seed,steps=1)");
        let settings = cell["settings"]["method_settings"].as_str().unwrap();
        assert!(
            settings.starts_with("seed 0: ") && settings.contains("; seed 1: "),
            "{settings}"
        );
        assert_eq!(cell["runs"].as_array().unwrap().len(), 2);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `--help` is plain text: no rustdoc link syntax (``[`Type`]``) in any command's help; and
/// docs/cli.md, the flag reference, is exactly the help texts (regenerate it with
/// `TINT_UPDATE_CLI_DOC=1 cargo test -p xtask --test cli_probe help_texts`).
#[test]
fn help_texts_have_no_rustdoc_links_and_docs_cli_md_is_them() {
    let mut doc = String::from(
        "# Command-line reference\n\nThe `--help` text of every `cargo xtask` command, generated by \
         the test `help_texts_have_no_rustdoc_links_and_docs_cli_md_is_them` in \
         `xtask/tests/cli_probe.rs`, which fails when this file and the help differ (regenerate: \
         `TINT_UPDATE_CLI_DOC=1 cargo test -p xtask --test cli_probe help_texts`).\n",
    );
    for command in [
        &["--help"][..],
        &["eval", "--help"],
        &["eval", "lm", "--help"],
        &["eval", "lm-merge", "--help"],
        &["eval", "icl", "--help"],
        &["eval", "cgt", "--help"],
        &["logits", "--help"],
        &["fetch", "--help"],
        &["bench", "--help"],
        &["orchestrator", "--help"],
    ] {
        let run = xtask(command);
        succeeds(&run);
        let help = String::from_utf8_lossy(&run.stdout);
        assert!(help.len() > 100, "{command:?}: {help}");
        assert!(
            !help.contains("[`") && !help.contains("`]"),
            "{command:?} prints rustdoc links:\n{help}"
        );
        let words = command[..command.len() - 1].join(" ");
        let title = if words.is_empty() {
            "cargo xtask".to_string()
        } else {
            format!("cargo xtask {words}")
        };
        doc.push_str(&format!(
            "\n## `{title}`\n\n```text\n{}\n```\n",
            help.trim_end()
        ));
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md");
    if std::env::var_os("TINT_UPDATE_CLI_DOC").is_some() {
        std::fs::write(&path, &doc).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == doc,
        "docs/cli.md differs from the --help texts; regenerate it with \
         `TINT_UPDATE_CLI_DOC=1 cargo test -p xtask --test cli_probe help_texts`"
    );
}

/// `eval --max-memory-gib` takes a positive number of GiB, before any run or subcommand.
#[test]
fn eval_refuses_a_memory_limit_that_is_not_a_positive_number() {
    for value in ["0", "-2", "NaN", "inf"] {
        let flag = format!("--max-memory-gib={value}");
        let output = xtask(&["eval", &flag, "lm", "--model", "none"]);
        fails_with(
            &output,
            &["--max-memory-gib must be a positive number of GiB", value],
        );
    }
}

/// `eval lm` with dynamic evaluation refuses, before any block runs, a run whose estimated step
/// memory is over `--max-memory-gib`, and writes no report; under the limit it runs.
#[test]
fn eval_lm_refuses_a_dyn_eval_step_over_the_memory_limit_before_it_runs() {
    let dir = scratch("lm-memory");
    let out = dir.join("report.json");
    let run = |limit: &str| {
        let flag = format!("--max-memory-gib={limit}");
        eval_lm(
            &micro(),
            &out,
            &[
                "--methods",
                "dyn-eval",
                "--lr",
                "1e-3",
                "--workers",
                "1",
                &flag,
            ],
        )
    };
    fails_with(
        &run("0.000001"),
        &[
            "dynamic evaluation's step on 1 block(s) of 32 tokens at a time",
            "--max-memory-gib (or fewer --workers)",
        ],
    );
    assert!(!out.exists(), "a refused run wrote {}", out.display());
    succeeds(&run("4"));
    assert!(out.exists());
}

/// Two processes on one report: while another process holds the report's lock (`OUT.lock`, taken
/// here through the library as a running `eval` does), `eval lm` and `eval icl` on that `--out`
/// are refused with the rule and leave the report as it was; once the holder ends, the same
/// command runs.
#[test]
fn a_report_another_process_is_writing_is_refused_until_it_ends() {
    let dir = scratch("lock-across-processes");
    let out = dir.join("report.json");
    std::fs::write(&out, "{\"kept\": true}").unwrap();
    let lm = |out: &Path| eval_lm(&micro(), out, &["--methods", "vanilla", "--workers", "1"]);
    let holder = tint_eval::output_lock::OutputLock::acquire(&out).unwrap();
    fails_with(&lm(&out), &["another run is writing this report", "--out"]);
    let icl = xtask(&[
        "eval",
        "icl",
        "--model",
        micro().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    fails_with(&icl, &["another run is writing this report"]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "{\"kept\": true}");
    drop(holder);
    std::fs::remove_file(&out).unwrap();
    succeeds(&lm(&out));
    assert!(out.exists());
}

#[test]
fn eval_icl_takes_the_matching_cells_and_tunings_of_another_report_and_refuses_another_checkpoint()
{
    let dir = scratch("icl-cells-from");
    let data = good_bad_task(&dir, 6);
    let (first, second) = (dir.join("task.json"), dir.join("control.json"));
    // One demonstration pair, one seed, two test examples: every run but its methods and step.
    let small = [
        "--shots",
        "2",
        "--seeds",
        "0",
        "--n-test",
        "2",
        "--n-dev",
        "4",
        "--balanced",
        "--max-input-tokens",
        "16",
    ];
    let tuned = [
        "--tune",
        "lr=1e-2,1e-1,1",
        "--tune-extend",
        "8",
        "--tune-per-seed",
    ];
    let icl = |out: &Path, extra: &[&str]| {
        let args = [&["--methods", "icl,dyn-eval"][..], &small[..], extra].concat();
        eval_icl(&micro(), &data, out, &args)
    };
    let task = icl(
        &first,
        &[&["--formats", "single,multi"][..], &tuned[..]].concat(),
    );
    succeeds(&task);
    let cells_from = ["--cells-from", first.to_str().unwrap()];
    // A control with the Single format only: its tuning and both of its cells are the task run's.
    let control = icl(
        &second,
        &[&["--formats", "single"][..], &tuned[..], &cells_from[..]].concat(),
    );
    succeeds(&control);
    let log = stderr(&control);
    assert_eq!(
        log.matches(&format!("cell of {}", first.display())).count(),
        2,
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "dyn-eval on mr, seed 0: the tuning of `dyn-eval on mr [single, label], seed 0` \
             taken from {}",
            first.display()
        )),
        "{log}"
    );
    let (task_json, control_json) = (report(&first), report(&second));
    let (task_tuning, control_tuning) = (&task_json["tuning"][0], &control_json["tuning"][0]);
    assert_eq!(control_tuning["method"], "dyn-eval on mr, seed 0");
    for field in ["grid", "scores", "choice", "inputs_sha256"] {
        assert_eq!(control_tuning[field], task_tuning[field], "{field}");
    }
    assert!(task_tuning["inputs_sha256"].is_string(), "{task_tuning}");
    let cells = control_json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for cell in cells {
        let same = task_json["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["key"] == cell["key"])
            .unwrap_or_else(|| panic!("{} not in the task run", cell["key"]));
        assert_eq!(same, cell, "taken as it was stored, times included");
    }
    // Another step: the dyn-eval cell is another cell and is computed; icl's is taken.
    let other = icl(
        &dir.join("other.json"),
        &[
            &["--formats", "single", "--lr", "2e-3"][..],
            &cells_from[..],
        ]
        .concat(),
    );
    succeeds(&other);
    assert_eq!(
        stderr(&other)
            .matches(&format!("cell of {}", first.display()))
            .count(),
        1,
        "{}",
        stderr(&other)
    );
    // A donor made from another checkpoint is refused before anything runs.
    let poisoned_model = poisoned(&dir);
    let refused = eval_icl(
        &poisoned_model,
        &data,
        &dir.join("refused.json"),
        &[&["--methods", "icl"][..], &small[..], &cells_from[..]].concat(),
    );
    fails_with(
        &refused,
        &["task.json", "--cells-from", "another checkpoint"],
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// `eval lm --cells-from`: a run that repeats a row of another report beside a changed row (the
/// approximation pieces of Table 2 beside shard 1) takes that row's cell and tuning and computes
/// the rest; a donor made from another checkpoint is refused.
#[test]
fn eval_lm_takes_the_matching_cells_and_tunings_of_another_report_and_refuses_another_checkpoint() {
    let dir = scratch("lm-cells-from");
    let (first, second) = (dir.join("shard.json"), dir.join("exact.json"));
    let tuned = ["--tune", "eta=1e-4,1e-3,1e-2,1e-1", "--tune-extend", "8"];
    let shard = eval_lm(
        &micro(),
        &first,
        &[
            &["--methods", "vanilla,dyn-eval-matched,tint-ref"][..],
            &tuned[..],
        ]
        .concat(),
    );
    succeeds(&shard);
    let cells_from = ["--cells-from", first.to_str().unwrap()];
    let exact = eval_lm(
        &micro(),
        &second,
        &[
            &[
                "--methods",
                "dyn-eval-matched,tint-ref",
                "--exact-derivatives",
            ][..],
            &tuned[..],
            &cells_from[..],
        ]
        .concat(),
    );
    succeeds(&exact);
    let log = stderr(&exact);
    let from = format!("--cells-from {}", first.display());
    assert!(
        log.contains(&format!("dyn-eval-matched f=0.5: cell taken from {from}"))
            && log.contains(&format!("dyn-eval-matched f=0.5: tuning taken from {from}")),
        "{log}"
    );
    assert_eq!(
        log.matches(&from).count(),
        2,
        "tint-ref's cell and tuning are its own: {log}"
    );
    assert!(
        !log.contains("stored cell recomputed"),
        "the donor's other tint-ref is not this run's stored cell: {log}"
    );
    let (shard_json, exact_json) = (report(&first), report(&second));
    let row = |r: &serde_json::Value, key: &str, method: &str| {
        r[key]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["method"] == method)
            .unwrap_or_else(|| panic!("no {method} in {key}"))
            .clone()
    };
    assert_eq!(
        row(&exact_json, "results", "dyn-eval-matched"),
        row(&shard_json, "results", "dyn-eval-matched"),
        "taken as it was stored, its time included"
    );
    assert_eq!(
        row(&exact_json, "tuning", "dyn-eval-matched"),
        row(&shard_json, "tuning", "dyn-eval-matched")
    );
    for key in ["results", "tuning"] {
        let (a, b) = (
            row(&shard_json, key, "tint-ref")["inputs_sha256"].clone(),
            row(&exact_json, key, "tint-ref")["inputs_sha256"].clone(),
        );
        assert!(a.is_string() && b.is_string() && a != b, "{key}: {a} {b}");
    }
    // A donor made from another checkpoint is refused before anything runs.
    let poisoned_model = poisoned(&dir);
    let refused = eval_lm(
        &poisoned_model,
        &dir.join("refused.json"),
        &[
            &["--methods", "dyn-eval-matched", "--inner-lr", "1e-3"][..],
            &cells_from[..],
        ]
        .concat(),
    );
    fails_with(
        &refused,
        &["shard.json", "--cells-from", "another checkpoint"],
    );
    std::fs::remove_dir_all(dir).unwrap();
}
