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
use tint_eval::icl::{DemoFormat, Example, IclError, PromptEncoder, TaskKind, Template, TrainLoss};

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
    assert!(matches!(
        load_sst2_tsv(&dir.join("sst2/test.tsv")),
        Err(IclError::Parse { line: 1, .. })
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
        Err(IclError::BadLabel { line: 2, .. })
    ));
    let open = write(&dir, "open.csv", "1,\"never closed\n");
    assert!(matches!(
        load_label_text_csv(&open, 2),
        Err(IclError::Parse { .. })
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
        Err(IclError::Parse { .. })
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
        Err(IclError::BadLabel { .. })
    ));
    let empty = write(&dir, "empty.csv", "\n");
    assert!(matches!(
        load_label_text_csv(&empty, 2),
        Err(IclError::Empty { .. })
    ));
    assert!(matches!(
        load_label_text_csv(&dir.join("missing.csv"), 2),
        Err(IclError::Io { .. })
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
        Err(IclError::Parse { line: 1, .. })
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
        Err(IclError::Empty { .. })
    ));

    let data = load_offline_task(TaskKind::BbcTopics, &bbc, 2, 7).unwrap();
    assert_eq!((data.train.len(), data.test.len()), (3, 2));
    assert!(load_offline_task(TaskKind::BbcTopics, &bbc, 5, 7).is_err());
    assert!(load_offline_task(TaskKind::Sst2, &bbc, 2, 7).is_err());
}

#[test]
fn task_names_round_trip() {
    for task in TaskKind::ALL {
        assert_eq!(TaskKind::parse(task.name()).unwrap(), task);
        assert_eq!(Template::for_task(task).n_classes(), task.n_classes());
    }
    assert!(matches!(
        TaskKind::parse("imdb"),
        Err(IclError::UnknownTask { .. })
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
        Err(IclError::PromptTooLong { .. })
    ));
    assert!(PromptEncoder::new(&tokenizer, &template, 0, 64).is_err());
    let mut one_word = template.clone();
    one_word.label_words.truncate(1);
    assert!(PromptEncoder::new(&tokenizer, &one_word, 16, 64).is_err());
}

// ---------------------------------------------------------------------------------------------
// R serialization reader and the Amazon fine-food loader, on byte streams written by hand here.

use tint_eval::icl::loaders::{load_amazon_fine_food, strip_html};
use tint_eval::icl::r_data::{read_rda, read_rds, Column, RDataError, RObject, RValue, MAX_DEPTH};

/// R's XDR serialization written byte by byte (big-endian 32-bit words).
mod rb {
    pub(crate) const NIL: i32 = 0xfe;

    pub(crate) fn int(out: &mut Vec<u8>, v: i32) {
        out.extend(v.to_be_bytes());
    }

    /// `X\n`, version 3, written by R 4.2.0, readable by R 3.5.0, native encoding UTF-8.
    pub(crate) fn header() -> Vec<u8> {
        let mut out = b"X\n".to_vec();
        for v in [3, 0x0004_0200, 0x0003_0500, 5] {
            int(&mut out, v);
        }
        out.extend(b"UTF-8");
        out
    }

    /// A CHARSXP with `gp` bits (64 ASCII, 8 UTF-8, 4 Latin-1); `None` is NA.
    pub(crate) fn chars(out: &mut Vec<u8>, gp: i32, s: Option<&[u8]>) {
        int(out, 0x09 | (gp << 12));
        match s {
            None => int(out, -1),
            Some(s) => {
                int(out, s.len() as i32);
                out.extend(s);
            }
        }
    }

    pub(crate) fn symbol(out: &mut Vec<u8>, name: &str) {
        int(out, 0x01);
        chars(out, 64, Some(name.as_bytes()));
    }

    pub(crate) fn strings(out: &mut Vec<u8>, flags: i32, items: &[Option<&str>]) {
        int(out, 0x10 | flags);
        int(out, items.len() as i32);
        for s in items {
            chars(out, 64, s.map(str::as_bytes));
        }
    }

    pub(crate) fn ints(out: &mut Vec<u8>, flags: i32, items: &[i32]) {
        int(out, 0x0d | flags);
        int(out, items.len() as i32);
        for &v in items {
            int(out, v);
        }
    }

    /// One tagged attribute cell (flags 0x402: LISTSXP with a tag); the caller writes the value
    /// and then either another cell or [`NIL`].
    pub(crate) fn tag_cell(out: &mut Vec<u8>, name: &str) {
        int(out, 0x402);
        symbol(out, name);
    }

    /// A tibble-like data frame (`product`, `review`, `score`), as in `modeldata`'s
    /// `small_fine_foods`: `score` is a factor with levels great/other whose `class` symbol is a
    /// back reference, and the row names are the compact form c(NA, -n).
    pub(crate) fn fine_food_frame(out: &mut Vec<u8>, rows: &[(&str, Option<&str>, i32)]) {
        let n = rows.len() as i32;
        int(out, 0x313); // VECSXP, object, attributes
        int(out, 3);
        let products: Vec<Option<&str>> = rows.iter().map(|r| Some(r.0)).collect();
        strings(out, 0, &products);
        let reviews: Vec<Option<&str>> = rows.iter().map(|r| r.1).collect();
        strings(out, 0, &reviews);
        let codes: Vec<i32> = rows.iter().map(|r| r.2).collect();
        ints(out, 0x300, &codes); // factor: object with attributes
        tag_cell(out, "levels"); // symbol #1
        strings(out, 0, &[Some("great"), Some("other")]);
        tag_cell(out, "class"); // symbol #2
        strings(out, 0, &[Some("factor")]);
        int(out, NIL);
        // Data frame attributes: class (back reference #2), row.names, names.
        int(out, 0x402);
        int(out, (2 << 8) | 0xff);
        strings(out, 0, &[Some("tbl_df"), Some("tbl"), Some("data.frame")]);
        tag_cell(out, "row.names");
        ints(out, 0, &[i32::MIN, -n]);
        tag_cell(out, "names");
        strings(out, 0, &[Some("product"), Some("review"), Some("score")]);
        int(out, NIL);
    }

    pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }
}

fn rds_of(body: &[u8]) -> Vec<u8> {
    let mut out = rb::header();
    out.extend(body);
    out
}

fn str_values(items: &[Option<&str>]) -> RValue {
    RValue::Strings(items.iter().map(|s| s.map(String::from)).collect())
}

#[test]
fn r_data_reads_every_supported_type() {
    use rb::*;
    // NILVALUE_SXP and NILSXP.
    assert_eq!(
        read_rds(&rds_of(&[0, 0, 0, 0xfe])).unwrap().value,
        RValue::Null
    );
    assert_eq!(
        read_rds(&rds_of(&[0, 0, 0, 0])).unwrap().value,
        RValue::Null
    );

    // STRSXP of CHARSXPs: ASCII, NA, UTF-8, Latin-1.
    let mut b = Vec::new();
    int(&mut b, 0x10);
    int(&mut b, 4);
    chars(&mut b, 64, Some(b"ab"));
    chars(&mut b, 0, None);
    chars(&mut b, 8, Some("é".as_bytes()));
    chars(&mut b, 4, Some(&[0xe9]));
    assert_eq!(
        read_rds(&rds_of(&b)).unwrap().value,
        str_values(&[Some("ab"), None, Some("é"), Some("é")])
    );

    // INTSXP with NA, LGLSXP with NA, REALSXP with NA_real_ (a NaN) and infinity.
    let mut b = Vec::new();
    ints(&mut b, 0, &[1, i32::MIN, -3]);
    assert_eq!(
        read_rds(&rds_of(&b)).unwrap().value,
        RValue::Integers(vec![Some(1), None, Some(-3)])
    );
    let mut b = Vec::new();
    int(&mut b, 0x0a);
    int(&mut b, 3);
    for v in [1, 0, i32::MIN] {
        int(&mut b, v);
    }
    assert_eq!(
        read_rds(&rds_of(&b)).unwrap().value,
        RValue::Logicals(vec![Some(true), Some(false), None])
    );
    let mut b = Vec::new();
    int(&mut b, 0x0e);
    int(&mut b, 3);
    for v in [1.5f64, f64::NEG_INFINITY, f64::NAN] {
        b.extend(v.to_be_bytes());
    }
    let RValue::Reals(v) = read_rds(&rds_of(&b)).unwrap().value else {
        panic!("not reals");
    };
    assert_eq!(&v[..2], &[1.5, f64::NEG_INFINITY]);
    assert!(v[2].is_nan());

    // A long length (-1, upper half, lower half).
    let mut b = Vec::new();
    int(&mut b, 0x0d);
    for v in [-1, 0, 2, 7, 8] {
        int(&mut b, v);
    }
    assert_eq!(
        read_rds(&rds_of(&b)).unwrap().value,
        RValue::Integers(vec![Some(7), Some(8)])
    );

    // SYMSXP, then a VECSXP whose attribute tags reuse it by REFSXP (index in the flags and, for
    // index 0, in the next word).
    let mut b = Vec::new();
    int(&mut b, 0x213);
    int(&mut b, 2);
    symbol(&mut b, "names"); // ref #1
    int(&mut b, 0x0e);
    int(&mut b, 0);
    int(&mut b, 0x402);
    int(&mut b, (1 << 8) | 0xff);
    strings(&mut b, 0, &[Some("s"), Some("r")]);
    int(&mut b, 0x402);
    int(&mut b, 0xff);
    int(&mut b, 1);
    strings(&mut b, 0, &[Some("again")]);
    int(&mut b, NIL);
    let list = read_rds(&rds_of(&b)).unwrap();
    assert_eq!(
        list.value,
        RValue::List(vec![
            RObject::new(RValue::Symbol("names".into())),
            RObject::new(RValue::Reals(vec![])),
        ])
    );
    assert_eq!(list.attributes.len(), 2);
    assert_eq!(list.string_attr("names").unwrap(), ["s", "r"]);

    // LISTSXP: a pairlist with attributes on its first cell, tags and an untagged cell.
    let mut b = Vec::new();
    int(&mut b, 0x602); // attributes + tag
    tag_cell(&mut b, "comment");
    strings(&mut b, 0, &[Some("hi")]);
    int(&mut b, NIL);
    symbol(&mut b, "a");
    ints(&mut b, 0, &[1]);
    int(&mut b, 0x02); // untagged second cell
    chars(&mut b, 64, Some(b"z"));
    int(&mut b, NIL);
    let pairlist = read_rds(&rds_of(&b)).unwrap();
    assert_eq!(
        pairlist.value,
        RValue::Pairlist(vec![
            (
                Some("a".into()),
                RObject::new(RValue::Integers(vec![Some(1)]))
            ),
            (None, RObject::new(RValue::Char(Some("z".into())))),
        ])
    );
    assert_eq!(pairlist.string_attr("comment").unwrap(), ["hi"]);

    // ALTREP compact_intseq (state c(n, first, step) as doubles) with attributes, and wrap_real.
    let altrep = |class: &str, state: &dyn Fn(&mut Vec<u8>), attrs: bool| {
        let mut b = Vec::new();
        int(&mut b, 238);
        int(&mut b, 0x02);
        symbol(&mut b, class);
        int(&mut b, 0x02);
        symbol(&mut b, "base");
        int(&mut b, 0x02);
        ints(&mut b, 0, &[13]);
        int(&mut b, NIL);
        state(&mut b);
        if attrs {
            tag_cell(&mut b, "names");
            strings(&mut b, 0, &[Some("a"), Some("b"), Some("c")]);
        }
        int(&mut b, NIL);
        read_rds(&rds_of(&b))
    };
    let seq = altrep(
        "compact_intseq",
        &|b| {
            int(b, 0x0e);
            int(b, 3);
            for v in [3.0f64, 10.0, -2.0] {
                b.extend(v.to_be_bytes());
            }
        },
        true,
    )
    .unwrap();
    assert_eq!(
        seq.value,
        RValue::Integers(vec![Some(10), Some(8), Some(6)])
    );
    assert_eq!(seq.string_attr("names").unwrap(), ["a", "b", "c"]);
    let wrapped = altrep(
        "wrap_real",
        &|b| {
            int(b, 0x02);
            int(b, 0x0e);
            int(b, 1);
            b.extend(2.5f64.to_be_bytes());
            int(b, 0x02);
            ints(b, 0, &[0, 0]);
            int(b, NIL);
        },
        false,
    )
    .unwrap();
    assert_eq!(wrapped.value, RValue::Reals(vec![2.5]));
    let err = altrep("deferred_string", &|b| int(b, NIL), false).unwrap_err();
    assert!(
        matches!(&err, RDataError::UnsupportedAltrep { class, offset: 23 } if class == "deferred_string"),
        "{err}"
    );

    // Gzip-compressed, and an .rda file (RDX3 + a tagged top-level pairlist).
    let mut b = Vec::new();
    ints(&mut b, 0, &[4]);
    assert_eq!(
        read_rds(&rb::gzip(&rds_of(&b))).unwrap().value,
        RValue::Integers(vec![Some(4)])
    );
    let mut rda = b"RDX3\n".to_vec();
    rda.extend(rds_of(&[]));
    tag_cell(&mut rda, "x");
    ints(&mut rda, 0, &[5]);
    tag_cell(&mut rda, "y");
    strings(&mut rda, 0, &[None]);
    int(&mut rda, NIL);
    let objects = read_rda(&rb::gzip(&rda)).unwrap();
    assert_eq!(objects.len(), 2);
    assert_eq!(objects[0].0, "x");
    assert_eq!(objects[1].1.value, str_values(&[None]));
}

#[test]
fn r_data_data_frames_and_factors() {
    let mut b = Vec::new();
    rb::fine_food_frame(
        &mut b,
        &[
            ("B01", Some("Yum"), 1),
            ("B02", None, 2),
            ("B03", Some("Meh"), i32::MIN),
        ],
    );
    let frame = read_rds(&rds_of(&b)).unwrap();
    assert!(frame.inherits("data.frame") && frame.inherits("tbl_df"));
    let df = frame.to_data_frame().unwrap();
    assert_eq!(df.n_rows, 3);
    let score = df.column("score").unwrap();
    assert!(matches!(score, Column::Factor { levels, .. } if levels == &["great", "other"]));
    assert_eq!(
        score.as_labels().unwrap(),
        vec![Some("great".into()), Some("other".into()), None]
    );
    assert_eq!(
        df.column("review").unwrap().as_labels().unwrap(),
        vec![Some("Yum".into()), None, Some("Meh".into())]
    );
    assert!(matches!(df.column("rating"), Err(RDataError::DataFrame(_))));
    // A plain list is no data frame.
    let list = RObject::new(RValue::List(vec![]));
    assert!(matches!(
        list.to_data_frame(),
        Err(RDataError::DataFrame(_))
    ));
}

#[test]
fn r_data_errors_are_typed() {
    use rb::*;
    let header_len = rb::header().len();
    // Truncation anywhere in a valid stream.
    let mut b = Vec::new();
    fine_food_frame(&mut b, &[("B01", Some("Good"), 1), ("B02", Some("Bad"), 2)]);
    let full = rds_of(&b);
    read_rds(&full).unwrap();
    for cut in header_len..full.len() {
        match read_rds(&full[..cut]) {
            Err(RDataError::Truncated { offset, .. }) => assert!(offset <= cut, "{cut}"),
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    for cut in 0..header_len {
        assert!(read_rds(&full[..cut]).is_err(), "{cut}");
    }
    // A truncated gzip layer.
    let zipped = rb::gzip(&full);
    assert!(matches!(
        read_rds(&zipped[..zipped.len() / 2]),
        Err(RDataError::Gzip(_))
    ));

    // Unknown and unsupported SEXP types, with the offset of their flags.
    let err = read_rds(&rds_of(&[0, 0, 0, 99])).unwrap_err();
    assert!(
        matches!(err, RDataError::UnknownSexp { code: 99, offset } if offset == header_len),
        "{err}"
    );
    let mut b = Vec::new();
    int(&mut b, 0x13);
    int(&mut b, 1);
    int(&mut b, 0x04); // ENVSXP inside a list
    let err = read_rds(&rds_of(&b)).unwrap_err();
    assert!(
        matches!(err, RDataError::UnsupportedSexp { name: "ENVSXP", code: 4, offset } if offset == header_len + 8),
        "{err}"
    );
    assert!(err.to_string().contains("ENVSXP"));
    for (code, name) in [
        (3i32, "CLOSXP"),
        (6, "LANGSXP"),
        (24, "RAWSXP"),
        (253, "GLOBALENV_SXP"),
    ] {
        let err = read_rds(&rds_of(&code.to_be_bytes())).unwrap_err();
        assert!(
            matches!(err, RDataError::UnsupportedSexp { name: n, .. } if n == name),
            "{err}"
        );
    }
    // A back reference before any symbol, a negative length, a symbol named by a non-string.
    let err = read_rds(&rds_of(&((3 << 8) | 0xff_i32).to_be_bytes())).unwrap_err();
    assert!(
        matches!(
            err,
            RDataError::BadReference {
                index: 3,
                known: 0,
                ..
            }
        ),
        "{err}"
    );
    let mut b = Vec::new();
    int(&mut b, 0x0d);
    int(&mut b, -5);
    assert!(matches!(
        read_rds(&rds_of(&b)),
        Err(RDataError::BadLength { length: -5, .. })
    ));
    let mut b = Vec::new();
    int(&mut b, 0x01);
    ints(&mut b, 0, &[1]);
    assert!(matches!(
        read_rds(&rds_of(&b)),
        Err(RDataError::Unexpected { .. })
    ));
    // A huge length is a truncation, not an allocation.
    let mut b = Vec::new();
    int(&mut b, 0x0e);
    int(&mut b, i32::MAX);
    assert!(matches!(
        read_rds(&rds_of(&b)),
        Err(RDataError::Truncated { .. })
    ));
    // Deep nesting.
    let mut b = Vec::new();
    for _ in 0..=MAX_DEPTH + 1 {
        int(&mut b, 0x13);
        int(&mut b, 1);
    }
    assert!(matches!(
        read_rds(&rds_of(&b)),
        Err(RDataError::TooDeep { .. })
    ));

    // Headers: other formats, versions, compressions, and an .rda given to read_rds.
    let mut ascii = b"A\n".to_vec();
    ascii.extend(&rb::header()[2..]);
    assert!(matches!(
        read_rds(&ascii),
        Err(RDataError::UnsupportedFormat { format: "ascii" })
    ));
    let mut v4 = rb::header();
    v4[5] = 4;
    assert!(matches!(
        read_rds(&v4),
        Err(RDataError::UnsupportedVersion { version: 4 })
    ));
    assert!(matches!(
        read_rds(b"BZh91AY&SY"),
        Err(RDataError::UnsupportedCompression { method: "bzip2" })
    ));
    assert!(matches!(
        read_rds(b"\xfd7zXZ\0\0"),
        Err(RDataError::UnsupportedCompression { method: "xz" })
    ));
    assert!(matches!(
        read_rds(b"hello"),
        Err(RDataError::BadMagic { .. })
    ));
    assert!(matches!(read_rda(&full), Err(RDataError::BadMagic { .. })));
}

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
    let data = load_offline_task(TaskKind::AmazonFineFood, &rds_dir, 1, 3).unwrap();
    assert_eq!((data.train.len(), data.test.len()), (3, 1));

    // Errors: a missing file, a corrupt stream, a frame without the expected columns.
    assert!(matches!(
        load_amazon_fine_food(&dir.join("nothing-here")),
        Err(IclError::Empty { .. })
    ));
    std::fs::write(rds_dir.join("testing_data.rds"), b"X\n\0\0").unwrap();
    assert!(matches!(
        load_amazon_fine_food(&rds_dir),
        Err(IclError::Parse { .. })
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
        Err(IclError::InvalidSetting { .. })
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
