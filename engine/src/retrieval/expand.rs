//! Query expansion from the story's own words: BM25 also searches, for each word of the
//! question, the story's words nearest to it by the index's embedder, at a weight below the
//! question's own words.
//!
//! Questions paraphrase ("a patch of worthless dry land" for "an acre of barren ground";
//! "ocean" for "sea"), and BM25 matches only the words written. The [`Lexicon`], built with the
//! index, holds one int8 vector per English word of the story (its BM25 term, embedded in its
//! most frequent spelling). At query time each question word is embedded too
//! ([`query_words`]); [`Lexicon::expand`] adds the story's terms within
//! [`ExpansionConfig::min_cosine`] of it, at most [`ExpansionConfig::per_word`] per word, each
//! weighted `weight · cos^power` (the largest over the question's words) beside the question's
//! own terms at their counts.
//!
//! Measured on the development sets (`lorekeeper eval-retrieval`, README "The story index"),
//! with fusion weights dense 0.4, BM25 0.6 ([`crate::retrieval::FusionConfig::expanded`]).
//! The neighbours of a word are related words, not only synonyms (`father` → `parent`,
//! `mother`), which is why they weigh less than the question's own words. The story's names
//! ([`StoryWords::names`]) and the names a question writes with a capital are never expanded
//! nor added. Words in CJK scripts are not expanded (their BM25 terms are character bigrams).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::bm25::term;
use super::corpus::is_cjk;
use super::error::{Result, RetrievalError};

/// Question words with their embeddings ([`query_words`], embedded by the index's encoder).
pub type WordVectors = Vec<(String, Vec<f32>)>;
/// Question words with the story's terms that expand them and their cosines
/// ([`Lexicon::neighbours`]).
pub type Neighbours = Vec<(String, Vec<(String, f32)>)>;

/// How far [`Lexicon::expand`] reaches.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExpansionConfig {
    /// Weight of an added term at cosine 1 (a question's own term weighs 1 per occurrence);
    /// 0 turns expansion off.
    pub weight: f32,
    /// The least cosine between a question word and a story word for the latter to be added.
    pub min_cosine: f32,
    /// At most this many story words per question word, nearest first.
    pub per_word: u32,
    /// An added term weighs `weight · cos^power`.
    pub power: f32,
}

impl Default for ExpansionConfig {
    /// The best mean recall@10 + MRR over *Alice* and *The Tempest* of 606 settings (cosine
    /// 0.4–0.7, 1–25 words, weight 0.2–1, power 1–2, dense weight 0.3–0.6).
    fn default() -> Self {
        ExpansionConfig {
            weight: 0.7,
            min_cosine: 0.45,
            per_word: 8,
            power: 2.0,
        }
    }
}

/// The story's expandable words (module docs) with their embeddings, int8 with one scale per
/// word chosen so the reconstruction has unit norm.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lexicon {
    /// Each word's BM25 term.
    terms: Vec<String>,
    /// The story's names ([`StoryWords::names`]), sorted: never expanded.
    names: Vec<String>,
    /// Vector width.
    dim: u32,
    /// `terms.len() × dim` codes, row-major.
    codes: Vec<i8>,
    /// Per word: the factor that makes its codes a unit vector.
    scales: Vec<f32>,
    /// Expansion settings.
    pub config: ExpansionConfig,
}

/// Whether `word` (a [`super::bm25::tokenize`] word) can be expanded or added: it has a Latin letter and no
/// CJK character.
fn expandable(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_alphabetic()) && !word.chars().any(is_cjk)
}

/// The story's expandable words ([`story_words`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoryWords {
    /// Each BM25 term that is not a name, with its most frequent spelling (ties: the first in
    /// byte order), in term order: what the index builder embeds for [`Lexicon::new`].
    pub words: Vec<(String, String)>,
    /// The terms written with a capital in at least [`NAME_SHARE`] of at least two occurrences
    /// (`Alice`, `Prospero`, `Rabbit` in "the White Rabbit"), in term order. A name is who or
    /// what a question is about, not a way of saying it: a name is never expanded, nor added
    /// to a question (all-MiniLM-L6-v2 puts `alice` near `mary` and `ann`).
    pub names: Vec<String>,
}

/// The least share of a term's occurrences written with a capital for it to be a name.
pub const NAME_SHARE: f32 = 0.8;

/// The words of `text` as [`super::bm25::tokenize`] gives them (lower case) with whether each was written
/// with a capital; words in CJK scripts are left out.
fn cased_words(text: &str) -> impl Iterator<Item = (String, bool)> + '_ {
    text.split(|c: char| !c.is_alphanumeric() || is_cjk(c))
        .filter(|w| !w.is_empty())
        .map(|w| (w.to_lowercase(), w.starts_with(char::is_uppercase)))
}

/// The story's expandable words and names ([`StoryWords`]) in `texts`.
pub fn story_words<'a>(texts: impl IntoIterator<Item = &'a str>) -> StoryWords {
    // Per term: each spelling's count, and how many occurrences were capitalized.
    let mut seen: BTreeMap<String, (BTreeMap<String, u32>, u32)> = BTreeMap::new();
    for text in texts {
        for (word, capital) in cased_words(text) {
            if !expandable(&word) {
                continue;
            }
            if let Some(t) = term(word.clone()) {
                let (spellings, capitals) = seen.entry(t).or_default();
                *spellings.entry(word).or_default() += 1;
                *capitals += u32::from(capital);
            }
        }
    }
    let mut out = StoryWords::default();
    for (t, (spellings, capitals)) in seen {
        let n: u32 = spellings.values().sum();
        if n >= 2 && capitals as f32 >= NAME_SHARE * n as f32 {
            out.names.push(t);
            continue;
        }
        // max_by_key keeps the last maximum; iterate in reverse so ties go to the first.
        if let Some((w, _)) = spellings.into_iter().rev().max_by_key(|&(_, n)| n) {
            out.words.push((t, w));
        }
    }
    out
}

/// The words of `query` that [`Lexicon::expand`] may read, in order, each once: its
/// expandable words that are not stopwords, less those written with a capital after the
/// first word (a name the question gives).
pub fn query_words(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, (word, capital)) in cased_words(query).enumerate() {
        if (capital && i > 0) || !expandable(&word) || out.contains(&word) {
            continue;
        }
        if term(word.clone()).is_some() {
            out.push(word);
        }
    }
    out
}

impl Lexicon {
    /// A lexicon of `terms` (from [`story_words`]) with their embeddings `vectors`, one per term,
    /// all of one width, and the story's `names`.
    pub fn new(
        terms: Vec<String>,
        vectors: &[Vec<f32>],
        mut names: Vec<String>,
        config: ExpansionConfig,
    ) -> Result<Self> {
        names.sort();
        names.dedup();
        let bad = |m: String| RetrievalError::Vectors(format!("lexicon: {m}"));
        if terms.len() != vectors.len() {
            return Err(bad(format!(
                "{} vectors for {} words",
                vectors.len(),
                terms.len()
            )));
        }
        let dim = vectors.first().map_or(0, Vec::len);
        let mut codes = Vec::with_capacity(terms.len() * dim);
        let mut scales = Vec::with_capacity(terms.len());
        for (t, v) in terms.iter().zip(vectors) {
            if v.len() != dim {
                return Err(bad(format!(
                    "the vector of {t:?} has {} values, the first has {dim}",
                    v.len()
                )));
            }
            if v.iter().any(|x| !x.is_finite()) {
                return Err(bad(format!("the vector of {t:?} is not finite")));
            }
            let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
            let row: Vec<i8> = if max > 0.0 {
                v.iter()
                    .map(|x| (x / max * 127.0).round().clamp(-127.0, 127.0) as i8)
                    .collect()
            } else {
                vec![0; dim]
            };
            let norm = row
                .iter()
                .map(|&c| f32::from(c) * f32::from(c))
                .sum::<f32>()
                .sqrt();
            scales.push(if norm > 0.0 { 1.0 / norm } else { 0.0 });
            codes.extend(row);
        }
        let lexicon = Lexicon {
            terms,
            names,
            dim: u32::try_from(dim).map_err(|_| bad(format!("vector width {dim}")))?,
            codes,
            scales,
            config,
        };
        lexicon.validate().map_err(bad)?;
        Ok(lexicon)
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether it holds no word.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Vector width.
    pub fn dim(&self) -> usize {
        self.dim as usize
    }

    /// Whether `term` is one of the story's names.
    pub fn is_name(&self, term: &str) -> bool {
        self.names
            .binary_search_by(|n| n.as_str().cmp(term))
            .is_ok()
    }

    /// The words of `query` to embed for [`Lexicon::expand`]: its [`query_words`] that are not
    /// the story's names; none when expansion is off.
    pub fn query_words(&self, query: &str) -> Vec<String> {
        if self.config.weight <= 0.0 || self.config.per_word == 0 || self.is_empty() {
            return Vec::new();
        }
        query_words(query)
            .into_iter()
            .filter(|w| term(w.clone()).is_none_or(|t| !self.is_name(&t)))
            .collect()
    }

    /// The cosine of word `i`'s stored vector with `v` (unit-norm).
    fn cosine(&self, i: usize, v: &[f32]) -> f32 {
        let d = self.dim as usize;
        let row = &self.codes[i * d..(i + 1) * d];
        // Eight running sums, so the compiler can keep them in SIMD lanes (one sum is a chain
        // of dependent adds); a search scans every word for each question word.
        let mut acc = [0f32; 8];
        let (rc, vc) = (row.chunks_exact(8), v.chunks_exact(8));
        let tail: f32 = rc
            .remainder()
            .iter()
            .zip(vc.remainder())
            .map(|(&c, &x)| f32::from(c) * x)
            .sum();
        for (r, x) in rc.zip(vc) {
            for j in 0..8 {
                acc[j] += f32::from(r[j]) * x[j];
            }
        }
        (acc.iter().sum::<f32>() + tail) * self.scales[i]
    }

    /// The story's terms nearest to `v` (a unit vector of width [`Lexicon::dim`]) with their
    /// cosines, nearest first (ties: term order), at most `n`, none below `min_cosine`.
    pub fn nearest(&self, v: &[f32], n: usize, min_cosine: f32) -> Result<Vec<(&str, f32)>> {
        if v.len() != self.dim() {
            return Err(RetrievalError::Query(format!(
                "a word vector of {} values for a lexicon of width {}",
                v.len(),
                self.dim
            )));
        }
        let mut near: Vec<(usize, f32)> = (0..self.len())
            .map(|i| (i, self.cosine(i, v)))
            .filter(|&(_, c)| c >= min_cosine)
            .collect();
        near.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        near.truncate(n);
        Ok(near
            .into_iter()
            .map(|(i, c)| (self.terms[i].as_str(), c))
            .collect())
    }

    /// For each of `words` (each a [`query_words`] word with its embedding), the story's terms
    /// that expand it (module docs): at most [`ExpansionConfig::per_word`], nearest first,
    /// none under [`ExpansionConfig::min_cosine`], none of `terms` (the question's own BM25
    /// terms) nor the word's own term; none when expansion is off.
    pub fn neighbours(
        &self,
        terms: &BTreeMap<String, f32>,
        words: &[(String, Vec<f32>)],
    ) -> Result<Neighbours> {
        let c = self.config;
        if c.weight <= 0.0 || c.per_word == 0 {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(words.len());
        for (word, v) in words {
            let own = term(word.clone());
            // The neighbours beyond the question's own terms: ask for enough to skip them.
            let n = c.per_word as usize + terms.len() + 1;
            let near = self
                .nearest(v, n, c.min_cosine)?
                .into_iter()
                .filter(|&(t, _)| !terms.contains_key(t) && own.as_deref() != Some(t))
                .take(c.per_word as usize)
                .map(|(t, cos)| (t.to_string(), cos))
                .collect();
            out.push((word.clone(), near));
        }
        Ok(out)
    }

    /// `terms` (the question's BM25 terms with their weights) with the expansions of `words`
    /// (each a [`query_words`] word with its embedding) added (module docs). A term already in
    /// `terms` keeps its weight.
    pub fn expand(
        &self,
        terms: &mut BTreeMap<String, f32>,
        words: &[(String, Vec<f32>)],
    ) -> Result<()> {
        let near = self.neighbours(terms, words)?;
        self.add(terms, &near);
        Ok(())
    }

    /// `terms` with the [`Lexicon::neighbours`] `near` added, each weighted `weight ·
    /// cos^power` (the largest over the words it expands).
    pub fn add(&self, terms: &mut BTreeMap<String, f32>, near: &Neighbours) {
        let c = self.config;
        let mut added: BTreeMap<String, f32> = BTreeMap::new();
        for (t, cos) in near.iter().flat_map(|(_, n)| n) {
            let w = c.weight * cos.powf(c.power);
            let e = added.entry(t.clone()).or_insert(0.0);
            *e = e.max(w);
        }
        terms.extend(added);
    }

    /// Checks a deserialized lexicon's structure.
    pub(crate) fn validate(&self) -> std::result::Result<(), String> {
        let n = self.terms.len();
        let want = (n as u64).checked_mul(u64::from(self.dim));
        if want != Some(self.codes.len() as u64) || self.scales.len() != n {
            return Err(format!(
                "lexicon of {n} words × {} values holds {} codes and {} scales",
                self.dim,
                self.codes.len(),
                self.scales.len()
            ));
        }
        if self.names.windows(2).any(|w| w[0] >= w[1]) {
            return Err("lexicon names are not sorted".into());
        }
        if self.scales.iter().any(|s| !s.is_finite() || *s < 0.0) {
            return Err("lexicon scales are not finite and non-negative".into());
        }
        let c = self.config;
        let finite = [c.weight, c.min_cosine, c.power]
            .iter()
            .all(|x| x.is_finite());
        if !finite || c.weight < 0.0 || c.power < 0.0 {
            return Err(format!("lexicon settings out of range: {c:?}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn story_words_take_the_most_frequent_spelling_and_set_names_apart() {
        let story = story_words([
            "The sailors drowned; a sailor drowning, drowned again. Alice wept.",
            "多谢 Alice 1865. Storms came; storms went. ALICE! The White Rabbit ran.",
            "Rabbit, said the Queen.",
        ]);
        let words = &story.words;
        let get = |t: &str| words.iter().find(|(x, _)| x == t).map(|(_, w)| w.as_str());
        assert_eq!(get("drown"), Some("drowned"));
        // `sailors` and `sailor` once each: the first in byte order.
        assert_eq!(get("sailor"), Some("sailor"));
        // `Storms` once capitalized in two: a word. `Alice` and `Rabbit` always: names.
        // `Queen` and `White` once: too few to tell, words.
        assert_eq!(get("storm"), Some("storms"));
        assert_eq!(story.names, ["alic", "rabbit"]);
        assert!(get("alic").is_none() && get("queen").is_some() && get("white").is_some());
        assert!(get("the").is_none() && get("1865").is_none());
        assert!(words.iter().all(|(_, w)| !w.chars().any(is_cjk)));
        assert_eq!(
            query_words("Whom did Alice see drowned, who DROWNED, in 1865?"),
            ["see", "drowned"]
        );
        assert_eq!(query_words("Drowned sailors?"), ["drowned", "sailors"]);
        // The story's names are not expanded even when the question writes them in lower case.
        let v = vec![unit(&[1.0, 0.0, 0.0])];
        let cfg = ExpansionConfig::default();
        let lex = Lexicon::new(vec!["see".into()], &v, story.names.clone(), cfg).expect("lexicon");
        assert_eq!(lex.query_words("did alice see the rabbit?"), ["see"]);
    }

    #[test]
    fn nearest_words_match_exact_cosines() {
        // 37-wide vectors (not a SIMD width), pseudo-random.
        let mut rng = crate::rng::Pcg32::new(3);
        let vecs: Vec<Vec<f32>> = (0..23)
            .map(|_| unit(&(0..37).map(|_| rng.next_f32() - 0.5).collect::<Vec<_>>()))
            .collect();
        let terms: Vec<String> = (0..23).map(|i| format!("w{i:02}")).collect();
        let lex = Lexicon::new(terms, &vecs, vec![], ExpansionConfig::default()).expect("lexicon");
        let q = &vecs[5];
        let near = lex.nearest(q, 23, -1.0).expect("nearest");
        assert_eq!(near[0], ("w05", near[0].1));
        for (t, c) in &near {
            let i: usize = t[1..].parse().expect("index");
            let exact: f32 = vecs[i].iter().zip(q).map(|(a, b)| a * b).sum();
            // int8 codes with a per-word scale: within 0.01 of the f32 cosine.
            assert!((c - exact).abs() < 0.01, "{t}: {c} against {exact}");
        }
        assert!(near.windows(2).all(|w| w[0].1 >= w[1].1));
        assert!(lex.nearest(&q[..36], 3, 0.0).is_err());
    }

    #[test]
    fn expansion_adds_near_words_below_the_question_own() {
        let e = |x: f32, y: f32| unit(&[x, y, 0.1]);
        let terms = ["sea", "ocean", "land", "ship"].map(String::from).to_vec();
        let vecs = [e(1.0, 0.1), e(1.0, 0.0), e(0.0, 1.0), e(0.7, 0.7)];
        let config = ExpansionConfig {
            per_word: 2,
            ..ExpansionConfig::default()
        };
        let lex = Lexicon::new(terms, &vecs, vec![], config).expect("lexicon");
        let mut q: BTreeMap<String, f32> = [("ocean".to_string(), 1.0)].into();
        lex.expand(&mut q, &[("ocean".into(), e(1.0, 0.0))])
            .expect("expand");
        // `ocean` keeps 1; `sea` (cos ≈ 0.99) and `ship` (≈ 0.70) come in below it; `land`
        // (≈ 0.01) does not.
        assert_eq!(q["ocean"], 1.0);
        let cos_sea: f32 = e(1.0, 0.1)
            .iter()
            .zip(e(1.0, 0.0))
            .map(|(a, b)| a * b)
            .sum();
        assert!((q["sea"] - 0.7 * cos_sea * cos_sea).abs() < 0.02, "{q:?}");
        assert!(q["ship"] < q["sea"] && q["ship"] > 0.2, "{q:?}");
        assert!(!q.contains_key("land"));
        // Weight 0: nothing added.
        let mut off = lex.clone();
        off.config.weight = 0.0;
        let mut q2: BTreeMap<String, f32> = [("ocean".to_string(), 1.0)].into();
        off.expand(&mut q2, &[("ocean".into(), e(1.0, 0.0))])
            .expect("expand");
        assert_eq!(q2.len(), 1);
    }

    #[test]
    fn malformed_lexicons_are_refused() {
        let v = vec![unit(&[1.0, 2.0, 3.0])];
        let two = |vecs: &[Vec<f32>]| {
            Lexicon::new(
                vec!["a".into(), "b".into()],
                vecs,
                vec![],
                ExpansionConfig::default(),
            )
        };
        // One vector for two words; two vectors of different widths.
        assert!(two(&v).is_err());
        assert!(two(&[vec![1.0, 0.0, 0.0], vec![1.0, 0.0]]).is_err());
        let mut lex =
            Lexicon::new(vec!["a".into()], &v, vec![], ExpansionConfig::default()).expect("ok");
        lex.codes.pop();
        assert!(lex.validate().is_err());
    }
}
