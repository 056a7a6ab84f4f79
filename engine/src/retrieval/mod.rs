//! Story retrieval: corpus ingest and chunking.

pub mod chunk;
pub mod corpus;
pub mod error;

pub use chunk::{chunk_segments, Chunk, ChunkConfig, Position};
pub use corpus::{ingest, CorpusFormat, IngestOptions, Segment};
pub use error::{Result, RetrievalError};
