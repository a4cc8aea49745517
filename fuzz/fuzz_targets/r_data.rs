//! R serialization: `.rds` and `.rda` streams (plain or gzip), and the data-frame view of what parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tint_eval::icl::r_data::{read_rda, read_rds};

fuzz_target!(|data: &[u8]| {
    if let Ok(object) = read_rds(data) {
        let _ = object.to_data_frame();
    }
    if let Ok(objects) = read_rda(data) {
        for (_, object) in objects {
            let _ = object.to_data_frame();
        }
    }
});
