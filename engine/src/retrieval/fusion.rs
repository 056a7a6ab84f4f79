//! Fusion of the dense, sparse and graph rankings, and neighbor expansion.
//!
//! **Fusion.** Two methods ([`FusionMethod`]). *Convex* (the default): each source's scores are
//! min-max scaled over the ranking it returned (`(s − lo) / (hi − lo)`, so its best hit earns 1
//! and its last 0) and weighted; a document's `fusion_score` is the sum over the sources that
//! returned it. *RRF*: a document at 0-based rank `r` in a source with weight `w` earns
//! `w / (rrf_k + r + 1)`. The defaults are measured, not guessed: on the three development sets
//! (*Alice*, *The Tempest*, 红楼梦; 600-character chunks, neighbor expansion on) convex fusion
//! with dense 0.5, BM25 0.5 over the first 100 of each source scored recall@10 + MRR 4.508
//! against 4.422 for the best RRF weighting `lorekeeper eval-retrieval --fit` found (dense 0.8,
//! BM25 1.0, graph 0, `k` 5), and on the held-out *Hamlet* 0.712 / 0.469 against 0.695 / 0.451
//! (0.746 / 0.479 against 0.712 / 0.471 since its role cues speak with their cast-list names;
//! *Botchan*, the test story: 0.795 / 0.540 against 0.795 / 0.546). RRF keeps only the order of
//! each list, so a passage far ahead on one source and missing from the other falls behind
//! passages that are middling on both; scaled scores keep the margin. Stories written mostly
//! in CJK keep RRF ([`FusionConfig::for_story`]). ASA's constants (RRF, `k`
//! 60; dense 1.0, sparse 0.8, graph 0.35) ranked below dense + BM25 alone on every set: PageRank
//! from a named character spreads over all of that character's chunks, which says who is
//! involved, not what happened, so the graph weighs 0. Each fused hit keeps every source's rank
//! and raw score, `None` where that source did not return it. Ties go to the lower document
//! (chunk id), so the order is deterministic.
//!
//! **Neighbors.** After the top `k` are chosen, each of the best [`FusionConfig::expand_top`]
//! brings the chunks up to [`FusionConfig::neighbors`] positions before and after it in the
//! same chapter that are not already among the `k`. A neighbor `δ` positions away scores
//! `parent_score · neighbor_decay^δ` (0.5 and 0.25 by default), or its own fusion score if that
//! is higher; reached from two parents, it keeps the higher score. Neighbors are marked, keep
//! whatever source ranks they had, and are merged into the list by score, so a result holds up to
//! `k + 2 · neighbors · expand_top` hits.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Fusion weights and neighbor expansion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FusionConfig {
    /// The RRF constant `k`.
    pub rrf_k: f32,
    /// Weight of the dense ranking.
    pub dense: f32,
    /// Weight of the BM25 ranking.
    pub sparse: f32,
    /// Weight of the entity-graph ranking.
    pub graph: f32,
    /// How deep each source's ranking is read (at least the requested `k`).
    pub candidates: usize,
    /// Neighbor window: chunks this many positions either side of a top hit.
    pub neighbors: usize,
    /// How many of the top hits bring their neighbors.
    pub expand_top: usize,
    /// A neighbor `δ` positions away scores `parent · neighbor_decay^δ`.
    pub neighbor_decay: f32,
    /// How the sources' rankings combine (the last field: a version-3 index blob, written
    /// before it existed, reads as [`FusionMethod::Rrf`]).
    pub method: FusionMethod,
}

/// How [`fuse`] combines the sources' rankings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FusionMethod {
    /// Weighted reciprocal-rank fusion: a document at 0-based rank `r` earns
    /// `w / (rrf_k + r + 1)` (the method of story indexes written before the method was
    /// recorded, format version 3).
    #[default]
    Rrf,
    /// A weighted sum of min-max scaled scores: a document with score `s` in a ranking whose
    /// scores span `[lo, hi]` earns `w · (s − lo) / (hi − lo)` (`w` when `hi = lo`); a
    /// source that did not return it adds nothing. Unlike RRF it keeps how far apart the
    /// scores are: a passage far ahead in one source stays ahead.
    Convex,
}

impl Default for FusionConfig {
    fn default() -> Self {
        FusionConfig {
            rrf_k: 5.0,
            dense: 0.5,
            sparse: 0.5,
            graph: 0.0,
            candidates: 100,
            neighbors: 2,
            expand_top: 3,
            neighbor_decay: 0.5,
            method: FusionMethod::Convex,
        }
    }
}

impl FusionConfig {
    /// Weighted RRF as fitted before convex fusion (k 5; dense 0.8, BM25 1.0, graph 0; each
    /// source read 50 deep): the fusion of stories written mostly in Chinese, Japanese or
    /// Korean ([`FusionConfig::for_story`]).
    pub fn rrf() -> Self {
        FusionConfig {
            dense: 0.8,
            sparse: 1.0,
            candidates: 50,
            method: FusionMethod::Rrf,
            ..FusionConfig::default()
        }
    }

    /// Convex fusion for an index with query expansion ([`super::expand`]): dense 0.4, BM25
    /// 0.6. With BM25 reading the story's words near the question's, its ranking is worth
    /// more: fitted on *Alice* and *The Tempest* beside the expansion settings (dense weights
    /// 0.35–0.6), 0.4 had the best mean recall@10 + MRR; without expansion 0.5 stays best.
    pub fn expanded() -> Self {
        FusionConfig {
            dense: 0.4,
            sparse: 0.6,
            ..FusionConfig::default()
        }
    }

    /// The fusion a new index gets for a story whose chunks are `texts`: convex score fusion
    /// ([`FusionConfig::default`]), except where most letters are CJK, which keep
    /// [`FusionConfig::rrf`]. On 红楼梦 (multilingual-e5-small, the reader's e5 cosine floor of
    /// 0.87) convex fusion ranked as well (recall@10 / MRR 0.843 / 0.617 against 0.829 /
    /// 0.624) and answered one more question (22 of 70 against 21), but the best-ranked span's
    /// cosine, which the floor reads, told the unanswerable questions apart less well (area
    /// under the curve 0.79 against 0.89): 4 of 20 abstained instead of 10.
    pub fn for_story<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let (mut cjk, mut letters) = (0usize, 0usize);
        for c in texts.into_iter().flat_map(str::chars) {
            if c.is_alphabetic() {
                letters += 1;
                cjk += usize::from(super::corpus::is_cjk(c));
            }
        }
        if 2 * cjk > letters {
            FusionConfig::rrf()
        } else {
            FusionConfig::default()
        }
    }
}

/// One source's rank (0-based) and raw score for a document.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceRank {
    /// 0-based rank in that source.
    pub rank: u32,
    /// The source's own score (cosine, BM25, PageRank mass).
    pub score: f32,
}

/// A fused hit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fused {
    /// Document (chunk) index.
    pub doc: u32,
    /// Fused score ([`FusionMethod`]; for a neighbor, the discounted score of its parent).
    pub fusion_score: f32,
    /// Dense rank and score.
    pub dense: Option<SourceRank>,
    /// BM25 rank and score.
    pub sparse: Option<SourceRank>,
    /// Graph rank and score.
    pub graph: Option<SourceRank>,
    /// For a neighbor, the top hit that brought it.
    pub neighbor_of: Option<u32>,
}

/// Selects one source's slot in a [`Fused`].
type Slot = fn(&mut Fused) -> &mut Option<SourceRank>;

/// Fuses three rankings (each best first, as (document, score)) into one, best first.
pub fn fuse(
    dense: &[(u32, f32)],
    sparse: &[(u32, f32)],
    graph: &[(u32, f32)],
    config: &FusionConfig,
) -> Vec<Fused> {
    fuse_with(dense, sparse, graph, &[], config)
}

/// [`fuse`] with more rankings, each with its weight (the wide passages' dense and BM25
/// rankings as the chunks they cover, [`super::wide`]): they earn as the three sources do
/// ([`FusionMethod`]) and add to a document's fused score, with no rank of their own in
/// [`Fused`].
pub fn fuse_with(
    dense: &[(u32, f32)],
    sparse: &[(u32, f32)],
    graph: &[(u32, f32)],
    more: &[(&[(u32, f32)], f32)],
    config: &FusionConfig,
) -> Vec<Fused> {
    let mut by_doc: HashMap<u32, Fused> = HashMap::new();
    let mut add = |ranking: &[(u32, f32)], weight: f32, slot: Option<Slot>| {
        if weight <= 0.0 {
            return;
        }
        // The score span of this ranking, for `Convex`.
        let (lo, hi) = ranking
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &(_, s)| {
                (lo.min(s), hi.max(s))
            });
        let earn = |rank: usize, score: f32| match config.method {
            FusionMethod::Rrf => weight / (config.rrf_k + rank as f32 + 1.0),
            FusionMethod::Convex if hi > lo => weight * ((score - lo) / (hi - lo)),
            FusionMethod::Convex => weight,
        };
        for (rank, &(doc, score)) in ranking.iter().enumerate() {
            let hit = by_doc.entry(doc).or_insert_with(|| Fused {
                doc,
                fusion_score: 0.0,
                dense: None,
                sparse: None,
                graph: None,
                neighbor_of: None,
            });
            // A document listed twice by one source counts at its best rank (the rankings
            // without a slot list each document once).
            match slot {
                Some(slot) if slot(hit).is_none() => {
                    *slot(hit) = Some(SourceRank {
                        rank: rank as u32,
                        score,
                    });
                    hit.fusion_score += earn(rank, score);
                }
                Some(_) => {}
                None => hit.fusion_score += earn(rank, score),
            }
        }
    };
    add(dense, config.dense, Some(|f| &mut f.dense));
    add(sparse, config.sparse, Some(|f| &mut f.sparse));
    add(graph, config.graph, Some(|f| &mut f.graph));
    for &(ranking, weight) in more {
        add(ranking, weight, None);
    }
    let mut fused: Vec<Fused> = by_doc.into_values().collect();
    sort_fused(&mut fused);
    fused
}

fn sort_fused(hits: &mut [Fused]) {
    hits.sort_by(|a, b| {
        b.fusion_score
            .total_cmp(&a.fusion_score)
            .then(a.doc.cmp(&b.doc))
    });
}

/// Keeps the top `k` of `fused` (best first) and adds their neighbors (module docs).
/// `neighbor(doc, offset)` is the chunk `offset` positions from `doc` in its chapter, if any.
pub fn select(
    fused: Vec<Fused>,
    k: usize,
    config: &FusionConfig,
    neighbor: impl Fn(u32, isize) -> Option<u32>,
) -> Vec<Fused> {
    let mut rest: HashMap<u32, Fused> = HashMap::new();
    let mut top: Vec<Fused> = Vec::with_capacity(k);
    for f in fused {
        if top.len() < k {
            top.push(f);
        } else {
            rest.insert(f.doc, f);
        }
    }
    let mut added: HashMap<u32, Fused> = HashMap::new();
    for parent in top.iter().take(config.expand_top) {
        for side in [-1isize, 1] {
            let mut doc = parent.doc;
            let mut weight = parent.fusion_score;
            for _ in 0..config.neighbors {
                let Some(next) = neighbor(doc, side) else {
                    break;
                };
                doc = next;
                weight *= config.neighbor_decay;
                if top.iter().any(|t| t.doc == doc) {
                    continue;
                }
                let own = rest.get(&doc);
                let score = own.map_or(weight, |o| o.fusion_score.max(weight));
                let better = added.get(&doc).is_none_or(|a| score > a.fusion_score);
                if better {
                    let mut hit = own.cloned().unwrap_or(Fused {
                        doc,
                        fusion_score: 0.0,
                        dense: None,
                        sparse: None,
                        graph: None,
                        neighbor_of: None,
                    });
                    hit.fusion_score = score;
                    hit.neighbor_of = Some(parent.doc);
                    added.insert(doc, hit);
                }
            }
        }
    }
    top.extend(added.into_values());
    sort_fused(&mut top);
    top
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Pcg32;

    /// ASA's constants: every source counts.
    fn asa() -> FusionConfig {
        FusionConfig {
            rrf_k: 60.0,
            dense: 1.0,
            sparse: 0.8,
            graph: 0.35,
            method: FusionMethod::Rrf,
            ..FusionConfig::default()
        }
    }

    #[test]
    fn a_story_mostly_in_cjk_keeps_rrf() {
        let en = FusionConfig::for_story(["Alice was beginning to get very tired", "of sitting"]);
        assert_eq!(en, FusionConfig::default());
        assert_eq!(en.method, FusionMethod::Convex);
        // Chinese text with a few Latin letters and punctuation: RRF.
        let zh =
            FusionConfig::for_story(["却说那女娲氏炼石补天之时，于大荒山无稽崖 (Nüwa)", "甄士隐"]);
        assert_eq!(zh, FusionConfig::rrf());
        assert_eq!(zh.method, FusionMethod::Rrf);
        // An English story quoting a little Chinese stays convex; no letters at all: convex.
        let mixed =
            FusionConfig::for_story(["The sign read 红楼梦 over the door of the old house"]);
        assert_eq!(mixed.method, FusionMethod::Convex);
        assert_eq!(
            FusionConfig::for_story(["1, 2, 3 ..."]).method,
            FusionMethod::Convex
        );
    }

    /// More rankings earn by the same rule at their own weight, with no rank of their own,
    /// and bring documents the three sources did not return.
    #[test]
    fn more_rankings_add_to_the_fused_score() {
        let config = FusionConfig {
            dense: 0.4,
            sparse: 0.6,
            ..FusionConfig::default()
        };
        let dense = [(7, 0.9), (3, 0.5), (5, 0.2)];
        let sparse = [(3, 11.0), (9, 3.0)];
        let wide = [(3, 7.0), (7, 6.0), (11, 1.0)];
        let base = fuse(&dense, &sparse, &[], &config);
        let fused = fuse_with(&dense, &sparse, &[], &[(&wide, 0.2)], &config);
        let score = |f: &[Fused], d: u32| f.iter().find(|h| h.doc == d).map(|h| h.fusion_score);
        for (d, w) in [(3, 1.0), (7, 5.0 / 6.0), (11, 0.0), (5, 0.0), (9, 0.0)] {
            let want = score(&base, d).unwrap_or(0.0) + 0.2 * w;
            let got = score(&fused, d).unwrap();
            assert!((got - want).abs() < 1e-6, "doc {d}: {got} against {want}");
        }
        let eleven = fused.iter().find(|h| h.doc == 11).unwrap();
        assert!(eleven.dense.is_none() && eleven.sparse.is_none());
        // RRF: the same ranks earn `w / (k + r + 1)`.
        let rrf = FusionConfig {
            method: FusionMethod::Rrf,
            ..config
        };
        let r = fuse_with(&dense, &[], &[], &[(&wide, 0.5)], &rrf);
        let want = 0.4 / (5.0 + 2.0) + 0.5 / (5.0 + 1.0);
        assert!((score(&r, 3).unwrap() - want).abs() < 1e-6);
    }

    #[test]
    fn convex_fusion_matches_the_formula() {
        let config = FusionConfig {
            dense: 0.6,
            sparse: 0.4,
            graph: 0.2,
            ..FusionConfig::default()
        };
        assert_eq!(config.method, FusionMethod::Convex);
        let dense = [(7, 0.9), (3, 0.8), (5, 0.1)];
        let sparse = [(3, 12.0), (9, 4.0), (7, 2.0)];
        // One hit: its span is empty, it earns the whole weight.
        let graph = [(5, 0.2)];
        let fused = fuse(&dense, &sparse, &graph, &config);
        let scaled = |s: f32, lo: f32, hi: f32| (s - lo) / (hi - lo);
        let want = [
            (3, 0.6 * scaled(0.8, 0.1, 0.9) + 0.4),
            (7, 0.6),
            (5, 0.2),
            (9, 0.4 * scaled(4.0, 2.0, 12.0)),
        ];
        let got: Vec<(u32, f32)> = fused.iter().map(|f| (f.doc, f.fusion_score)).collect();
        assert_eq!(got.len(), want.len());
        for ((gd, gs), (wd, ws)) in got.iter().zip(want) {
            assert_eq!(*gd, wd, "{got:?}");
            assert!((gs - ws).abs() < 1e-6, "{got:?}");
        }
        // RRF on the same lists reads ranks only: 3 (second in dense, first in BM25) and 7
        // (first in dense, last in BM25) come out nearly level, where the scores put 3 far
        // ahead (7's BM25 score is the list's lowest).
        let rrf = FusionConfig {
            method: FusionMethod::Rrf,
            ..config
        };
        let rrf = fuse(&dense, &sparse, &graph, &rrf);
        let order: Vec<u32> = rrf.iter().map(|f| f.doc).collect();
        assert_eq!(order, [3, 7, 5, 9]);
        let margin = |f: &[Fused]| (f[0].fusion_score - f[1].fusion_score) / f[0].fusion_score;
        assert!(margin(&rrf) < 0.05 && margin(&fused) > 0.3);
    }

    #[test]
    fn weighted_rrf_matches_the_formula() {
        let config = asa();
        let dense = [(7, 0.9), (3, 0.8), (5, 0.1)];
        let sparse = [(3, 12.0), (9, 4.0)];
        let graph = [(5, 0.2)];
        let fused = fuse(&dense, &sparse, &graph, &config);
        let rrf = |w: f32, r: u32| w / (60.0 + r as f32 + 1.0);
        let want = [
            (3, rrf(1.0, 1) + rrf(0.8, 0)),
            (5, rrf(1.0, 2) + rrf(0.35, 0)),
            (7, rrf(1.0, 0)),
            (9, rrf(0.8, 1)),
        ];
        let got: Vec<(u32, f32)> = fused.iter().map(|f| (f.doc, f.fusion_score)).collect();
        assert_eq!(got.len(), want.len());
        for ((gd, gs), (wd, ws)) in got.iter().zip(want) {
            assert_eq!(*gd, wd);
            assert!((gs - ws).abs() < 1e-7);
        }
        assert_eq!(
            fused[0].dense,
            Some(SourceRank {
                rank: 1,
                score: 0.8
            })
        );
        assert_eq!(
            fused[0].sparse,
            Some(SourceRank {
                rank: 0,
                score: 12.0
            })
        );
        assert_eq!(fused[0].graph, None);
        // A source of weight 0 (the default graph weight) adds no document and no rank.
        let fused = fuse(&dense, &sparse, &graph, &FusionConfig::default());
        assert!(fused.iter().all(|f| f.graph.is_none()));
        assert_eq!(fused.len(), 4);
        assert_eq!(fused[0].doc, 3);
    }

    /// The same fusion written as a loop over every document, for both methods: scores and
    /// order agree.
    #[test]
    fn fusion_matches_a_brute_force_reference() {
        let mut rng = Pcg32::new(9);
        for method in [FusionMethod::Rrf, FusionMethod::Convex] {
            let config = FusionConfig {
                graph: 0.5,
                method,
                ..FusionConfig::default()
            };
            for _ in 0..20 {
                // A ranking: distinct documents, scores falling (ties allowed).
                let ranking = |rng: &mut Pcg32| {
                    let mut docs: Vec<u32> = (0..40).collect();
                    for i in (1..docs.len()).rev() {
                        docs.swap(i, rng.range(0, i));
                    }
                    docs.truncate(rng.range(0, 30));
                    let mut score = 10.0 * rng.next_f32();
                    docs.into_iter()
                        .map(|d| {
                            score -= (rng.range(0, 3) as f32) * rng.next_f32();
                            (d, score)
                        })
                        .collect::<Vec<(u32, f32)>>()
                };
                let lists = [ranking(&mut rng), ranking(&mut rng), ranking(&mut rng)];
                let weights = [config.dense, config.sparse, config.graph];
                let fused = fuse(&lists[0], &lists[1], &lists[2], &config);
                let mut want: Vec<(u32, f32)> = (0..40)
                    .filter_map(|d| {
                        let mut s = 0.0;
                        let mut any = false;
                        for (list, w) in lists.iter().zip(weights) {
                            if let Some(r) = list.iter().position(|x| x.0 == d) {
                                let lo = list.iter().map(|x| x.1).fold(f32::MAX, f32::min);
                                let hi = list.iter().map(|x| x.1).fold(f32::MIN, f32::max);
                                s += match method {
                                    FusionMethod::Rrf => w / (config.rrf_k + r as f32 + 1.0),
                                    FusionMethod::Convex if hi > lo => {
                                        w * ((list[r].1 - lo) / (hi - lo))
                                    }
                                    FusionMethod::Convex => w,
                                };
                                any = true;
                            }
                        }
                        any.then_some((d, s))
                    })
                    .collect();
                want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                let got: Vec<(u32, f32)> = fused.iter().map(|f| (f.doc, f.fusion_score)).collect();
                assert_eq!(got.len(), want.len());
                // Sums are taken in the same order, so scores are bit-equal and ties fall alike.
                assert_eq!(got, want, "{method:?}");
            }
        }
    }

    #[test]
    fn ties_break_by_document() {
        let config = FusionConfig::default();
        let fused = fuse(&[(4, 1.0)], &[], &[], &config);
        let fused2 = fuse(&[(2, 1.0)], &[], &[], &config);
        assert_eq!(fused[0].fusion_score, fused2[0].fusion_score);
        // Two documents at rank 0 of sources with equal weights tie: lower id first.
        let equal = FusionConfig {
            dense: 1.0,
            sparse: 1.0,
            ..FusionConfig::default()
        };
        let fused = fuse(&[(8, 0.5)], &[(3, 9.0)], &[], &equal);
        assert_eq!(fused.iter().map(|f| f.doc).collect::<Vec<_>>(), [3, 8]);
    }

    #[test]
    fn neighbors_are_added_discounted_and_marked() {
        // Ten chunks in one chapter: doc i's neighbors are i-1 and i+1.
        let neighbor = |doc: u32, off: isize| {
            let n = doc as isize + off;
            (0..10).contains(&n).then_some(n as u32)
        };
        let config = FusionConfig {
            expand_top: 1,
            ..asa()
        };
        let fused = fuse(&[(5, 0.9), (0, 0.8), (8, 0.7)], &[(7, 3.0)], &[], &config);
        let top_score = fused[0].fusion_score;
        let out = select(fused, 2, &config, neighbor);
        let got: Vec<(u32, bool)> = out
            .iter()
            .map(|f| (f.doc, f.neighbor_of.is_some()))
            .collect();
        // Top 2: 5 and 0 (8 and 7 fused below them). Neighbors of 5: 4 and 6 (×0.5), 3 (×0.25)
        // and 7, whose own fusion score beats 0.25 × 5's.
        assert_eq!(
            got,
            [
                (5, false),
                (0, false),
                (7, true),
                (4, true),
                (6, true),
                (3, true)
            ]
        );
        assert!((out[2].fusion_score - 0.8 / 61.0).abs() < 1e-9);
        assert!((out[3].fusion_score - top_score * 0.5).abs() < 1e-9);
        assert!((out[5].fusion_score - top_score * 0.25).abs() < 1e-9);
        // Doc 7 keeps its sparse rank as a neighbor.
        assert_eq!(
            out[2].sparse,
            Some(SourceRank {
                rank: 0,
                score: 3.0
            })
        );
        assert_eq!(out[2].neighbor_of, Some(5));
        // A neighbor already among the top hits is not duplicated.
        let fused = fuse(&[(5, 0.9), (4, 0.8)], &[], &[], &config);
        let out = select(fused, 2, &config, neighbor);
        let docs: Vec<u32> = out.iter().map(|f| f.doc).collect();
        assert_eq!(docs, [5, 4, 6, 3, 7]);
        let none = FusionConfig {
            neighbors: 0,
            ..FusionConfig::default()
        };
        let fused = fuse(&[(5, 0.9), (4, 0.8)], &[], &[], &none);
        assert_eq!(select(fused, 1, &none, neighbor).len(), 1);
    }
}
