//! The retrieval error type. Every variant names the input at fault (file, line, field, vector).

use thiserror::Error;

/// Errors from corpus ingest, index building, (de)serialization and search.
///
/// Nothing in [`crate::retrieval`] panics on user input; these carry what went wrong and where.
#[derive(Debug, Error)]
pub enum RetrievalError {
    /// The input looks like binary data (NUL bytes or many control characters), not text.
    #[error("{file}: binary data, not text ({reason})")]
    Binary {
        /// The input's name.
        file: String,
        /// What gave it away.
        reason: String,
    },
    /// The input is not valid UTF-8.
    #[error("{file}: line {line}: invalid UTF-8 at byte {byte} of the file")]
    InvalidUtf8 {
        /// The input's name.
        file: String,
        /// 1-based line of the first invalid byte.
        line: usize,
        /// 0-based byte offset of the first invalid byte.
        byte: usize,
    },
    /// One line exceeds the configured limit.
    #[error("{file}: line {line} is {bytes} bytes long, over the limit of {limit} bytes")]
    LineTooLong {
        /// The input's name.
        file: String,
        /// 1-based line number.
        line: usize,
        /// Its length in bytes.
        bytes: usize,
        /// The limit in force.
        limit: usize,
    },
    /// A line of a JSONL (or TSV) input could not be parsed.
    #[error("{file}: line {line}: {detail}")]
    Parse {
        /// The input's name.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong, with the field where known.
        detail: String,
    },
    /// A whole-document input (JSON alias file, configuration) could not be parsed.
    #[error("{file}: {detail}")]
    Document {
        /// The input's name.
        file: String,
        /// What is wrong.
        detail: String,
    },
    /// No text is left to index (empty input, only whitespace, only a Gutenberg licence).
    #[error("{0}: the corpus is empty (no text after stripping headers and commentary)")]
    EmptyCorpus(String),
    /// Embedding vectors are unusable (wrong count or dimension, NaN, zero norm).
    #[error("vectors: {0}")]
    Vectors(String),
    /// The entity lexicon cannot be built or is inconsistent.
    #[error("entity lexicon: {0}")]
    Lexicon(String),
    /// Chunks handed to the index builder are inconsistent.
    #[error("chunks: {0}")]
    Chunks(String),
    /// A query cannot be served (its vector does not fit the index, no dense index).
    #[error("query: {0}")]
    Query(String),
    /// A serialized index is not one, is corrupt, truncated or of another format version.
    #[error("story index blob: {0}")]
    Blob(String),
}

/// Result alias for retrieval.
pub type Result<T> = std::result::Result<T, RetrievalError>;
