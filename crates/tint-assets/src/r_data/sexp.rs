//! SEXP type codes (R's `Rinternals.h`), the serialization pseudo-types (`serialize.c`) and the
//! flag bits of an item.

pub(super) const NILSXP: u32 = 0;
pub(super) const SYMSXP: u32 = 1;
pub(super) const LISTSXP: u32 = 2;
pub(super) const CHARSXP: u32 = 9;
pub(super) const LGLSXP: u32 = 10;
pub(super) const INTSXP: u32 = 13;
pub(super) const REALSXP: u32 = 14;
pub(super) const STRSXP: u32 = 16;
pub(super) const VECSXP: u32 = 19;
pub(super) const ALTREP_SXP: u32 = 238;
pub(super) const NILVALUE_SXP: u32 = 254;
pub(super) const REFSXP: u32 = 255;

/// R's name of a SEXP type code, `None` for a code R does not define.
pub fn sexp_name(code: u32) -> Option<&'static str> {
    Some(match code {
        0 => "NILSXP",
        1 => "SYMSXP",
        2 => "LISTSXP",
        3 => "CLOSXP",
        4 => "ENVSXP",
        5 => "PROMSXP",
        6 => "LANGSXP",
        7 => "SPECIALSXP",
        8 => "BUILTINSXP",
        9 => "CHARSXP",
        10 => "LGLSXP",
        13 => "INTSXP",
        14 => "REALSXP",
        15 => "CPLXSXP",
        16 => "STRSXP",
        17 => "DOTSXP",
        18 => "ANYSXP",
        19 => "VECSXP",
        20 => "EXPRSXP",
        21 => "BCODESXP",
        22 => "EXTPTRSXP",
        23 => "WEAKREFSXP",
        24 => "RAWSXP",
        25 => "S4SXP",
        238 => "ALTREP_SXP",
        239 => "ATTRLISTSXP",
        240 => "ATTRLANGSXP",
        241 => "BASEENV_SXP",
        242 => "EMPTYENV_SXP",
        243 => "BCREPREF",
        244 => "BCREPDEF",
        245 => "GENERICREFSXP",
        246 => "CLASSREFSXP",
        247 => "PERSISTSXP",
        248 => "PACKAGESXP",
        249 => "NAMESPACESXP",
        250 => "BASENAMESPACE_SXP",
        251 => "MISSINGARG_SXP",
        252 => "UNBOUNDVALUE_SXP",
        253 => "GLOBALENV_SXP",
        254 => "NILVALUE_SXP",
        255 => "REFSXP",
        _ => return None,
    })
}

pub(super) const HAS_ATTR: u32 = 1 << 9;
pub(super) const HAS_TAG: u32 = 1 << 10;
/// `gp` bits of a `CHARSXP` (levels, i.e. flags >> 12).
pub(super) const LATIN1_MASK: u32 = 1 << 2;
pub(super) const NA_INTEGER: i32 = i32::MIN;
