//! The evidence panel: the passages the latest answer saw, quoted spans highlighted.

use leptos::prelude::*;

use super::AppState;
use crate::highlight::quoted_pieces;

/// Passages of the latest answer (or the streaming question's, once known), each with its
/// chapter and fusion score; the spans its facts quote are marked.
#[component]
pub fn EvidencePanel() -> impl IntoView {
    let st = expect_context::<AppState>();
    let cards = move || {
        let turns = st.turns.get();
        let Some(a) = turns.iter().rev().find_map(|t| t.answer.as_ref()) else {
            return view! { <p class="muted">"Passages behind the latest answer appear here, with the quoted words marked."</p> }.into_any();
        };
        let focus = st.focus.get();
        a.evidence
            .iter()
            .map(|e| {
                let quotes: Vec<&str> = a
                    .facts
                    .iter()
                    .flat_map(|f| f.refs.iter())
                    .filter(|r| r.evidence_id == e.id && r.verified)
                    .map(|r| r.quote.as_str())
                    .collect();
                let pieces = quoted_pieces(&e.text, &quotes)
                    .into_iter()
                    .map(|p| {
                        if p.quoted {
                            view! { <mark>{p.text}</mark> }.into_any()
                        } else {
                            view! { <span>{p.text}</span> }.into_any()
                        }
                    })
                    .collect_view();
                let focused = focus.as_deref() == Some(e.id.as_str());
                let cited = !quotes.is_empty();
                view! {
                    <article class="evidence" class:focused=focused class:cited=cited
                        id=format!("ev-{}", e.id) data-id=e.id.clone()>
                        <header>
                            <strong>{format!("[{}]", e.id)}</strong>
                            " "<span class="chapter">{e.chapter.clone()}</span>
                            <span class="score">{format!("fusion {:.4}", e.fusion_score)}</span>
                        </header>
                        <p class="passage">{pieces}</p>
                    </article>
                }
                .into_any()
            })
            .collect_view()
            .into_any()
    };
    view! {
        <div class="card evidence-panel">
            <h2>"Evidence"</h2>
            <div id="evidence">{cards}</div>
        </div>
    }
}
