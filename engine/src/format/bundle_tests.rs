//! Tests of [`super`] (`bundle.rs`).

use super::*;

fn manifest_with(tensor: TensorEntry, shard_bytes: u64) -> Manifest {
    let mut m = Manifest::empty();
    m.shards.push(ShardEntry {
        file: "model-00000-abc.bin".into(),
        part: BundlePart::Model,
        bytes: shard_bytes,
        sha256: "0".repeat(64),
    });
    m.model = Some(ModelManifest {
        architecture: "qwen3".into(),
        config: serde_json::json!({}),
        tokenizer: TokenizerEntry {
            shard: "model-00000-abc.bin".into(),
            meta: TokenizerMeta::default(),
        },
        quant: Quant::F32,
        policy: String::new(),
        tensors: [("w".to_string(), tensor)].into_iter().collect(),
        parameters: 0,
        matrix_bits_per_weight: 0.0,
        bits_per_weight: 0.0,
        tensor_bytes: 0,
        limits: GpuLimits::default(),
        source: String::new(),
        lora: None,
    });
    m
}

fn part(offset: u64, length: u64, rows: [usize; 2]) -> TensorPart {
    TensorPart {
        shard: "model-00000-abc.bin".into(),
        offset,
        length,
        rows,
    }
}

#[test]
fn validate_catches_lying_extents_and_gaps() {
    let ok = TensorEntry {
        dtype: DType::F32,
        shape: vec![4, 8],
        parts: vec![part(0, 64, [0, 2]), part(64, 64, [2, 4])],
    };
    manifest_with(ok.clone(), 128).validate("m").expect("valid");
    let e = manifest_with(ok.clone(), 100).validate("m").unwrap_err();
    assert!(e.to_string().contains("outside shard"), "{e}");
    let mut gap = ok.clone();
    gap.parts[1].rows = [3, 4];
    gap.parts[1].length = 32;
    let e = manifest_with(gap, 128).validate("m").unwrap_err();
    assert!(e.to_string().contains("does not continue"), "{e}");
    let mut short = ok;
    short.parts.pop();
    let e = manifest_with(short, 128).validate("m").unwrap_err();
    assert!(e.to_string().contains("cover 2 of 4"), "{e}");
}

#[test]
fn verify_shard_names_the_shard() {
    let data = b"hello shard".to_vec();
    let e = ShardEntry {
        file: "model-00001-x.bin".into(),
        part: BundlePart::Model,
        bytes: data.len() as u64,
        sha256: sha256_hex(&data),
    };
    verify_shard(&e, &data).expect("ok");
    let err = verify_shard(&e, &data[..5]).unwrap_err().to_string();
    assert!(
        err.contains("model-00001-x.bin") && err.contains("truncated"),
        "{err}"
    );
    let mut flipped = data.clone();
    flipped[0] ^= 1;
    let err = verify_shard(&e, &flipped).unwrap_err().to_string();
    assert!(err.contains("sha256"), "{err}");
}

#[test]
fn newer_format_is_refused_by_name() {
    let mut m = Manifest::empty();
    m.format_version = FORMAT_VERSION + 1;
    let bytes = serde_json::to_vec(&m).expect("json");
    let e = Manifest::parse("b/manifest.json", &bytes)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("version") && e.contains("b/manifest.json"),
        "{e}"
    );
}
