//! The bundle picker: which story (and model) to load.

use leptos::prelude::*;

use super::{stored, AppState, Phase, LAST_BUNDLE_KEY};
use crate::protocol::Catalog;

/// Lists the catalog's bundles with a Load button; reloads the last bundle used on a return
/// visit (from the cache, no download).
#[component]
pub fn Picker(
    /// The bundles from `bundles/index.json`.
    catalog: Catalog,
) -> impl IntoView {
    let st = expect_context::<AppState>();
    let bundles = catalog.bundles.clone();
    let chosen = RwSignal::new(
        stored::<String>(LAST_BUNDLE_KEY)
            .filter(|id| bundles.iter().any(|b| &b.id == id))
            .or_else(|| bundles.first().map(|b| b.id.clone()))
            .unwrap_or_default(),
    );
    // A return visit picks up where the reader left off.
    if let Some(last) = stored::<String>(LAST_BUNDLE_KEY) {
        if let Some(b) = bundles.iter().find(|b| b.id == last) {
            if st.phase.get_untracked() == Phase::Idle {
                st.load(b.clone());
            }
        }
    }
    let list = bundles.clone();
    let load = move |_| {
        let id = chosen.get_untracked();
        if let Some(b) = list.iter().find(|b| b.id == id) {
            st.load(b.clone());
        }
    };
    let busy = move || {
        matches!(
            st.phase.get(),
            Phase::Checking | Phase::Downloading | Phase::Loading
        )
    };
    if bundles.is_empty() {
        return view! {
            <div class="card">
                <p>"No bundles are published on this page yet. "
                   <code>"./run.sh"</code>" builds the demo bundle and lists it in "
                   <code>"bundles/index.json"</code>"."</p>
            </div>
        }
        .into_any();
    }
    let options = bundles
        .iter()
        .map(|b| {
            let id = b.id.clone();
            let label = b.title.clone();
            view! { <option value=id.clone() selected=move || chosen.get() == id>{label}</option> }
        })
        .collect_view();
    let describe = move || {
        let id = chosen.get();
        bundles
            .iter()
            .find(|b| b.id == id)
            .map(|b| b.description.clone())
            .unwrap_or_default()
    };
    view! {
        <div class="card picker">
            <label for="bundle">"Story bundle"</label>
            <div class="row">
                <select id="bundle" on:change=move |ev| chosen.set(event_target_value(&ev))>
                    {options}
                </select>
                <button id="load" on:click=load disabled=busy>"Load"</button>
            </div>
            <p class="muted">{describe}</p>
        </div>
    }
    .into_any()
}
