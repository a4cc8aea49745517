//! Marked sections of the markdown reports in `docs/`: moved to [`tint_eval::results_doc`] (this
//! path stays for the commands that still import it).

pub(crate) use tint_eval::results_doc::write_marked_section;
