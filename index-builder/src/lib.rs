//! Lorekeeper's build-time side: turns model weights and a story corpus into a
//! bundle the page and the desktop build load. The `index-builder` binary is a thin CLI over
//! this library; tests drive the library directly.

pub mod calibrate;
pub mod error;
pub mod index;
pub mod lora;
pub mod model;
pub mod source;
pub mod writer;

pub use error::{BuildError, Result};
pub use index::{build_index, IndexOptions, IndexSummary};
pub use model::{build_model, ModelOptions, ModelSummary};
