#![no_main]

libfuzzer_sys::fuzz_target!(|stream: tachyon_fuzz::roundtrip::Stream| tachyon_fuzz::roundtrip::run(&stream));
