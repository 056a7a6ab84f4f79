//! The conversation: questions, streamed answers, the input box with Ask and Stop.

use leptos::prelude::*;

use super::{answer::AnswerView, AppState, Phase};
use crate::chat_log::Turn;
use crate::protocol::ToWorker;

/// Longest question the page sends (the engine refuses longer ones too).
const MAX_QUESTION_CHARS: usize = 2000;

/// The chat: every turn of this bundle's conversation (kept across reloads) and the input.
#[component]
pub fn Chat() -> impl IntoView {
    let st = expect_context::<AppState>();
    let draft = RwSignal::new(String::new());
    let ready = move || st.phase.get() == Phase::Ready;
    let too_long = move || draft.with(|d| d.chars().count() > MAX_QUESTION_CHARS);
    let can_ask =
        move || ready() && !st.asking.get() && !draft.with(|d| d.trim().is_empty()) && !too_long();
    let submit = move || {
        if !can_ask() {
            return;
        }
        let q = draft.get_untracked();
        draft.set(String::new());
        st.ask(q.trim().to_string());
    };
    // One row per turn, keyed by its number and whether it finished: a row is built when its
    // question is sent and once more when its answer arrives; tokens in between change only
    // the running row's text (`st.live`), never the rest of the conversation.
    let row = move |t: Turn| {
        let body = match (&t.answer, &t.error) {
            (Some(a), _) => {
                view! { <AnswerView answer=a.clone() first_token_s=t.first_token_s /> }.into_any()
            }
            (None, Some(e)) => view! { <p class="error turn-error">{e.clone()}</p> }.into_any(),
            (None, None) => {
                let shown = move || {
                    st.live.with(|l| {
                        if l.streamed.is_empty() {
                            format!(
                                "Reading the evidence and writing… ({} characters of output)",
                                l.raw_chars
                            )
                        } else {
                            l.streamed.clone()
                        }
                    })
                };
                view! { <p class="streaming" id="streaming">{shown}</p> }.into_any()
            }
        };
        view! {
            <div class="turn">
                <p class="question">{t.question.clone()}</p>
                <div class="reply">{body}</div>
            </div>
        }
    };
    let clear = move |_| {
        st.turns.set(Vec::new());
        st.save_history();
    };
    view! {
        <div class="card chat">
            <div class="turns" aria-live="polite">
                <For each=move || st.turns.get() key=|t| (t.n, t.finished()) children=row />
            </div>
            <form class="ask" on:submit=move |ev| { ev.prevent_default(); submit(); }>
                <textarea
                    id="question"
                    rows="2"
                    placeholder=move || if ready() { "Ask about the story…" } else { "Load a bundle first" }
                    prop:value=move || draft.get()
                    on:input=move |ev| draft.set(event_target_value(&ev))
                    on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                        if ev.key() == "Enter" && !ev.shift_key() {
                            ev.prevent_default();
                            submit();
                        }
                    }
                ></textarea>
                <div class="row">
                    <button id="ask" type="submit" disabled=move || !can_ask()>"Ask"</button>
                    <button id="stop" type="button" class="secondary" disabled=move || !st.asking.get()
                        on:click=move |_| st.send(ToWorker::Stop)>"Stop"</button>
                    <button type="button" class="link" on:click=clear>"Clear chat"</button>
                </div>
                <Show when=too_long>
                    <p class="error">{format!("Questions are limited to {MAX_QUESTION_CHARS} characters.")}</p>
                </Show>
            </form>
        </div>
    }
}
