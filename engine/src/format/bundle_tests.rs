//! Tests of [`super`] (`bundle.rs`).

use super::*;
use crate::quant::BlockLayout;

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

/// A `q5` tensor (GGUF's Q5_0 / Q5_1 blocks as they are) in two parts: named `q5` in the
/// manifest, its parts read back as the same `q5` rows (bytes equal), dequantized to the
/// source's values, and sized for a binding as the `q8_0` form a backend without `q5` kernels
/// loads (9 bits a weight against 6).
#[test]
fn q5_tensors_read_back_as_they_were_written() {
    use crate::cpu::simd::tests::random_q5;
    let (rows, cols) = (7, 32 * 5);
    for with_min in [false, true] {
        let w = random_q5(
            &mut crate::rng::Pcg32::new(40 + with_min as u64),
            rows,
            cols,
            with_min,
        );
        let (a, b) = (
            w.row_block(0, 3).to_bytes(),
            w.row_block(3, rows).to_bytes(),
        );
        assert_eq!(a.len(), DType::Q5.bytes_for(3, cols));
        assert_eq!(b.len(), DType::Q5.bytes_for(rows - 3, cols));
        assert_eq!(DType::Q5.bytes_for(1, cols), 24 * cols / 32);
        assert_eq!(
            DType::Q5.loaded_bytes_for(1, cols),
            DType::Q80.bytes_for(1, cols)
        );
        assert_eq!(
            DType::Q80.loaded_bytes_for(1, cols),
            DType::Q80.bytes_for(1, cols)
        );
        let t = TensorEntry {
            dtype: DType::Q5,
            shape: vec![rows, cols],
            parts: vec![
                part(0, a.len() as u64, [0, 3]),
                part(a.len() as u64, b.len() as u64, [3, rows]),
            ],
        };
        let json = serde_json::to_string(&t).expect("json");
        assert!(json.contains(r#""dtype":"q5""#), "{json}");
        let shard = [a.clone(), b.clone()].concat();
        let m = manifest_with(t.clone(), shard.len() as u64);
        m.validate("m").expect("valid");
        let files = [("model-00000-abc.bin".to_string(), shard)]
            .into_iter()
            .collect();
        let s = ShardedTensors::new("m", m.model.expect("model").tensors, files);
        let parts = s.q4_parts("w").expect("parts").expect("a block matrix");
        assert_eq!(parts.len(), 2);
        for ((r0, got), want) in parts.iter().zip([&a, &b]) {
            assert_eq!(got.layout, BlockLayout::Q5, "part at row {r0}");
            assert_eq!(&got.to_bytes(), want, "part at row {r0}");
        }
        let values = s.get("w").expect("read").expect("present").data;
        assert_eq!(values, w.dequantize(), "with_min {with_min}");
    }
}
