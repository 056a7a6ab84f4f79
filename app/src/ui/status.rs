//! The capability check, download progress and load state.

use leptos::prelude::*;

use super::{AppState, Phase};
use crate::format::{bytes, duration};
use crate::protocol::FailKind;

/// Shows what the engine is doing: the device check, a progress bar (bytes, rate, time
/// left), the loaded model, and plain-language failures.
#[component]
pub fn Status() -> impl IntoView {
    let st = expect_context::<AppState>();
    let progress = move || {
        st.progress.get().map(|p| {
            let pct = if p.total == 0 {
                100.0
            } else {
                100.0 * p.done as f64 / p.total as f64
            };
            let rate = p
                .rate
                .map(|r| format!(" · {}/s", bytes(r as u64)))
                .unwrap_or_default();
            let eta = p
                .eta
                .filter(|_| p.done < p.total)
                .map(|s| format!(" · {} left", duration(s)))
                .unwrap_or_default();
            let cached = if p.from_cache > 0 {
                format!(" ({} from this browser's cache)", bytes(p.from_cache))
            } else {
                String::new()
            };
            view! {
                <div class="progress">
                    <progress id="download-progress" max="100" value=format!("{pct:.1}")></progress>
                    <span id="progress-text">
                        {format!("{:.0} % · {} of {} · {} of {} files{rate}{eta}{cached}",
                            pct, bytes(p.done), bytes(p.total), p.files.0, p.files.1)}
                    </span>
                </div>
            }
        })
    };
    let check = move || {
        st.check.get().map(|c| {
            let storage = match (c.will_cache, c.storage_free) {
                (true, Some(f)) => format!("kept in this browser for next time ({} free)", bytes(f)),
                (true, None) => "kept in this browser for next time".to_string(),
                (false, _) => "not kept (see the note)".to_string(),
            };
            view! {
                <ul class="checks">
                    <li class="ok" id="backend-line">"Runs on: "{c.adapter.clone()}</li>
                    {(c.binding.1 > 0).then(|| view! {
                        <li class="ok">{format!("GPU limits: largest binding {} needed, {} allowed", bytes(c.binding.0), bytes(c.binding.1))}</li>
                    })}
                    <li class="ok">{format!("Bundle: {} ({} already here); {storage}", bytes(c.bundle_bytes), bytes(c.cached_bytes))}</li>
                </ul>
            }
        })
    };
    let body = move || {
        match st.phase.get() {
        Phase::Idle => view! { <p class="muted">"Pick a story bundle and press Load. It is downloaded once, checked, and kept in this browser; after that, questions need no network."</p> }.into_any(),
        Phase::Checking => view! { <p id="phase">"Choosing where the model runs (CPU or GPU), checking storage…"</p> }.into_any(),
        Phase::Downloading => view! {
            <p id="phase">"Downloading and verifying the bundle…"</p>
            {check}
            {progress}
            <button class="secondary" on:click=move |_| st.cancel()>"Cancel"</button>
        }.into_any(),
        Phase::Loading => view! {
            <p id="phase">"Verified. Loading the model onto the GPU…"</p>
            {check}
            {progress}
        }.into_any(),
        Phase::Ready => {
            let l = st.loaded.get();
            view! {
                <p id="phase" class="ready">"Ready"</p>
                {check}
                {progress}
                {l.map(|l| view! {
                    <p class="muted" id="loaded">
                        {format!("{} · {} passages · {} · loaded in {:.1} s{}", l.model, l.passages,
                            l.embedder.map(|e| format!("{e} query embedder")).unwrap_or_else(|| "BM25 + entity graph".into()),
                            l.seconds, if l.all_cached { " from this browser's cache (no download)" } else { "" })}
                    </p>
                    <p class="muted" id="runs-on">"Runs on: "{l.adapter}</p>
                    {move || st.persisted.get().map(|kept| view! {
                        <p class="muted" id="storage">{if kept {
                            "Storage: persistent (the browser keeps the bundle until you clear the site's data)"
                        } else {
                            "Storage: best effort (the browser may clear the bundle when space runs low; it is then downloaded again)"
                        }}</p>
                    })}
                })}
            }.into_any()
        }
        Phase::Failed(kind, msg) => {
            let title = match kind {
                FailKind::NoWebGpu => "This browser can't run Lorekeeper",
                FailKind::Limits => "This GPU can't run this bundle",
                FailKind::Memory => "This bundle is too large for a browser page",
                FailKind::Network => "The bundle could not be downloaded",
                FailKind::Corrupt => "The bundle is damaged",
                FailKind::Load => "The bundle could not be loaded",
                FailKind::Crashed => "The engine stopped",
                FailKind::DeviceLost => "The GPU keeps failing",
                _ => "Something went wrong",
            };
            view! {
                <div class="error" role="alert" id="load-error">
                    <h2>{title}</h2>
                    <p>{msg}</p>
                </div>
            }.into_any()
        }
    }
    };
    let notice =
        move || {
            st.notice.get().map(|n| view! {
            <p class="notice" role="status" id="notice">{n}
                <button class="link" on:click=move |_| st.notice.set(None)>"dismiss"</button>
            </p>
        })
        };
    view! { <div class="card status">{body}{notice}</div> }
}
