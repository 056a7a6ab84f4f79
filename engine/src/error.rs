//! The engine's error type. Every variant names what was wrong (kernel, buffer, shape, limit).

use thiserror::Error;

/// Errors from the engine. User-facing paths return these; nothing panics on bad input.
#[derive(Debug, Error)]
pub enum EngineError {
    /// No adapter could be obtained (no WebGPU, no Vulkan/Metal/DX12/GL driver).
    #[error("no GPU adapter available: {0}")]
    NoAdapter(String),
    /// The adapter exists but lacks limits or features the workload needs.
    #[error("the GPU adapter '{adapter}' cannot run this workload:\n{missing}")]
    AdapterLimits {
        /// Adapter name as the driver reports it.
        adapter: String,
        /// One line per missing limit or feature: what is needed, what the adapter offers.
        missing: String,
    },
    /// The device could not be created.
    #[error("could not create the GPU device: {0}")]
    RequestDevice(String),
    /// The device was lost (driver reset, tab backgrounded, out of memory).
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
    /// A GPU validation or out-of-memory error reported by the driver.
    #[error("GPU error: {0}")]
    Gpu(String),
    /// Reading a buffer back failed.
    #[error("reading back buffer '{label}' failed: {reason}")]
    Readback {
        /// Which buffer.
        label: String,
        /// Why.
        reason: String,
    },
    /// An operation was given operands whose shapes do not fit.
    #[error("{op}: {detail}")]
    Shape {
        /// The operation (kernel) name.
        op: &'static str,
        /// What is wrong, with the shapes involved.
        detail: String,
    },
    /// A buffer would exceed a device limit.
    #[error(
        "buffer '{label}' needs {bytes} bytes but the device allows at most {limit} per {what}"
    )]
    TooLarge {
        /// Buffer label.
        label: String,
        /// Requested size.
        bytes: u64,
        /// The limit in force.
        limit: u64,
        /// Which limit ("buffer", "storage binding").
        what: &'static str,
    },
    /// A file is not in the format it claims, or is truncated or inconsistent.
    #[error("{file}: {detail}")]
    Format {
        /// The file (or bundle shard) at fault.
        file: String,
        /// What is wrong, with the tensor, field or line.
        detail: String,
    },
    /// A file could not be read.
    #[error("cannot read {path}: {detail}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        detail: String,
    },
    /// Story retrieval failed: bad corpus input, an inconsistent index or blob, a bad query.
    #[error("retrieval: {0}")]
    Retrieval(#[from] crate::retrieval::RetrievalError),
    /// Quantization input was not representable (NaN/Inf, bad dimensions).
    #[error("quantize '{tensor}': {detail}")]
    Quantize {
        /// Tensor name.
        tensor: String,
        /// What is wrong.
        detail: String,
    },
    /// Constrained decoding: the grammar could not be built or the matcher failed.
    #[error("grammar: {0}")]
    Grammar(String),
    /// A question the answer pipeline refuses (empty, too long).
    #[error("question: {0}")]
    Question(String),
}

/// Result alias for the engine.
pub type Result<T> = std::result::Result<T, EngineError>;

/// Shorthand for a shape error.
pub(crate) fn shape_err(op: &'static str, detail: impl Into<String>) -> EngineError {
    EngineError::Shape {
        op,
        detail: detail.into(),
    }
}
