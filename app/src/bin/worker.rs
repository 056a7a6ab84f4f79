//! The engine's Web Worker: downloads and verifies the bundle, runs retrieval and generation.

#[cfg(target_arch = "wasm32")]
fn main() {
    lorekeeper_app::worker::start();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("the worker builds for wasm32 with Trunk: `trunk build --release` (see README.md)");
}
