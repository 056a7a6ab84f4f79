# Sourced by the builds of wasm with threads (scripts/build-threads.sh, the threaded browser
# tests in test.sh): nightly Rust, std rebuilt with atomics (`-Z build-std`, set by the caller),
# shared memory, in its own target folder so the stable build's fingerprints stay valid.
export RUSTUP_TOOLCHAIN=nightly
# The stable build lints the same code (scripts/lint-env.sh); nightly has no clippy installed.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
export CARGO_TARGET_DIR="$PWD/target/threads"
# RUSTFLAGS replaces .cargo/config.toml's wasm flags, so simd128 is repeated; relaxed SIMD
# (the 4-bit dot products' i32x4.relaxed_dot_i8x16_i7x16_add) only here: public/worker-boot.js
# runs this build only where the browser validates a relaxed-SIMD module. rustc no longer
# adds the shared-memory link arguments for +atomics; wasm-bindgen needs the memory imported
# and the TLS symbols exported. Shared memory must declare a maximum: 4 GiB (wasm32's limit).
export RUSTFLAGS="-C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128,+relaxed-simd \
-C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=4294967296 \
-C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size \
-C link-arg=--export=__tls_align -C link-arg=--export=__tls_base"
