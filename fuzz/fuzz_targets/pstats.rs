#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tachyon_fuzz::pstats(data));
