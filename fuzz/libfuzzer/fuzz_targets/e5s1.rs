#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| lorekeeper_fuzz::e5s1(data));
