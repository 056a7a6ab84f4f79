//! Where the quoted spans sit in a passage, and where `[E3]` citation markers sit in an
//! answer: plain text pieces the page renders as text nodes (never as HTML).

/// A piece of a passage: text, and whether a quote covers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The text.
    pub text: String,
    /// Inside a quote.
    pub quoted: bool,
}

/// Splits `text` into pieces with every quote marked. Quotes match whitespace-insensitively,
/// as the engine's quote check does; overlapping quotes merge; a quote that is not in the text
/// marks nothing.
pub fn quoted_pieces(text: &str, quotes: &[&str]) -> Vec<Piece> {
    let chars: Vec<char> = text.chars().collect();
    // Non-whitespace characters and where each sits in `chars`.
    let (dense, at): (Vec<char>, Vec<usize>) = chars
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_whitespace())
        .map(|(i, c)| (*c, i))
        .unzip();
    let mut marked = vec![false; chars.len()];
    for q in quotes {
        let needle: Vec<char> = q.chars().filter(|c| !c.is_whitespace()).collect();
        if needle.is_empty() || needle.len() > dense.len() {
            continue;
        }
        let mut from = 0;
        while let Some(off) = find(&dense[from..], &needle) {
            let s = from + off;
            let e = s + needle.len() - 1;
            for m in &mut marked[at[s]..=at[e]] {
                *m = true;
            }
            from = s + 1;
        }
    }
    let mut out: Vec<Piece> = Vec::new();
    for (c, m) in chars.iter().zip(&marked) {
        match out.last_mut() {
            Some(p) if p.quoted == *m => p.text.push(*c),
            _ => out.push(Piece {
                text: c.to_string(),
                quoted: *m,
            }),
        }
    }
    out
}

fn find(hay: &[char], needle: &[char]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A piece of an answer: text or a citation of an evidence id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnswerPiece {
    /// Plain text.
    Text(String),
    /// `[E3]` → `E3`.
    Cite(String),
}

/// Splits an answer at its `[E#]` markers.
pub fn answer_pieces(text: &str) -> Vec<AnswerPiece> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("[E") {
        let after = &rest[at + 2..];
        let digits = after.chars().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 && after[digits..].starts_with(']') {
            if at > 0 {
                out.push(AnswerPiece::Text(rest[..at].to_string()));
            }
            out.push(AnswerPiece::Cite(format!("E{}", &after[..digits])));
            rest = &after[digits + 1..];
        } else {
            out.push(AnswerPiece::Text(rest[..at + 2].to_string()));
            rest = after;
        }
    }
    if !rest.is_empty() {
        out.push(AnswerPiece::Text(rest.to_string()));
    }
    // Merge neighbouring text pieces.
    let mut merged: Vec<AnswerPiece> = Vec::new();
    for p in out {
        match (merged.last_mut(), p) {
            (Some(AnswerPiece::Text(a)), AnswerPiece::Text(b)) => a.push_str(&b),
            (_, p) => merged.push(p),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(p: &[Piece]) -> String {
        p.iter()
            .map(|p| {
                if p.quoted {
                    format!("<{}>", p.text)
                } else {
                    p.text.clone()
                }
            })
            .collect()
    }

    #[test]
    fn quotes_are_marked_whitespace_insensitively() {
        let t = "it was labelled  ORANGE\nMARMALADE, but to her great disappointment it was empty";
        let p = quoted_pieces(t, &["ORANGE MARMALADE", "it was empty", "not there"]);
        assert_eq!(
            render(&p),
            "it was labelled  <ORANGE\nMARMALADE>, but to her great disappointment <it was empty>"
        );
        // Pieces put back together are the text, character for character.
        assert_eq!(p.iter().map(|p| p.text.as_str()).collect::<String>(), t);
    }

    #[test]
    fn overlapping_and_cjk_quotes() {
        let p = quoted_pieces("宝玉笑道：好妹妹", &["宝玉笑", "笑道：好"]);
        assert_eq!(render(&p), "<宝玉笑道：好>妹妹");
        assert_eq!(render(&quoted_pieces("abc", &["", "  "])), "abc");
        assert_eq!(render(&quoted_pieces("", &["x"])), "");
    }

    #[test]
    fn citation_markers() {
        use AnswerPiece::*;
        assert_eq!(
            answer_pieces("The Knave [E2] stole them [E10].[Ex] [E"),
            vec![
                Text("The Knave ".into()),
                Cite("E2".into()),
                Text(" stole them ".into()),
                Cite("E10".into()),
                Text(".[Ex] [E".into()),
            ]
        );
        assert_eq!(answer_pieces(""), vec![]);
    }
}
