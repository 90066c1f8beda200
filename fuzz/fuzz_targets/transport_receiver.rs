#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tachyon_fuzz::transport_receiver(data));
