//! Lorekeeper's web app: a Leptos page ([`ui`]) and the engine in a dedicated Web Worker
//! ([`worker`]), talking through the JSON messages of [`protocol`]. The page never runs the
//! model itself, so it stays responsive while the worker downloads, verifies and generates.
//!
//! [`protocol`], [`chat_log`], [`format`] and [`highlight`] are plain Rust, unit-tested natively; the page and
//! the worker build for wasm32 only (Trunk, see `Trunk.toml`).

pub mod chat_log;
pub mod format;
pub mod highlight;
pub mod protocol;

#[cfg(target_arch = "wasm32")]
pub mod ui;
#[cfg(target_arch = "wasm32")]
pub mod web;
#[cfg(target_arch = "wasm32")]
pub mod worker;
