//! `index-builder`: builds Lorekeeper bundles (model: issue 4, story index: issue 5).
//! The subcommands land with those issues; until then it says so and exits non-zero.

fn main() -> std::process::ExitCode {
    eprintln!(
        "index-builder: no subcommands yet ('model' lands with issue 4, 'index' with issue 5)"
    );
    std::process::ExitCode::from(2)
}
