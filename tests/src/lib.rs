//! Test bodies shared by the native runner (`tests/kernels.rs`) and the browser runner
//! (`tests/web.rs`): each check builds seeded random inputs whose shapes are not multiples of
//! the workgroup sizes, runs one op on a [`Backend`], and compares with an f64 oracle under the
//! op's stated [`Tolerance`].

pub mod decoder;
pub mod oracle;
pub mod suite;
