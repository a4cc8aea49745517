//! R's XDR serialization (format `X`, version 3) written by hand, byte by byte (big-endian 32-bit
//! words): the one writer the tests of the R data reader, of the R lazy-load extraction and of the
//! tint-eval loaders share. Compiled for this crate's tests and, with the feature `test-support`,
//! for dependents' tests.
//!
//! Item layout (R's `serialize.c`): a flags word (type in bits 0–7, "is object" bit 8, "has
//! attributes" bit 9, "has tag" bit 10, `gp` levels in bits 12–27), then the item's content.

use std::io::Write;

/// `NILVALUE_SXP`: the `NULL` that ends a pairlist.
pub const NIL: i32 = 0xfe;

/// One big-endian 32-bit word.
pub fn int(out: &mut Vec<u8>, v: i32) {
    out.extend(v.to_be_bytes());
}

/// `X\n`, version 3, written by R 4.2.0, readable by R 3.5.0, native encoding UTF-8 (23 bytes).
pub fn header() -> Vec<u8> {
    let mut out = b"X\n".to_vec();
    for v in [3, 0x0004_0200, 0x0003_0500, 5] {
        int(&mut out, v);
    }
    out.extend(b"UTF-8");
    out
}

/// [`header`] followed by `body`: a whole `.rds` stream (uncompressed).
pub fn rds_of(body: &[u8]) -> Vec<u8> {
    let mut out = header();
    out.extend(body);
    out
}

/// A CHARSXP with `gp` bits (64 ASCII, 8 UTF-8, 4 Latin-1); `None` is NA.
pub fn chars(out: &mut Vec<u8>, gp: i32, s: Option<&[u8]>) {
    int(out, 0x09 | (gp << 12));
    match s {
        None => int(out, -1),
        Some(s) => {
            int(out, s.len() as i32);
            out.extend(s);
        }
    }
}

/// A SYMSXP written in full (the reader numbers it as the next referable object).
pub fn symbol(out: &mut Vec<u8>, name: &str) {
    int(out, 0x01);
    chars(out, 64, Some(name.as_bytes()));
}

/// A STRSXP with extra `flags` (e.g. `0x200`: attributes follow) of ASCII strings; `None` is NA.
pub fn strings(out: &mut Vec<u8>, flags: i32, items: &[Option<&str>]) {
    int(out, 0x10 | flags);
    int(out, items.len() as i32);
    for s in items {
        chars(out, 64, s.map(str::as_bytes));
    }
}

/// An INTSXP with extra `flags`.
pub fn ints(out: &mut Vec<u8>, flags: i32, items: &[i32]) {
    int(out, 0x0d | flags);
    int(out, items.len() as i32);
    for &v in items {
        int(out, v);
    }
}

/// A REALSXP.
pub fn reals(out: &mut Vec<u8>, items: &[f64]) {
    int(out, 0x0e);
    int(out, items.len() as i32);
    for v in items {
        out.extend(v.to_be_bytes());
    }
}

/// One tagged attribute cell (flags 0x402: LISTSXP with a tag, the tag symbol written in full);
/// the caller writes the value and then either another cell or [`NIL`].
pub fn tag_cell(out: &mut Vec<u8>, name: &str) {
    int(out, 0x402);
    symbol(out, name);
}

/// A complete attribute pairlist `names = items` (cell, value, [`NIL`]).
pub fn names_attr(out: &mut Vec<u8>, items: &[&str]) {
    tag_cell(out, "names");
    let items: Vec<Option<&str>> = items.iter().copied().map(Some).collect();
    strings(out, 0, &items);
    int(out, NIL);
}

/// A tibble-like data frame (`product`, `review`, `score`), as in `modeldata`'s
/// `small_fine_foods`: `score` is a factor with levels great/other whose `class` symbol is a
/// back reference (#2: the frame's own `levels` is #1), and the row names are the compact form
/// c(NA, -n).
pub fn fine_food_frame(out: &mut Vec<u8>, rows: &[(&str, Option<&str>, i32)]) {
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

/// `bytes` in a gzip stream (what `saveRDS` writes by default).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}
