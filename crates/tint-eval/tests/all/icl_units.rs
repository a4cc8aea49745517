//! In-context classification: calibration math on hand-made probabilities, loaders on files the test
//! writes, and template / label-word tokenisation with the committed micro GPT-2 tokenizer.
#![allow(clippy::print_stdout, clippy::print_stderr)] // measured values are reported on the terminal

use std::path::{Path, PathBuf};

use tint_aux::AuxTokenizer;
use tint_eval::icl::calibration::{
    accuracy, argmax, calibrated_scores, mean_std, predict, predict_calibrated,
};
use tint_eval::icl::loaders::{
    load_bbc_topics, load_class_title_body_csv, load_cr_snippets, load_jsonl, load_label_text_csv,
    load_mr_snippets, load_offline_task, load_sst2_tsv, load_task_dir, load_task_file, BbcText,
};
use tint_eval::icl::{DemoFormat, Example, PromptEncoder, TaskKind, Template, TrainLoss};
use tint_eval::EvalError;

/// Sums of a few f64 logs: exact up to rounding of `ln`.
const LOG_TOL: f64 = 1e-12;

fn micro_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/official-tint/micro-gpt2-random")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tint-icl-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, content).unwrap();
    path
}

#[test]
fn calibration_divides_by_the_prompt_only_probability() {
    // P(c | input, prompt) = (0.6, 0.4); P(c | prompt) = (0.8, 0.2).
    // Uncalibrated: class 0. Calibrated: 0.6 / 0.8 = 0.75 < 0.4 / 0.2 = 2, so class 1.
    let cond = [0.6f64.ln(), 0.4f64.ln()];
    let prior = [0.8f64.ln(), 0.2f64.ln()];
    assert_eq!(predict(&cond), Some(0));
    assert_eq!(predict_calibrated(&cond, &prior), Some(1));
    let ratio = calibrated_scores(&cond, &prior);
    assert!((ratio[0] - 0.75f64.ln()).abs() < LOG_TOL);
    assert!((ratio[1] - 2f64.ln()).abs() < LOG_TOL);

    // Three classes where calibration does not change the winner.
    let cond = [0.2f64.ln(), 0.7f64.ln(), 0.1f64.ln()];
    let prior = [0.3f64.ln(), 0.4f64.ln(), 0.3f64.ln()];
    assert_eq!(predict(&cond), Some(1));
    assert_eq!(predict_calibrated(&cond, &prior), Some(1));

    // Uniform prior: calibration is the identity on the argmax.
    let prior = [(1.0f64 / 3.0).ln(); 3];
    assert_eq!(predict_calibrated(&cond, &prior), predict(&cond));

    // Ties go to the first class; non-finite or mismatched inputs give no prediction.
    assert_eq!(argmax(&[1.0, 1.0]), Some(0));
    assert_eq!(argmax(&[1.0, f64::NAN]), None);
    assert_eq!(argmax(&[]), None);
    assert_eq!(predict_calibrated(&[0.0, 1.0], &[0.0]), None);
}

#[test]
fn accuracy_and_seed_statistics() {
    assert_eq!(accuracy(&[0, 1, 1, 0], &[0, 1, 0, 0]), 0.75);
    assert_eq!(accuracy(&[], &[]), 0.0);
    let (mean, std) = mean_std(&[0.5, 0.7, 0.6]);
    assert!((mean - 0.6).abs() < LOG_TOL);
    // Population std: sqrt((0.01 + 0.01 + 0) / 3).
    assert!((std - (0.02f64 / 3.0).sqrt()).abs() < LOG_TOL);
}

#[test]
fn standard_layout_loaders() {
    let dir = scratch("standard");
    let sst2 = write(
        &dir,
        "sst2/train.tsv",
        "sentence\tlabel\na gripping film \t1\ndull and flat\t0\n",
    );
    write(&dir, "sst2/dev.tsv", "sentence\tlabel\nfine work\t1\n");
    write(
        &dir,
        "sst2/test.tsv",
        "index\tsentence\n0\tno labels here\n",
    );
    let examples = load_sst2_tsv(&sst2).unwrap();
    assert_eq!(
        examples,
        vec![
            Example {
                text: "a gripping film".into(),
                label: 1
            },
            Example {
                text: "dull and flat".into(),
                label: 0
            },
        ]
    );
    // SST-2 evaluates on dev.tsv (GLUE's test.tsv has no labels).
    let data = load_task_dir(TaskKind::Sst2, &dir.join("sst2")).unwrap();
    assert_eq!((data.train.len(), data.test.len()), (2, 1));
    let missing = dir.join("no-such-task-dir");
    let message = load_task_dir(TaskKind::Sst2, &missing)
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with(&format!("cannot access {}: ", missing.display())),
        "a missing directory, not one without examples: {message}"
    );
    let message = load_task_dir(TaskKind::Sst2, &dir).unwrap_err().to_string();
    assert!(message.contains("(no train file)"), "{message}");
    assert!(matches!(
        load_sst2_tsv(&dir.join("sst2/test.tsv")),
        Err(EvalError::Parse { line: 1, .. })
    ));

    let mr = write(
        &dir,
        "mr/train.csv",
        "1,\"a \"\"fine\"\", funny film\"\n0,plain, unquoted, commas\r\n\n0,\"spans\ntwo lines\"\n",
    );
    let examples = load_label_text_csv(&mr, 2).unwrap();
    assert_eq!(examples.len(), 3);
    assert_eq!(examples[0].text, "a \"fine\", funny film");
    assert_eq!(examples[1].text, "plain, unquoted, commas");
    assert_eq!(examples[2].text, "spans\ntwo lines");
    let bad = write(&dir, "bad.csv", "1,ok\n3,label out of range\n");
    assert!(matches!(
        load_label_text_csv(&bad, 2),
        Err(EvalError::BadLabel { line: 2, .. })
    ));
    let open = write(&dir, "open.csv", "1,\"never closed\n");
    assert!(matches!(
        load_label_text_csv(&open, 2),
        Err(EvalError::Parse { .. })
    ));

    let cr = write(
        &dir,
        "cr/train.jsonl",
        "{\"text\": \"works well\", \"label\": 1}\n\n{\"text\": \"broke\", \"label\": \"0\"}\n",
    );
    let examples = load_jsonl(&cr, "text", "label", 2).unwrap();
    assert_eq!(
        examples[1],
        Example {
            text: "broke".into(),
            label: 0
        }
    );
    let bad = write(&dir, "bad.jsonl", "{\"sentence\": \"x\", \"label\": 1}\n");
    assert!(matches!(
        load_jsonl(&bad, "text", "label", 2),
        Err(EvalError::Parse { .. })
    ));

    // AGNews: classes 1..4, title + description; Amazon: labels 1/2, content only.
    let ag = write(&dir, "ag.csv", "\"3\",\"Stocks rise\",\"Markets gained \\\\ today.\"\n\"2\",\"Cup final\",\"A late goal.\"\n");
    let examples = load_class_title_body_csv(&ag, 4, true).unwrap();
    assert_eq!(examples[0].label, 2);
    assert_eq!(
        examples[1],
        Example {
            text: "Cup final A late goal.".into(),
            label: 1
        }
    );
    let amazon = write(
        &dir,
        "amazon.csv",
        "\"2\",\"Great\",\"Loved it, really.\"\n\"1\",\"Bad\",\"Broke fast.\"\n",
    );
    let examples = load_class_title_body_csv(&amazon, 2, false).unwrap();
    assert_eq!(
        examples[0],
        Example {
            text: "Loved it, really.".into(),
            label: 1
        }
    );
    assert!(matches!(
        load_class_title_body_csv(&amazon, 2, true).map(|e| e[1].label),
        Ok(0)
    ));
    assert!(matches!(
        load_class_title_body_csv(&ag, 2, true),
        Err(EvalError::BadLabel { .. })
    ));
    let empty = write(&dir, "empty.csv", "\n");
    assert!(matches!(
        load_label_text_csv(&empty, 2),
        Err(EvalError::Empty { .. })
    ));
    assert!(matches!(
        load_label_text_csv(&dir.join("missing.csv"), 2),
        Err(EvalError::Io {
            operation: "access",
            ..
        })
    ));
}

#[test]
fn offline_asset_loaders() {
    let dir = scratch("offline");
    let mr = write(
        &dir,
        "movieReviewSnippets_GroundTruth.txt",
        "1\t2.2\tThe Rock is destined to shine.\r\n3\t-0.6\tEffective but too tepid biopic\r\n5152\t1.3\tLast positive.\r\n5153\t-1.4\tSimplistic, silly and tedious.\r\n",
    );
    let labels: Vec<usize> = load_mr_snippets(&mr)
        .unwrap()
        .iter()
        .map(|e| e.label)
        .collect();
    // The label is the source file (ids up to 5152 are positive), not the crowd score's sign.
    assert_eq!(labels, vec![1, 1, 1, 0]);

    let cr = write(
        &dir,
        "amazonReviewSnippets_GroundTruth.txt",
        "1_1\t-0.9\ttroubleshooting, no picture.\r\n1_2\t0\tneutral line\r\n1_3\t1.5\tgreat player\r\n",
    );
    let examples = load_cr_snippets(&cr).unwrap();
    assert_eq!(
        examples,
        vec![
            Example {
                text: "troubleshooting, no picture.".into(),
                label: 0
            },
            Example {
                text: "great player".into(),
                label: 1
            },
        ]
    );
    let bad = write(&dir, "bad.txt", "1\tnot-a-number\ttext\n");
    assert!(matches!(
        load_cr_snippets(&bad),
        Err(EvalError::Parse { line: 1, .. })
    ));

    let bbc = dir.join("bbc");
    for (class, title) in [
        ("business", "Profits up"),
        ("entertainment", "Film wins"),
        ("politics", "Vote today"),
        ("sport", "Team wins"),
        ("tech", "New phone"),
    ] {
        write(
            &bbc,
            &format!("{class}/001.txt"),
            &format!("{title}\n\nFirst  paragraph\nof {class}.\n\nSecond paragraph.\n"),
        );
    }
    let examples = load_bbc_topics(&bbc, BbcText::TitleAndLead).unwrap();
    assert_eq!(examples.len(), 5);
    assert_eq!(
        examples[3],
        Example {
            text: "Team wins. First paragraph of sport.".into(),
            label: 3
        }
    );
    assert_eq!(
        load_bbc_topics(&bbc, BbcText::Title).unwrap()[0].text,
        "Profits up"
    );
    assert!(load_bbc_topics(&bbc, BbcText::Full).unwrap()[4]
        .text
        .ends_with("Second paragraph."));
    assert!(matches!(
        load_bbc_topics(&dir, BbcText::Title),
        Err(EvalError::Empty { .. })
    ));

    let data = load_offline_task(TaskKind::BbcTopics, &bbc, 2, 7, false).unwrap();
    assert_eq!((data.train.len(), data.test.len()), (3, 2));
    assert!(load_offline_task(TaskKind::BbcTopics, &bbc, 5, 7, false).is_err());
    assert!(load_offline_task(TaskKind::Sst2, &bbc, 2, 7, false).is_err());
}

#[test]
fn task_names_round_trip() {
    for task in TaskKind::ALL {
        assert_eq!(TaskKind::parse(task.name()).unwrap(), task);
        assert_eq!(Template::for_task(task).n_classes(), task.n_classes());
    }
    assert!(matches!(
        TaskKind::parse("imdb"),
        Err(EvalError::UnknownTask { .. })
    ));
}

#[test]
fn template_pieces_tokenise_like_the_joined_text() {
    let tokenizer = AuxTokenizer::from_dir(&micro_dir()).unwrap();
    let text = "a gripping, funny film.";
    for task in TaskKind::ALL {
        let template = Template::for_task(task);
        let encoder = PromptEncoder::new(&tokenizer, &template, 256, 4096).unwrap();
        let query = encoder.query_ids(text).unwrap();
        assert_eq!(
            query,
            tokenizer.encode(&template.query(text)).unwrap(),
            "{task}"
        );
        for c in 0..template.n_classes() {
            let demo = encoder
                .demo(&Example {
                    text: text.into(),
                    label: c,
                })
                .unwrap();
            // Concatenated ids = tokenisation of the whole demonstration string.
            assert_eq!(
                demo.ids,
                tokenizer.encode(&template.demonstration(text, c)).unwrap()
            );
            let label = tokenizer.decode(&demo.ids[demo.label_start..]).unwrap();
            assert_eq!(label, format!(" {}", template.label_words[c]));
        }
        assert_eq!(
            tokenizer.decode(encoder.calibration_ids()).unwrap(),
            template.prompt.trim_start()
        );
    }
}

#[test]
fn training_sequences_and_contexts() {
    let tokenizer = AuxTokenizer::from_dir(&micro_dir()).unwrap();
    let template = Template::for_task(TaskKind::Mr);
    let encoder = PromptEncoder::new(&tokenizer, &template, 256, 64).unwrap();
    let examples = [
        Example {
            text: "good".into(),
            label: 1,
        },
        Example {
            text: "bad film".into(),
            label: 0,
        },
        Example {
            text: "a fine cast".into(),
            label: 1,
        },
    ];
    let demos: Vec<_> = examples.iter().map(|e| encoder.demo(e).unwrap()).collect();
    let label_tokens: usize = demos.iter().map(|d| d.ids.len() - d.label_start).sum();

    let (single, kept) = encoder.training(&demos, DemoFormat::Single, TrainLoss::LabelOnly);
    assert_eq!((single.ids.len(), kept), (3, 3));
    assert_eq!(single.n_targets(), label_tokens);
    for (ids, targets) in single.ids.iter().zip(&single.targets) {
        let words: Vec<u32> = ids
            .iter()
            .zip(targets)
            .filter(|(_, &t)| t)
            .map(|(&i, _)| i)
            .collect();
        let word = tokenizer.decode(&words).unwrap();
        assert!(word == " Positive" || word == " Negative", "{word:?}");
    }

    let (multi, kept) = encoder.training(&demos, DemoFormat::Multi, TrainLoss::LabelOnly);
    assert_eq!((multi.ids.len(), kept), (1, 3));
    assert_eq!(multi.n_targets(), label_tokens);
    let joined = examples
        .iter()
        .map(|e| template.demonstration(&e.text, e.label))
        .collect::<Vec<_>>()
        .join(&template.separator);
    assert_eq!(tokenizer.decode(&multi.ids[0]).unwrap(), joined);

    let (full, _) = encoder.training(&demos, DemoFormat::Multi, TrainLoss::FullContext);
    assert_eq!(full.n_targets(), full.ids[0].len() - 1);
    assert!(!full.targets[0][0]);

    // The context keeps the last demonstrations that fit in 64 positions with the label word.
    let query = encoder
        .query_ids("an overlong query that repeats itself and repeats itself again")
        .unwrap();
    let context = encoder.in_context(&demos, &query, TrainLoss::LabelOnly);
    assert!(context.ids.len() + encoder.max_label_len() <= 64);
    assert!(context.kept < 3, "kept {}", context.kept);
    assert!(context.ids.ends_with(&query));
    // With room for all of them, every demonstration is kept.
    let wide = PromptEncoder::new(&tokenizer, &template, 256, 256).unwrap();
    let ok = wide.query_ids("ok").unwrap();
    let context = wide.in_context(&demos, &ok, TrainLoss::LabelOnly);
    assert_eq!(context.kept, 3);
    assert!(tokenizer
        .decode(&context.ids)
        .unwrap()
        .starts_with("Review: good\nSentiment: Positive\n\nReview: bad film"));
    // The demonstration part and its targets are those of the Multi training sequence.
    assert_eq!(context.ids[..context.demo_len], multi.ids[0][..]);
    assert_eq!(context.demo_targets, multi.targets[0]);
    let full_context = wide.in_context(&demos, &ok, TrainLoss::FullContext);
    assert_eq!(full_context.demo_targets, full.targets[0]);
    // Inputs are cut to max_input_tokens; a prompt that cannot fit is an error.
    let short = PromptEncoder::new(&tokenizer, &template, 2, 64).unwrap();
    let cut = short.query_ids("one two three four five six").unwrap();
    assert_eq!(
        cut.len(),
        2 + tokenizer.encode(&template.prompt).unwrap().len()
    );
    let tiny = PromptEncoder::new(&tokenizer, &template, 256, 8).unwrap();
    assert!(matches!(
        tiny.query_ids("a sentence far too long for eight positions"),
        Err(EvalError::PromptTooLong { .. })
    ));
    assert!(PromptEncoder::new(&tokenizer, &template, 0, 64).is_err());
    let mut one_word = template.clone();
    one_word.label_words.truncate(1);
    assert!(PromptEncoder::new(&tokenizer, &one_word, 16, 64).is_err());
}

// ---------------------------------------------------------------------------------------------
// The Amazon fine-food loader, on R byte streams written by hand (the reader's own tests are in
// tint-assets).

use tint_eval::icl::loaders::{load_amazon_fine_food, strip_html};

/// R's XDR serialization written by hand: the writer shared with tint-assets' own R data tests.
use tint_assets::r_data::test_writer as rb;
use tint_assets::r_data::test_writer::rds_of;

fn fine_food_rda(
    train: &[(&str, Option<&str>, i32)],
    test: &[(&str, Option<&str>, i32)],
) -> Vec<u8> {
    // One stream numbers its symbols in order: the tag `training_data` is #1, the first frame's
    // `levels`, `class`, `row.names`, `names` #2-#5, `testing_data` #6, the second frame's (written
    // in full again) from #7.
    let mut rda = b"RDX3\n".to_vec();
    rda.extend(rb::header());
    rb::int(&mut rda, 0x402);
    rb::symbol(&mut rda, "training_data");
    rda.extend(frame_body(train, 1));
    rb::int(&mut rda, 0x402);
    rb::symbol(&mut rda, "testing_data");
    rda.extend(frame_body(test, 6));
    rb::int(&mut rda, rb::NIL);
    rb::gzip(&rda)
}

/// A fine-food frame whose `class` back reference is shifted by `symbols_before` symbols already
/// in the stream's reference table (R numbers every symbol of a stream in order).
fn frame_body(rows: &[(&str, Option<&str>, i32)], symbols_before: i32) -> Vec<u8> {
    let mut b = Vec::new();
    rb::fine_food_frame(&mut b, rows);
    // The frame writer refers to `class` as symbol #2; patch the reference index.
    let reference = ((2 << 8) | 0xff_i32).to_be_bytes();
    let at = b
        .windows(4)
        .position(|w| w == reference)
        .expect("the class back reference");
    b[at..at + 4].copy_from_slice(&(((2 + symbols_before) << 8) | 0xff).to_be_bytes());
    b
}

#[test]
fn amazon_fine_food_loader_reads_rda_and_rds_files() {
    let dir = scratch("fine-food");
    let train = [
        (
            "B01",
            Some("Tasty.<br /><br />Would buy again &amp; again"),
            1,
        ),
        ("B02", Some("It was <a href=\"x\">ok</a>, 3 < 4"), 2),
        ("B03", None, 1),
        ("B04", Some("Stale"), 2),
    ];
    let test = [("B05", Some("Great tea"), 1), ("B06", Some("Bland"), 2)];
    let rda = dir.join("small_fine_foods.rda");
    std::fs::write(&rda, fine_food_rda(&train, &test)).unwrap();
    for path in [rda.clone(), dir.clone()] {
        let data = load_amazon_fine_food(&path).unwrap();
        assert_eq!(data.task, TaskKind::AmazonFineFood);
        assert_eq!(
            data.train,
            vec![
                Example {
                    text: "Tasty. Would buy again & again".into(),
                    label: 1
                },
                Example {
                    text: "It was ok , 3 < 4".into(),
                    label: 0
                },
                Example {
                    text: "Stale".into(),
                    label: 0
                },
            ]
        );
        assert_eq!(data.test.len(), 2);
        assert_eq!((data.test[0].label, data.test[1].label), (1, 0));
    }

    // The layout `cargo xtask fetch amazon-fine-food` writes: one .rds per data frame.
    let rds_dir = dir.join("rds");
    std::fs::create_dir_all(&rds_dir).unwrap();
    for (name, rows) in [("training_data", &train[..]), ("testing_data", &test[..])] {
        let mut b = Vec::new();
        rb::fine_food_frame(&mut b, rows);
        std::fs::write(rds_dir.join(format!("{name}.rds")), rb::gzip(&rds_of(&b))).unwrap();
    }
    let data = load_amazon_fine_food(&rds_dir).unwrap();
    assert_eq!((data.train.len(), data.test.len()), (3, 2));
    let data = load_offline_task(TaskKind::AmazonFineFood, &rds_dir, 1, 3, false).unwrap();
    assert_eq!((data.train.len(), data.test.len()), (3, 1));

    // Errors: a missing file, a corrupt stream, a frame without the expected columns.
    assert!(matches!(
        load_amazon_fine_food(&dir.join("nothing-here")),
        Err(EvalError::Empty { .. })
    ));
    std::fs::write(rds_dir.join("testing_data.rds"), b"X\n\0\0").unwrap();
    assert!(matches!(
        load_amazon_fine_food(&rds_dir),
        Err(EvalError::Parse { .. })
    ));
    let mut b = Vec::new();
    rb::int(&mut b, 0x213);
    rb::int(&mut b, 0);
    rb::tag_cell(&mut b, "class");
    rb::strings(&mut b, 0, &[Some("data.frame")]);
    rb::tag_cell(&mut b, "names");
    rb::strings(&mut b, 0, &[]);
    rb::int(&mut b, rb::NIL);
    std::fs::write(rds_dir.join("testing_data.rds"), rds_of(&b)).unwrap();
    let err = load_amazon_fine_food(&rds_dir).unwrap_err();
    assert!(err.to_string().contains("no column \"review\""), "{err}");
    assert!(matches!(
        load_task_file(TaskKind::AmazonFineFood, &rda),
        Err(EvalError::InvalidSetting { .. })
    ));
}

#[test]
fn html_is_stripped_from_reviews() {
    assert_eq!(strip_html("a<br />b <i>c</i>"), "a b c");
    assert_eq!(strip_html("1 < 2 and 3 > 2"), "1 < 2 and 3 > 2");
    assert_eq!(strip_html("&quot;ok&quot; &amp;&lt;"), "\"ok\" &<");
}

/// The cache `cargo xtask fetch` fills: `$TINT_CACHE`, else `<repo>/.cache/assets`.
fn asset_cache() -> PathBuf {
    match std::env::var_os("TINT_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/assets"),
    }
}

/// On the real assets, when `cargo xtask fetch bbc-topics amazon-fine-food` has run (skipped
/// otherwise: tests never download).
#[test]
fn real_offline_assets_load_when_fetched() {
    let count = |examples: &[Example], n: usize| {
        let mut counts = vec![0usize; n];
        for e in examples {
            counts[e.label] += 1;
        }
        counts
    };
    let food = asset_cache().join("amazon-fine-food");
    if food.join("training_data.rds").is_file() {
        let data = load_amazon_fine_food(&food).unwrap();
        let (train, test) = (count(&data.train, 2), count(&data.test, 2));
        eprintln!("amazon-fine-food: train other/great {train:?}, test {test:?}");
        assert_eq!((data.train.len(), data.test.len()), (4000, 1000));
        assert!(train.iter().chain(&test).all(|&c| c > 100));
        assert!(data.train.iter().all(|e| !e.text.contains("<br")));
    } else {
        eprintln!("skipped: {} not fetched", food.display());
    }
    let bbc = asset_cache().join("bbc-topics/data");
    if bbc.is_dir() {
        let examples = load_bbc_topics(&bbc, BbcText::TitleAndLead).unwrap();
        let counts = count(&examples, 5);
        eprintln!("bbc-topics: business/entertainment/politics/sports/tech {counts:?}");
        assert_eq!(counts, [510, 386, 417, 511, 401]);
    } else {
        eprintln!("skipped: {} not fetched", bbc.display());
    }
}

/// The paired "from dyn-eval" differences compare a TinT row with the dyn-eval row trained in the
/// same format with the same loss (not with whichever dyn-eval row ran first), and dyn-eval's own
/// rows with its first: checked on the committed BBC-topics run, which has dyn-eval and TinT with
/// both the label and the full-context loss.
#[test]
fn tint_rows_are_paired_with_the_dyn_eval_row_of_their_own_loss() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/data/icl-smollm2-table1-bbc.json");
    let text = std::fs::read_to_string(&path).expect("the committed BBC report");
    let mut report: tint_eval::icl::IclReport = serde_json::from_str(&text).unwrap();
    report.compute_paired(&Default::default());
    let cell = |method: &str, loss: &str| {
        report
            .cells
            .iter()
            .find(|c| {
                c.key.k == 4 && c.key.method.starts_with(method) && c.key.row_label().contains(loss)
            })
            .unwrap_or_else(|| panic!("{method} {loss}"))
    };
    let mut checked = 0;
    for loss in ["label]", "full-context]"] {
        let (tint, dyn_eval) = (cell("tint-structured", loss), cell("dyn-eval", loss));
        let pair = report
            .paired
            .iter()
            .find(|p| {
                !p.calibrated
                    && p.diff.method == tint.key.row_label()
                    && p.diff.baseline.starts_with("dyn-eval")
            })
            .expect("TinT against dyn-eval");
        assert_eq!(pair.diff.baseline, dyn_eval.key.row_label(), "{loss}");
        // Same seeds and examples: the mean paired difference is the difference of accuracies.
        let expected = tint.accuracy_mean - dyn_eval.accuracy_mean;
        assert!(
            (pair.diff.mean - expected).abs() < 1e-12,
            "{loss}: {pair:?}"
        );
        checked += 1;
    }
    assert_eq!(checked, 2);
    // dyn-eval with the full-context loss is compared with dyn-eval's first row (the label loss).
    let (full, first) = (
        cell("dyn-eval", "full-context]"),
        cell("dyn-eval", "label]"),
    );
    assert!(
        report
            .paired
            .iter()
            .any(|p| p.diff.method == full.key.row_label()
                && p.diff.baseline == first.key.row_label())
    );
    assert!(report
        .paired_markdown()
        .contains("of its own format and loss"));

    // `--render-only` rewrites the paired differences and the markdown from the cells, which it
    // keeps to the last bit (JSON floats round-trip exactly).
    let dir = std::env::temp_dir().join(format!("tint-render-only-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("bbc.json");
    std::fs::write(&out, &text).unwrap();
    let rendered = tint_eval::icl::run::render_icl_report(&out).unwrap();
    let stored: tint_eval::icl::IclReport = serde_json::from_str(&text).unwrap();
    assert_eq!(rendered.cells, stored.cells);
    assert_eq!(rendered.paired, report.paired);
    let reread = tint_eval::icl::IclReport::read_json(&out).unwrap();
    assert_eq!(reread.cells, stored.cells);
    let md = std::fs::read_to_string(out.with_extension("md")).unwrap();
    assert!(md.contains("of its own format and loss"), "{md}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A method whose gold-label NLL on a balanced two-class dev set is smallest at `value = 1e-2`
/// (scores `[−ln(value / 1e-2), 0]` whatever the query), for the tuning rule.
struct PeakAt1e2 {
    value: f64,
}

impl tint_eval::icl::IclMethod for PeakAt1e2 {
    fn name(&self) -> String {
        "peak".into()
    }
    fn trains(&self) -> bool {
        true
    }
    fn adapt(&mut self, _: &tint_eval::icl::TrainingSequences) -> Result<(), EvalError> {
        Ok(())
    }
    fn score(&mut self, _: &tint_eval::icl::ScoreRequest<'_>) -> Result<Vec<f64>, EvalError> {
        Ok(vec![-(self.value / 1e-2).ln(), 0.0])
    }
}

/// The ICL step size is bracketed as the LM's: a best value on the grid's largest edge extends
/// the grid by its ratio until it is interior (recorded as extensions), and with too few
/// extensions allowed the run stops with `Unbracketed` instead of choosing an edge.
#[test]
fn icl_tuning_extends_an_edge_choice_until_it_is_interior() {
    use tint_eval::icl::{tune_icl, IclMethod, IclSettings, TaskData};
    let tokenizer = AuxTokenizer::from_dir(&micro_dir()).unwrap();
    let template = Template::for_task(TaskKind::Mr);
    let encoder = PromptEncoder::new(&tokenizer, &template, 256, 64).unwrap();
    let example = |i: usize| Example {
        text: ["good", "bad film", "a fine cast", "dull"][i % 4].into(),
        label: usize::from(i.is_multiple_of(2)),
    };
    let dev = TaskData {
        task: TaskKind::Mr,
        train: (0..8).map(example).collect(),
        test: (0..4).map(example).collect(),
    };
    let settings = IclSettings {
        k: 2,
        seeds: vec![0],
        format: DemoFormat::Single,
        loss: TrainLoss::LabelOnly,
        balanced: true,
        demos_in_context: None,
        method_settings: String::new(),
        prior: None,
        allow_non_finite: false,
    };
    let grid = [1e-4, 3e-4, 9e-4];
    let mut make =
        |value: f64| -> Result<Box<dyn IclMethod>, EvalError> { Ok(Box::new(PeakAt1e2 { value })) };
    let mut seen = Vec::new();
    let mut tune = |max_extensions: usize| {
        tune_icl(
            "peak on mr",
            "lr",
            &grid,
            max_extensions,
            &encoder,
            &dev,
            &settings,
            &mut make,
            &mut |done, total| seen.push((done, total)),
        )
    };
    let record = tune(3).unwrap();
    let err = tune(2).unwrap_err();
    assert_eq!(record.extended, vec![2.7e-3, 8.1e-3, 2.43e-2]);
    assert_eq!(record.choice, 8.1e-3);
    assert!(record.is_interior() && record.interior);
    assert_eq!(record.given_grid(), grid.to_vec());
    // Progress counts every scored value: 6 values of 4 dev examples.
    assert!(seen.contains(&(24, 24)), "{seen:?}");
    let message = err.to_string();
    assert!(
        matches!(err, tint_eval::EvalError::Unbracketed(_)) && message.contains("largest"),
        "{message}"
    );
}

/// Balanced evaluation sets: every class gets its quota (the first classes one more when the
/// count does not divide), the rest stays in the pool, and a class that is too rare is named.
#[test]
fn balanced_test_sets_hold_each_class_s_quota() {
    use tint_eval::icl::TaskData;
    // 9 positives, 3 negatives, sorted by label as files often are.
    let examples: Vec<Example> = (0..12)
        .map(|i| Example {
            text: format!("text {i}"),
            label: usize::from(i < 9),
        })
        .collect();
    let count = |set: &[Example], label| set.iter().filter(|e| e.label == label).count();
    let data = TaskData::split_balanced(TaskKind::Mr, examples.clone(), 5, 3).unwrap();
    assert_eq!((count(&data.test, 0), count(&data.test, 1)), (3, 2));
    assert_eq!(data.train.len(), 7);
    let again = TaskData::split_balanced(TaskKind::Mr, examples.clone(), 5, 3).unwrap();
    assert_eq!(data.test, again.test, "the seed fixes the draw");
    let Err(err) = TaskData::split_balanced(TaskKind::Mr, examples.clone(), 8, 3) else {
        panic!("4 negatives are not available");
    };
    let message = err.to_string();
    assert!(
        message.contains("needs 4 examples of class 0, and there are 3"),
        "{message}"
    );
    let mut official = TaskData {
        task: TaskKind::Mr,
        train: Vec::new(),
        test: examples,
    };
    official.subsample_test_balanced(6, 1).unwrap();
    assert_eq!((count(&official.test, 0), count(&official.test, 1)), (3, 3));
}
