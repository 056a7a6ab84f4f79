//! One answer: the text with citation markers, the checked facts, abstentions with the best
//! passages, and the raw model output behind a toggle.

use leptos::prelude::*;
use lorekeeper_engine::answer::schema::NextAction;
use lorekeeper_engine::answer::Answer;

use super::AppState;
use crate::highlight::{answer_pieces, AnswerPiece};

/// Points the evidence panel at `id` and scrolls to it.
fn focus(st: AppState, id: &str) {
    st.focus.set(Some(id.to_string()));
    if let Some(el) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id(&format!("ev-{id}")))
    {
        el.scroll_into_view();
    }
}

/// A `[E2]` chip that points at its passage.
#[component]
pub fn Cite(
    /// The evidence id.
    id: String,
) -> impl IntoView {
    let st = expect_context::<AppState>();
    let target = id.clone();
    view! {
        <button class="cite" title="Show this passage" on:click=move |_| focus(st, &target)>
            {format!("[{id}]")}
        </button>
    }
}

/// A finished answer.
#[component]
pub fn AnswerView(
    /// The engine's answer (every round, fact, check and timing).
    answer: Answer,
    /// Seconds from sending the question to the first generated token, as the page saw it
    /// (`None` for answers restored from history).
    first_token_s: Option<f64>,
) -> impl IntoView {
    let (label, class) = match answer.final_action {
        NextAction::AnswerDirectly => ("Answer", "badge answer"),
        NextAction::Abstain => ("Not enough evidence", "badge abstain"),
        NextAction::ClarifyUser => ("Needs clarification", "badge clarify"),
        NextAction::RetrieveMore => ("Incomplete", "badge abstain"),
    };
    // Ids cited by verified facts, shown after the answer text.
    let mut cited: Vec<String> = Vec::new();
    for f in answer.facts.iter().filter(|f| f.verified) {
        for r in &f.refs {
            if r.verified && !cited.contains(&r.evidence_id) {
                cited.push(r.evidence_id.clone());
            }
        }
    }
    let text = answer_pieces(&answer.answer)
        .into_iter()
        .map(|p| match p {
            AnswerPiece::Text(t) => view! { <span>{t}</span> }.into_any(),
            AnswerPiece::Cite(id) => view! { <Cite id=id /> }.into_any(),
        })
        .collect_view();
    let cites = cited
        .into_iter()
        .map(|id| view! { <Cite id=id /> })
        .collect_view();
    let t = &answer.timings;
    let timing = timing_line(&answer, first_token_s);
    view! {
        <div class="answer-view" data-action=answer.final_action.as_str()>
            <span class=class>{label}</span>
            <p class="final-answer">{text}" "{cites}</p>
            <ul class="facts">{facts(&answer)}</ul>
            {abstain_note(&answer)}
            <details class="raw-output">
                <summary>"Raw model output"</summary>
                {raw_output(&answer)}
            </details>
            <p class="muted timing" data-total-s=t.total_s data-retrieval-ms=t.retrieval_ms>{timing}</p>
        </div>
    }
}

/// The facts with their references and quotes, verified or not.
fn facts(answer: &Answer) -> impl IntoView {
    answer
        .facts
        .iter()
        .map(|f| {
            let refs = f
                .refs
                .iter()
                .map(|r| {
                    let quote = (!r.quote.is_empty()).then(|| format!("“{}”", r.quote));
                    view! {
                        <li class:unverified=!r.verified>
                            <Cite id=r.evidence_id.clone() />
                            " "{quote}
                        </li>
                    }
                })
                .collect_view();
            view! {
                <li class="fact" class:verified=f.verified>
                    <span class="mark">{if f.verified { "✓ verified" } else { "✗ not verified" }}</span>
                    " "{f.fact.clone()}
                    <ul class="refs">{refs}</ul>
                </li>
            }
        })
        .collect_view()
}

/// Why the engine abstained and the closest passages (nothing for other outcomes).
fn abstain_note(answer: &Answer) -> impl IntoView {
    (answer.final_action == NextAction::Abstain).then(|| {
        let snippets = answer
            .snippets
            .iter()
            .map(|e| {
                view! {
                    <li><Cite id=e.id.clone() />" "<span class="chapter">{e.chapter.clone()}</span>" "{e.text.clone()}</li>
                }
            })
            .collect_view();
        view! {
            <div class="abstain">
                {answer.abstain_reason.clone().map(|r| view! { <p class="muted">"Why: "{r}</p> })}
                <p class="muted">"The closest passages:"</p>
                <ul class="snippets">{snippets}</ul>
            </div>
        }
    })
}

/// Each round's raw model output.
fn raw_output(answer: &Answer) -> impl IntoView {
    answer
        .rounds
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.raw_output.is_empty())
        .map(|(i, r)| {
            view! {
                <p class="muted">{format!("Round {} · {} tokens · {:?}", i + 1, r.tokens, r.outcome)}</p>
                <pre class="raw" data-round=i data-tokens=r.tokens>{r.raw_output.clone()}</pre>
            }
        })
        .collect_view()
}

/// The action sequence, rounds and timings in one line.
fn timing_line(answer: &Answer, first_token_s: Option<f64>) -> String {
    let t = &answer.timings;
    format!(
        "{} · {} · {} round(s) · retrieval {:.0} ms · prefill {:.1} s · decode {:.1} s · {}total {:.1} s{}",
        answer.mode.as_str(),
        answer.action_sequence(),
        answer.rounds.len(),
        t.retrieval_ms,
        t.prefill_s,
        t.decode_s,
        first_token_s
            .map(|f| format!("first token {f:.1} s · "))
            .unwrap_or_default(),
        t.total_s,
        if answer.grammar {
            format!(
                " · {} grammar masks, {:.2} ms each",
                t.masks, t.mask_ms_mean
            )
        } else {
            " · grammar off".into()
        }
    )
}
