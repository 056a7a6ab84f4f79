//! The page: mounts the Leptos app (everything else lives in `ui`).

#[cfg(target_arch = "wasm32")]
fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(lorekeeper_app::ui::App);
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("the web page builds for wasm32 with Trunk: `trunk build --release` (see README.md)");
}
