//! Prints a GGUF file's metadata (arrays abbreviated) and tensor directory.
//! `cargo run -p lorekeeper-engine --example gguf_info -- FILE.gguf`
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: gguf_info FILE.gguf");
        std::process::exit(2);
    };
    let g = match lorekeeper_engine::format::gguf::Gguf::open(std::path::Path::new(&path)) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    for (k, v) in &g.metadata {
        match v {
            lorekeeper_engine::format::gguf::Value::Array(a) => println!(
                "{k} = [{} items] first: {:?}",
                a.len(),
                a.iter().take(3).collect::<Vec<_>>()
            ),
            v => println!("{k} = {v:?}"),
        }
    }
    for t in g.tensors.iter().take(14) {
        println!("{} {:?} {:?}", t.name, t.dims, t.ty);
    }
    println!("... {} tensors", g.tensors.len());
}
