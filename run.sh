#!/usr/bin/env bash
# The main job. Today (kernel layer only): checks the GPU adapter and runs the kernel
# benchmark. With the decoder, bundle, index and web app (issues 3-7) it fetches the demo
# model, embedder and corpus, builds the demo bundle and serves the app on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
cargo bench -p lorekeeper-engine --bench gemv "$@"
