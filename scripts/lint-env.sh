# Sourced by ./test.sh (not run): the lints ride on the builds. Every workspace crate that a
# later cargo command compiles (native tests, benches and examples; the wasm32 engine and
# browser tests; the page's two binaries under Trunk) goes through clippy-driver with warnings
# denied, exactly what `cargo clippy -- -D warnings` runs on it, while the dependencies are
# built by plain rustc (cargo passes them --cap-lints allow). A separate `cargo clippy` would
# check every dependency once more per target: 6 minutes native and 8–11 wasm32 of a fresh
# CI run. Cargo hashes the wrapper into the workspace crates' file names, so every build in
# the run must source this (test.sh does, before its first build); the threaded wasm build
# unsets it (nightly: scripts/threads-env.sh).
# An empty wrapper would make cargo build without lints and say nothing: refuse instead.
export RUSTC_WORKSPACE_WRAPPER
RUSTC_WORKSPACE_WRAPPER=$(command -v clippy-driver) || {
  echo "scripts/lint-env.sh: clippy-driver not found (rustup component add clippy)" >&2
  return 1
}
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
