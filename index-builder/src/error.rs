//! Errors of the builder: each names the file and, where there is one, the tensor or line.

use std::path::Path;

/// A build failure.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// From the engine (formats, quantization, tokenizer, config).
    #[error(transparent)]
    Engine(#[from] lorekeeper_engine::EngineError),
    /// Reading or writing a file (full disk included).
    #[error("{path}: {detail}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        detail: String,
    },
    /// Bad input.
    #[error("{file}: {detail}")]
    Input {
        /// The file.
        file: String,
        /// What is wrong.
        detail: String,
    },
    /// A LoRA adapter that cannot be merged.
    #[error("LoRA adapter {file}: {detail}")]
    Lora {
        /// The adapter file.
        file: String,
        /// What is wrong.
        detail: String,
    },
}

impl BuildError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, e: std::io::Error) -> BuildError {
        let detail = match e.raw_os_error() {
            Some(28) => format!("{e} (the disk is full; nothing was committed)"),
            _ => e.to_string(),
        };
        BuildError::Io {
            path: path.display().to_string(),
            detail,
        }
    }
}

/// Result with [`BuildError`].
pub type Result<T> = std::result::Result<T, BuildError>;
