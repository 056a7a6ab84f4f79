//! Lorekeeper's web app (Leptos + Trunk) lands with issue 7; until then this crate only
//! reserves its place in the workspace.

fn main() {
    println!("lorekeeper-app: the web app is not built yet (issue 7); see README.md");
}
