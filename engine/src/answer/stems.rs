//! Stems for matching the question's words with the evidence's: English suffixes cut
//! ([`stem`]), CJK bigrams kept.

use crate::retrieval::bm25;

/// A term cut to its stem for matching: `dropped` and `drops` match `drop`, `running` matches
/// `run` (English suffixes only; CJK bigrams are kept).
pub fn stem(t: &str) -> String {
    if !t.is_ascii() {
        return t.to_string();
    }
    for suf in ["ing", "ed", "es", "s", "ly"] {
        if let Some(base) = t.strip_suffix(suf) {
            if base.len() >= 3 {
                let b = base.as_bytes();
                let n = b.len();
                // A doubled final consonant (dropped → dropp → drop).
                if suf.len() > 1 && b[n - 1] == b[n - 2] && !b"aeiousl".contains(&b[n - 1]) {
                    return base[..n - 1].to_string();
                }
                return base.to_string();
            }
        }
    }
    t.to_string()
}

/// The stems ([`stem`]) of `text`'s BM25 tokens.
pub(super) fn stems(text: &str) -> Vec<String> {
    bm25::tokenize(text).iter().map(|t| stem(t)).collect()
}

/// Do two stems name the same word: equal, or one of four or more letters that the other
/// extends by at most two (`label` / `labell`)?
pub(super) fn same_stem(a: &str, b: &str) -> bool {
    let (s, l) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    s == l || (s.is_ascii() && s.len() >= 4 && l.len() <= s.len() + 2 && l.starts_with(s))
}
