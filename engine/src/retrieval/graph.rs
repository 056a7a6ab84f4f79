//! The entity graph: a lexicon of story entities, a bipartite chunk–entity graph, and
//! personalized PageRank from the entities a query names.
//!
//! # Lexicon
//!
//! Entities come from three places, in this order of precedence (a surface form already taken
//! by an earlier entity is not added again):
//!
//! 1. **The alias file** ([`parse_aliases`]): `canonical<TAB>alias<TAB>alias…` lines (blank lines
//!    and `#` comments skipped) or JSON, either `{"canonical": ["alias", …]}` or
//!    `[{"canonical": "…", "aliases": ["…"]}]`. This is the only source of CJK names.
//! 2. **Speakers** of the chunks' dialogue lines.
//! 3. **Recurring capitalized names** in English prose ([`detect_names`]). The heuristic: a word
//!    (a run of letters and inner apostrophes) counts as a *name occurrence* when it is
//!    capitalized (an upper-case first letter and a lower-case letter after it, so `VERY` does
//!    not count) and does **not** stand where English capitalizes anyway: the start of a line,
//!    after a sentence end (`.`, `!`, `?`, `…`, `:`, `;`) or right after an opening quote or
//!    bracket. A word is a name when it has at least [`GraphConfig::min_name_count`] (3) such
//!    occurrences, more than its all-lower-case occurrences anywhere (`the Rabbit` ×40 vs
//!    `rabbit` ×4 is a name; `Said` in a title is not), and is not a function word, title,
//!    weekday or month ([`STOPWORDS`]), nor a contraction of one (`I'm`, `I'll`). A possessive
//!    `'s` counts for its word. Multi-word names are found word by word.
//!
//! # Matching
//!
//! All surface forms go into one Aho-Corasick automaton (case-sensitive) for chunk text and one
//! ASCII-case-insensitive automaton for queries. A match of a form that begins (ends) with a
//! letter or digit must not be preceded (followed) by one, so `Al` never matches inside `Also`;
//! CJK forms match anywhere. Overlapping matches are resolved leftmost-longest. A chunk's mention
//! count of an entity is the number of such matches in its text.
//!
//! # Personalized PageRank
//!
//! The graph has one node per chunk and per entity; an edge joins a chunk and an entity it
//! mentions, weighted by the mention count. A walker at a node follows an edge with probability
//! proportional to its weight. The restart distribution `s` puts mass on the query's entities in
//! proportion to how often the query names them. With damping `d`, starting from `p₀ = s`:
//! `p ← (1 − d)·s + d·(Pᵀp + dangling(p)·s)`, where mass on nodes without edges restarts; the
//! iteration stops when the L1 change drops below [`GraphConfig::tolerance`] or after
//! [`GraphConfig::max_iterations`]. Chunks are ranked by their mass.
//!
//! The default is the classic `d = 0.85` run to convergence. ASA's MiniRAG variant walks 3 hops
//! with weight 0.35; setting `damping: 0.35, max_iterations: 3` gives that truncated walk, which
//! stays closer to the chunks that name the query's entities directly.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde::{Deserialize, Serialize};

use super::chunk::Chunk;
use super::corpus::{decode_text, is_cjk, DEFAULT_MAX_LINE_BYTES};
use super::error::{Result, RetrievalError};

/// Words never taken for names: function words, pronouns, titles, weekdays and months.
pub const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "after",
    "again",
    "all",
    "also",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "for",
    "from",
    "had",
    "has",
    "have",
    "he",
    "her",
    "here",
    "hers",
    "him",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "just",
    "let",
    "me",
    "my",
    "no",
    "not",
    "now",
    "of",
    "oh",
    "on",
    "once",
    "one",
    "only",
    "or",
    "our",
    "out",
    "please",
    "she",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "thou",
    "thee",
    "thy",
    "to",
    "too",
    "up",
    "very",
    "was",
    "we",
    "well",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "yes",
    "yet",
    "you",
    "your",
    "mr",
    "mrs",
    "ms",
    "dr",
    "st",
    "sir",
    "madam",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Lexicon and PageRank settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GraphConfig {
    /// Probability of following an edge rather than restarting.
    pub damping: f32,
    /// Most power iterations.
    pub max_iterations: u32,
    /// Stop when the L1 change of one iteration is below this.
    pub tolerance: f32,
    /// Detect recurring capitalized names in English prose.
    pub detect_names: bool,
    /// Name occurrences a word needs to become an entity.
    pub min_name_count: u32,
    /// Query entities linked to more than this share of the chunks are not used as seeds: like
    /// stopwords, they do not tell chunks apart (Alice appears in most of her book's chunks,
    /// and seeding from her ranks chunks by her prominence, not by the question).
    #[serde(default = "default_max_entity_share")]
    pub max_entity_share: f32,
}

fn default_max_entity_share() -> f32 {
    0.15
}

impl Default for GraphConfig {
    fn default() -> Self {
        GraphConfig {
            damping: 0.85,
            max_iterations: 50,
            tolerance: 1e-6,
            detect_names: true,
            min_name_count: 3,
            max_entity_share: default_max_entity_share(),
        }
    }
}

/// One line of an alias file: a canonical name and its other names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AliasEntry {
    /// The name entities are reported by.
    pub canonical: String,
    /// Other names of the same entity.
    #[serde(default)]
    pub aliases: Vec<String>,
}

/// Where an entity came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntitySource {
    /// The alias file.
    Alias,
    /// A dialogue speaker.
    Speaker,
    /// A recurring capitalized name.
    Name,
}

/// One entity of the lexicon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entity {
    /// Its canonical name.
    pub name: String,
    /// Every form matched in text: the name first, then its aliases.
    pub forms: Vec<String>,
    /// Where it came from.
    pub source: EntitySource,
}

/// Reads an alias file: TSV lines or JSON (module docs).
pub fn parse_aliases(name: &str, bytes: &[u8]) -> Result<Vec<AliasEntry>> {
    let text = decode_text(name, bytes, DEFAULT_MAX_LINE_BYTES)?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return parse_alias_json(name, trimmed);
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let mut fields = line.split('\t').map(str::trim);
        let canonical = fields.next().unwrap_or_default();
        if canonical.is_empty() {
            return Err(RetrievalError::Parse {
                file: name.to_string(),
                line: i + 1,
                detail: "the canonical name (first field) is empty".into(),
            });
        }
        out.push(AliasEntry {
            canonical: canonical.to_string(),
            aliases: fields.filter(|f| !f.is_empty()).map(String::from).collect(),
        });
    }
    Ok(out)
}

fn parse_alias_json(name: &str, text: &str) -> Result<Vec<AliasEntry>> {
    let err = |detail: String| RetrievalError::Document {
        file: name.to_string(),
        detail,
    };
    let entries: Vec<AliasEntry> = if text.starts_with('{') {
        let map: BTreeMap<String, Vec<String>> = serde_json::from_str(text)
            .map_err(|e| err(format!("expected {{\"canonical\": [\"alias\", …]}}: {e}")))?;
        map.into_iter()
            .map(|(canonical, aliases)| AliasEntry { canonical, aliases })
            .collect()
    } else {
        serde_json::from_str(text).map_err(|e| {
            err(format!(
                "expected [{{\"canonical\": …, \"aliases\": […]}}]: {e}"
            ))
        })?
    };
    if let Some(i) = entries.iter().position(|e| e.canonical.trim().is_empty()) {
        return Err(err(format!("entry {} has an empty canonical name", i + 1)));
    }
    Ok(entries)
}

/// Recurring capitalized names in `texts` (the heuristic in the module docs), most frequent
/// first, ties alphabetical.
pub fn detect_names<'a>(texts: impl IntoIterator<Item = &'a str>, min_count: u32) -> Vec<String> {
    let mut capitalized: HashMap<String, u32> = HashMap::new();
    let mut lower: HashMap<String, u32> = HashMap::new();
    for text in texts {
        let mut initial = true;
        let mut word = String::new();
        let mut word_initial = true;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            let inner_apostrophe = matches!(c, '\'' | '’')
                && !word.is_empty()
                && chars.peek().is_some_and(|n| n.is_alphabetic());
            if c.is_alphabetic() || inner_apostrophe {
                if word.is_empty() {
                    word_initial = initial;
                }
                word.push(c);
                continue;
            }
            if !word.is_empty() {
                count_word(
                    &std::mem::take(&mut word),
                    word_initial,
                    &mut capitalized,
                    &mut lower,
                );
                initial = false;
            }
            if matches!(c, '\n' | '.' | '!' | '?' | '…' | ':' | ';')
                || (matches!(c, '"' | '“' | '‘' | '`' | '\'' | '(' | '[' | '«')
                    && chars.peek().is_some_and(|n| n.is_alphabetic()))
            {
                initial = true;
            } else if c.is_alphanumeric() {
                initial = false;
            }
        }
        if !word.is_empty() {
            count_word(&word, word_initial, &mut capitalized, &mut lower);
        }
    }
    let mut names: Vec<(String, u32)> = capitalized
        .into_iter()
        .filter(|(w, n)| {
            let l = w.to_lowercase();
            *n >= min_count
                && *n > lower.get(&l).copied().unwrap_or(0)
                && !STOPWORDS.contains(&l.as_str())
                // Contractions of a stopword: "I'm", "I'll", "We've".
                && !l.split_once(['\'', '’']).is_some_and(|(head, _)| STOPWORDS.contains(&head))
        })
        .collect();
    names.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    names.into_iter().map(|(w, _)| w).collect()
}

fn count_word(
    word: &str,
    initial: bool,
    capitalized: &mut HashMap<String, u32>,
    lower: &mut HashMap<String, u32>,
) {
    // A possessive counts for the word itself: "Alice's" is "Alice".
    let word = word
        .strip_suffix("'s")
        .or_else(|| word.strip_suffix("’s"))
        .unwrap_or(word);
    let mut cs = word.chars();
    let first = cs.next().unwrap_or(' ');
    if first.is_uppercase() && cs.any(char::is_lowercase) {
        if !initial && word.chars().count() >= 2 {
            *capitalized.entry(word.to_string()).or_default() += 1;
        }
    } else if !word.chars().any(char::is_uppercase) {
        *lower.entry(word.to_string()).or_default() += 1;
    }
}

/// Whether `c` belongs to a word that matches must not cut (letters and digits, not CJK).
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() && !is_cjk(c)
}

/// Whether the match `start..end` of `text` cuts no word: a match that begins (ends) with a
/// word character must not be preceded (followed) by one.
/// An empty match, or one whose ends are not character boundaries (an empty surface form in
/// a crafted index matches between any two bytes), is no match.
fn at_word_boundaries(text: &str, start: usize, end: usize) -> bool {
    let (Some(m), Some(before), Some(after)) =
        (text.get(start..end), text.get(..start), text.get(end..))
    else {
        return false;
    };
    if m.is_empty() {
        return false;
    }
    let cuts_start = m.chars().next().is_some_and(is_word_char)
        && before.chars().next_back().is_some_and(is_word_char);
    let cuts_end = m.chars().next_back().is_some_and(is_word_char)
        && after.chars().next().is_some_and(is_word_char);
    !cuts_start && !cuts_end
}

/// The two automata over the lexicon's surface forms.
#[derive(Clone, Debug)]
struct Matcher {
    /// Case-sensitive, for chunk text.
    text: AhoCorasick,
    /// ASCII-case-insensitive, for queries.
    query: AhoCorasick,
    /// Entity of each pattern.
    entity_of: Vec<u32>,
}

impl Matcher {
    fn new(entities: &[Entity]) -> Result<Self> {
        let mut patterns = Vec::new();
        let mut entity_of = Vec::new();
        for (i, e) in entities.iter().enumerate() {
            for f in &e.forms {
                patterns.push(f.as_str());
                entity_of.push(i as u32);
            }
        }
        let build = |insensitive: bool| {
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::Standard)
                .ascii_case_insensitive(insensitive)
                .build(&patterns)
                .map_err(|e| RetrievalError::Lexicon(e.to_string()))
        };
        Ok(Matcher {
            text: build(false)?,
            query: build(true)?,
            entity_of,
        })
    }

    /// Mentions in `text` as (entity, count), sorted by entity.
    fn mentions(&self, ac: &AhoCorasick, text: &str) -> Vec<(u32, u32)> {
        let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
        for (entity, _) in self.positions(ac, text) {
            *counts.entry(entity).or_default() += 1;
        }
        counts.into_iter().collect()
    }

    /// Each mention in `text` as (entity, byte range), in text order: leftmost-longest among
    /// the matches that cut no word.
    fn positions(&self, ac: &AhoCorasick, text: &str) -> Vec<(u32, Range<usize>)> {
        let mut found: Vec<(usize, usize, u32)> = ac
            .find_overlapping_iter(text)
            .filter(|m| at_word_boundaries(text, m.start(), m.end()))
            .map(|m| (m.start(), m.end(), self.entity_of[m.pattern().as_usize()]))
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut out = Vec::new();
        let mut end = 0;
        for (s, e, entity) in found {
            if s >= end {
                out.push((entity, s..e));
                end = e;
            }
        }
        out
    }
}

/// The serialized form of [`EntityGraph`]; the automata are rebuilt on load.
#[derive(Serialize, Deserialize)]
struct GraphData {
    entities: Vec<Entity>,
    chunk_entities: Vec<Vec<(u32, u32)>>,
}

/// The lexicon and the bipartite chunk–entity graph.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "GraphData", into = "GraphData")]
pub struct EntityGraph {
    entities: Vec<Entity>,
    /// Per chunk: (entity, mentions), sorted by entity.
    chunk_entities: Vec<Vec<(u32, u32)>>,
    /// Per entity: (chunk, mentions), sorted by chunk.
    entity_chunks: Vec<Vec<(u32, u32)>>,
    matcher: Matcher,
}

impl From<EntityGraph> for GraphData {
    fn from(g: EntityGraph) -> Self {
        GraphData {
            entities: g.entities,
            chunk_entities: g.chunk_entities,
        }
    }
}

impl TryFrom<GraphData> for EntityGraph {
    type Error = RetrievalError;

    fn try_from(data: GraphData) -> Result<Self> {
        EntityGraph::from_parts(data.entities, data.chunk_entities)
    }
}

impl EntityGraph {
    /// Builds the lexicon (module docs) and links every chunk to the entities it mentions.
    pub fn build(chunks: &[Chunk], aliases: &[AliasEntry], config: &GraphConfig) -> Result<Self> {
        let mut entities: Vec<Entity> = Vec::new();
        let mut taken: HashMap<String, usize> = HashMap::new();
        let mut add =
            |name: &str, forms: &[&str], source: EntitySource, entities: &mut Vec<Entity>| {
                let name = name.trim();
                if name.is_empty() || taken.contains_key(name) {
                    return;
                }
                let id = entities.len();
                let mut kept = Vec::new();
                for f in std::iter::once(name).chain(forms.iter().map(|f| f.trim())) {
                    if !f.is_empty() && !taken.contains_key(f) {
                        taken.insert(f.to_string(), id);
                        kept.push(f.to_string());
                    }
                }
                entities.push(Entity {
                    name: name.to_string(),
                    forms: kept,
                    source,
                });
            };
        for a in aliases {
            let forms: Vec<&str> = a.aliases.iter().map(String::as_str).collect();
            add(&a.canonical, &forms, EntitySource::Alias, &mut entities);
        }
        for c in chunks {
            // A group (`All`, `Both`) is no character, and as an entity it would match every
            // capitalised "All" of the verse.
            for s in c.speakers.iter().filter(|s| !super::script::is_group(s)) {
                add(s, &[], EntitySource::Speaker, &mut entities);
            }
        }
        if config.detect_names {
            for n in detect_names(chunks.iter().map(Chunk::new_text), config.min_name_count) {
                add(&n, &[], EntitySource::Name, &mut entities);
            }
        }
        let matcher = Matcher::new(&entities)?;
        let chunk_entities = chunks
            .iter()
            .map(|c| matcher.mentions(&matcher.text, &c.text))
            .collect();
        Self::with_matcher(entities, chunk_entities, matcher)
    }

    /// Reassembles a graph from its parts, checking them.
    fn from_parts(entities: Vec<Entity>, chunk_entities: Vec<Vec<(u32, u32)>>) -> Result<Self> {
        let matcher = Matcher::new(&entities)?;
        Self::with_matcher(entities, chunk_entities, matcher)
    }

    fn with_matcher(
        entities: Vec<Entity>,
        chunk_entities: Vec<Vec<(u32, u32)>>,
        matcher: Matcher,
    ) -> Result<Self> {
        let mut entity_chunks = vec![Vec::new(); entities.len()];
        for (c, links) in chunk_entities.iter().enumerate() {
            for &(e, n) in links {
                let Some(list) = entity_chunks.get_mut(e as usize) else {
                    return Err(RetrievalError::Lexicon(format!(
                        "chunk {c} links entity {e}, the lexicon has {}",
                        entities.len()
                    )));
                };
                if n == 0 {
                    return Err(RetrievalError::Lexicon(format!(
                        "chunk {c} links entity {e} zero times"
                    )));
                }
                list.push((c as u32, n));
            }
        }
        Ok(EntityGraph {
            entities,
            chunk_entities,
            entity_chunks,
            matcher,
        })
    }

    /// The lexicon.
    pub fn entities(&self) -> &[Entity] {
        &self.entities
    }

    /// Number of chunks in the graph.
    pub fn chunk_count(&self) -> usize {
        self.chunk_entities.len()
    }

    /// The entities chunk `chunk` mentions, as (entity, mentions).
    pub fn chunk_entities(&self, chunk: usize) -> &[(u32, u32)] {
        self.chunk_entities.get(chunk).map_or(&[], Vec::as_slice)
    }

    /// The entities `query` names (ASCII case ignored), as (entity, mentions).
    pub fn query_entities(&self, query: &str) -> Vec<(u32, u32)> {
        self.matcher.mentions(&self.matcher.query, query)
    }

    /// The entities `text` names as written (case kept, as chunks are matched): story text,
    /// whose names are capitalised, so `rabbit-hole` does not name the Rabbit.
    pub fn text_entities(&self, text: &str) -> Vec<(u32, u32)> {
        self.matcher.mentions(&self.matcher.text, text)
    }

    /// Where `text` names entities as written (case kept, as [`Self::text_entities`]): each
    /// mention as (entity, byte range), in text order.
    pub fn text_mentions(&self, text: &str) -> Vec<(u32, Range<usize>)> {
        self.matcher.positions(&self.matcher.text, text)
    }

    /// The entities a question names: as written ([`Self::text_entities`]) when its writer
    /// capitalises names (a word after the first starts with a capital letter), else with ASCII
    /// case ignored ([`Self::query_entities`]). "Who did Alice follow down the rabbit hole?"
    /// names Alice, not the Rabbit; "who did alice follow?" still names Alice.
    pub fn question_entities(&self, question: &str) -> Vec<(u32, u32)> {
        let capitalises = question.split_whitespace().skip(1).any(|w| {
            w.chars()
                .find(|c| c.is_alphabetic())
                .is_some_and(char::is_uppercase)
        });
        if capitalises {
            self.text_entities(question)
        } else {
            self.query_entities(question)
        }
    }

    /// Personalized PageRank from the entities `query` names: the `k` chunks with the most mass,
    /// best first, ties to the lower chunk. Empty when the query names no entity (entities in
    /// more than `max_entity_share` of the chunks do not count).
    pub fn search(&self, query: &str, k: usize, config: &GraphConfig) -> Vec<(u32, f32)> {
        let limit = config.max_entity_share * self.chunk_count() as f32;
        let seeds: Vec<(u32, u32)> = self
            .query_entities(query)
            .into_iter()
            .filter(|&(e, _)| {
                self.entity_chunks
                    .get(e as usize)
                    .is_some_and(|c| c.len() as f32 <= limit)
            })
            .collect();
        let scores = self.personalized_pagerank(&seeds, config);
        let n = self.chunk_count();
        let mut hits: Vec<(u32, f32)> = scores[..n]
            .iter()
            .enumerate()
            .filter(|&(_, &s)| s > 0.0)
            .map(|(i, &s)| (i as u32, s))
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(k);
        hits
    }

    /// PageRank mass of every node (chunks first, then entities) for the restart weights
    /// `seeds` (entity, weight). All zero when `seeds` is empty.
    pub fn personalized_pagerank(&self, seeds: &[(u32, u32)], config: &GraphConfig) -> Vec<f32> {
        let n = self.chunk_count();
        let nodes = n + self.entities.len();
        let mut restart = vec![0f32; nodes];
        let total: u32 = seeds.iter().map(|s| s.1).sum();
        if total == 0 {
            return restart;
        }
        for &(e, w) in seeds {
            if let Some(r) = restart.get_mut(n + e as usize) {
                *r += w as f32 / total as f32;
            }
        }
        let d = config.damping.clamp(0.0, 1.0);
        let out_weight = |links: &[(u32, u32)]| links.iter().map(|l| l.1).sum::<u32>() as f32;
        let chunk_out: Vec<f32> = self.chunk_entities.iter().map(|l| out_weight(l)).collect();
        let entity_out: Vec<f32> = self.entity_chunks.iter().map(|l| out_weight(l)).collect();
        let mut p = restart.clone();
        let mut next = vec![0f32; nodes];
        for _ in 0..config.max_iterations {
            next.iter_mut().for_each(|x| *x = 0.0);
            let mut dangling = 0f32;
            for c in 0..n {
                if chunk_out[c] == 0.0 {
                    dangling += p[c];
                    continue;
                }
                let share = p[c] / chunk_out[c];
                for &(e, w) in &self.chunk_entities[c] {
                    next[n + e as usize] += share * w as f32;
                }
            }
            for (e, links) in self.entity_chunks.iter().enumerate() {
                let mass = p[n + e];
                if entity_out[e] == 0.0 {
                    dangling += mass;
                    continue;
                }
                let share = mass / entity_out[e];
                for &(c, w) in links {
                    next[c as usize] += share * w as f32;
                }
            }
            let mut change = 0f32;
            for i in 0..nodes {
                let v = (1.0 - d) * restart[i] + d * (next[i] + dangling * restart[i]);
                change += (v - p[i]).abs();
                p[i] = v;
            }
            if change < config.tolerance {
                break;
            }
        }
        p
    }
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod tests;
