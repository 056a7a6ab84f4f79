#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| lorekeeper_fuzz::safetensors(data));
