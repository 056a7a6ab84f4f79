//! Question settings: protocol, temperature, length, seed, constrained decoding.

use leptos::prelude::*;
use lorekeeper_engine::answer::Mode;

use super::AppState;

/// Edits [`crate::protocol::Settings`]; values out of range are refused by the worker with a
/// message, so the inputs only parse.
#[component]
pub fn SettingsPanel() -> impl IntoView {
    let st = expect_context::<AppState>();
    let s = st.settings;
    let mode_name = move || s.get().mode.as_str();
    view! {
        <details class="card settings">
            <summary>"Settings"</summary>
            <label>"Answer protocol"
                <select id="mode" on:change=move |ev| {
                    let m = Mode::from_name(&event_target_value(&ev)).unwrap_or_default();
                    s.update(|s| s.mode = m);
                }>
                    <option value="auto" selected=move || mode_name() == "auto">"Auto (extractive for small models)"</option>
                    <option value="grounded" selected=move || mode_name() == "grounded">"Grounded JSON with quotes"</option>
                    <option value="refiner" selected=move || mode_name() == "refiner">"Refiner (cited snippets)"</option>
                    <option value="react" selected=move || mode_name() == "react">"ReAct agent (search, read)"</option>
                    <option value="extractive" selected=move || mode_name() == "extractive">"Extractive (the reader's span, no generation)"</option>
                </select>
            </label>
            <label>"Temperature"
                <input id="temperature" type="number" min="0" max="2" step="0.1"
                    prop:value=move || s.get().temperature.to_string()
                    on:change=move |ev| if let Ok(v) = event_target_value(&ev).parse() { s.update(|s| s.temperature = v) } />
            </label>
            <label>"Max tokens"
                <input id="max-tokens" type="number" min="1" max="4096"
                    prop:value=move || s.get().max_tokens.to_string()
                    on:change=move |ev| if let Ok(v) = event_target_value(&ev).parse() { s.update(|s| s.max_tokens = v) } />
            </label>
            <label>"Seed"
                <input id="seed" type="number" min="0"
                    prop:value=move || s.get().seed.to_string()
                    on:change=move |ev| if let Ok(v) = event_target_value(&ev).parse() { s.update(|s| s.seed = v) } />
            </label>
            <label class="check">
                <input id="grammar" type="checkbox" prop:checked=move || s.get().grammar
                    on:change=move |ev| s.update(|s| s.grammar = event_target_checked(&ev)) />
                "Constrained decoding (the output always parses)"
            </label>
        </details>
    }
}
