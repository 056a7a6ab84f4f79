//! Writing a bundle part so that a failed run never leaves something that looks valid.
//!
//! Shards are written under temporary names (`.NAME.tmp`), hashed while written, fsynced and
//! renamed to `PART-NNNNN-<sha12>.bin`: names no older manifest uses. The manifest is the
//! commit point: it is written to `manifest.json.tmp`, fsynced and renamed over
//! `manifest.json`; only then are the old shards of the same part deleted. Until then, the
//! old manifest and its shards stay valid, and a [`ShardWriter`] dropped without
//! [`commit`] deletes every file it created.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use lorekeeper_engine::format::bundle::{
    hex, BundlePart, Manifest, ShardEntry, TensorEntry, MANIFEST_FILE,
};
use sha2::{Digest, Sha256};

use crate::error::{BuildError, Result};

/// Where a blob landed: shard index (within this writer) and byte offset.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    /// Index into the writer's shard list.
    pub shard: usize,
    /// Byte offset in that shard.
    pub offset: u64,
}

struct OpenShard {
    tmp: PathBuf,
    file: std::io::BufWriter<File>,
    hasher: Sha256,
    len: u64,
}

/// Packs blobs into shards of about `target` bytes; a blob never straddles two shards.
pub struct ShardWriter {
    dir: PathBuf,
    part: BundlePart,
    target: u64,
    cur: Option<OpenShard>,
    shards: Vec<ShardEntry>,
    created: Vec<PathBuf>,
    committed: bool,
}

fn prefix(part: BundlePart) -> &'static str {
    match part {
        BundlePart::Model => "model",
        BundlePart::Index => "index",
    }
}

impl ShardWriter {
    /// A writer into bundle folder `dir` (created if missing).
    pub fn new(dir: &Path, part: BundlePart, target: u64) -> Result<ShardWriter> {
        std::fs::create_dir_all(dir).map_err(|e| BuildError::io(dir, e))?;
        Ok(ShardWriter {
            dir: dir.to_path_buf(),
            part,
            target: target.max(1),
            cur: None,
            shards: Vec::new(),
            created: Vec::new(),
            committed: false,
        })
    }

    fn open_new(&mut self) -> Result<()> {
        let n = self.shards.len() + usize::from(self.cur.is_some());
        let tmp = self.dir.join(format!(".{}-{n:05}.tmp", prefix(self.part)));
        let file = File::create(&tmp).map_err(|e| BuildError::io(&tmp, e))?;
        self.created.push(tmp.clone());
        self.cur = Some(OpenShard {
            tmp,
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            hasher: Sha256::new(),
            len: 0,
        });
        Ok(())
    }

    fn close_current(&mut self) -> Result<()> {
        let Some(s) = self.cur.take() else {
            return Ok(());
        };
        let file = s
            .file
            .into_inner()
            .map_err(|e| BuildError::io(&s.tmp, e.into_error()))?;
        file.sync_all().map_err(|e| BuildError::io(&s.tmp, e))?;
        let sha = hex(&s.hasher.finalize());
        let name = format!(
            "{}-{:05}-{}.bin",
            prefix(self.part),
            self.shards.len(),
            &sha[..12]
        );
        let fin = self.dir.join(&name);
        std::fs::rename(&s.tmp, &fin).map_err(|e| BuildError::io(&fin, e))?;
        self.created.push(fin);
        self.shards.push(ShardEntry {
            file: name,
            part: self.part,
            bytes: s.len,
            sha256: sha,
        });
        Ok(())
    }

    /// Makes room for a blob of `len` bytes that must stay in one shard.
    pub fn begin(&mut self, len: u64) -> Result<Placement> {
        if let Some(c) = &self.cur {
            if c.len > 0 && c.len + len > self.target {
                self.close_current()?;
            }
        }
        if self.cur.is_none() {
            self.open_new()?;
        }
        let offset = self.cur.as_ref().map(|c| c.len).unwrap_or(0);
        Ok(Placement {
            shard: self.shards.len(),
            offset,
        })
    }

    /// Appends bytes to the current shard (after [`begin`](Self::begin)).
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        if self.cur.is_none() {
            self.open_new()?;
        }
        let Some(c) = self.cur.as_mut() else {
            return Ok(());
        };
        c.file
            .write_all(bytes)
            .map_err(|e| BuildError::io(&c.tmp, e))?;
        c.hasher.update(bytes);
        c.len += bytes.len() as u64;
        Ok(())
    }

    /// `begin` + `write` for a blob in memory.
    pub fn place(&mut self, bytes: &[u8]) -> Result<Placement> {
        let p = self.begin(bytes.len() as u64)?;
        self.write(bytes)?;
        Ok(p)
    }

    /// A standalone file of this part (the tokenizer): `PART-STEM-<sha12>.EXT`.
    pub fn file(&mut self, stem: &str, ext: &str, bytes: &[u8]) -> Result<ShardEntry> {
        let sha = lorekeeper_engine::format::bundle::sha256_hex(bytes);
        let name = format!("{}-{stem}-{}.{ext}", prefix(self.part), &sha[..12]);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        self.created.push(tmp.clone());
        let mut f = File::create(&tmp).map_err(|e| BuildError::io(&tmp, e))?;
        f.write_all(bytes).map_err(|e| BuildError::io(&tmp, e))?;
        f.sync_all().map_err(|e| BuildError::io(&tmp, e))?;
        let fin = self.dir.join(&name);
        std::fs::rename(&tmp, &fin).map_err(|e| BuildError::io(&fin, e))?;
        self.created.push(fin);
        Ok(ShardEntry {
            file: name,
            part: self.part,
            bytes: bytes.len() as u64,
            sha256: sha,
        })
    }

    /// Closes the last shard; the shard list in placement order.
    pub fn finish(&mut self) -> Result<Vec<ShardEntry>> {
        self.close_current()?;
        Ok(self.shards.clone())
    }

    /// Commits: writes the manifest with this part's shards (`shards`, including standalone
    /// files) after `update` set the part's section, atomically, then deletes the part's old
    /// shards. Other parts' shards and sections are kept.
    pub fn commit(
        mut self,
        shards: Vec<ShardEntry>,
        update: impl FnOnce(&mut Manifest),
    ) -> Result<Manifest> {
        let mpath = self.dir.join(MANIFEST_FILE);
        let mut m = read_manifest(&self.dir)?.unwrap_or_else(Manifest::empty);
        let old: Vec<String> = m
            .shards
            .iter()
            .filter(|s| s.part == self.part)
            .map(|s| s.file.clone())
            .collect();
        m.shards.retain(|s| s.part != self.part);
        m.shards.extend(shards);
        m.total_bytes = m.shards.iter().map(|s| s.bytes).sum();
        update(&mut m);
        m.validate(&mpath.display().to_string())?;
        let json = serde_json::to_vec_pretty(&m).map_err(|e| BuildError::Input {
            file: mpath.display().to_string(),
            detail: e.to_string(),
        })?;
        let tmp = self.dir.join(format!("{MANIFEST_FILE}.tmp"));
        self.created.push(tmp.clone());
        let mut f = File::create(&tmp).map_err(|e| BuildError::io(&tmp, e))?;
        f.write_all(&json).map_err(|e| BuildError::io(&tmp, e))?;
        f.sync_all().map_err(|e| BuildError::io(&tmp, e))?;
        std::fs::rename(&tmp, &mpath).map_err(|e| BuildError::io(&mpath, e))?;
        self.committed = true;
        let keep: Vec<&str> = m.shards.iter().map(|s| s.file.as_str()).collect();
        for f in old.iter().filter(|f| !keep.contains(&f.as_str())) {
            // A leftover old shard wastes space but breaks nothing; ignore removal errors.
            let _ = std::fs::remove_file(self.dir.join(f));
        }
        Ok(m)
    }
}

impl Drop for ShardWriter {
    fn drop(&mut self) {
        if !self.committed {
            for p in &self.created {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// The bundle's current manifest, if it has one. A manifest that does not parse is an error:
/// the builder never overwrites what it cannot read.
pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>> {
    let mpath = dir.join(MANIFEST_FILE);
    if !mpath.exists() {
        return Ok(None);
    }
    let bytes = std::fs::read(&mpath).map_err(|e| BuildError::io(&mpath, e))?;
    Ok(Some(Manifest::parse(&mpath.display().to_string(), &bytes)?))
}

/// Replaces the placeholder shard references (`#N`: shard `N` of a writer, as placed before the
/// shards had names) in `tensors`' parts with the names of `shards`, the writer's finished list.
pub fn resolve_shards<'a>(
    tensors: impl IntoIterator<Item = &'a mut TensorEntry>,
    shards: &[ShardEntry],
) {
    for t in tensors {
        for p in &mut t.parts {
            let i: usize = p.shard[1..].parse().unwrap_or(usize::MAX);
            p.shard = shards.get(i).map(|s| s.file.clone()).unwrap_or_default();
        }
    }
}
