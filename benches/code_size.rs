//! Generated code size against network width: an 8-H-H-1 tanh network written as the
//! README's language allows (`#[shared]` weight arrays, `let mut h = [0.0; H]`, loops that
//! read and write arrays at loop indices), compiled by shaders-gen for H = 8 .. 48. It
//! prints, per width, the compiler's own time, the IR sizes and the bytes of the generated
//! WGSL and Rust: what rustc and the GPU driver are handed.
//!
//! `cargo bench --bench code_size` (about 15 s; `--quick` stops at H = 16).
//! The baseline for "arrays as values" is in BENCHMARKS.md.

use std::time::Instant;

/// The network's source: `x` per element, three `#[shared]` weight blocks.
fn network(h: usize) -> String {
    let (w1, w2, w3) = (8 * h + h, h * h + h, h + 1);
    format!(
        "fn net(#[constant] x: [f32; 8], #[shared] w1: [f32; {w1}], \
                #[shared] w2: [f32; {w2}], #[shared] w3: [f32; {w3}]) -> f32 {{
            let mut h1 = [0.0; {h}];
            for j in 0..{h} {{
                let mut s = w1[8 * {h} + j];
                for i in 0..8 {{
                    s += w1[j * 8 + i] * x[i];
                }}
                h1[j] = s.tanh();
            }}
            let mut h2 = [0.0; {h}];
            for j in 0..{h} {{
                let mut s = w2[{h} * {h} + j];
                for i in 0..{h} {{
                    s += w2[j * {h} + i] * h1[i];
                }}
                h2[j] = s.tanh();
            }}
            let mut y = w3[{h}];
            for i in 0..{h} {{
                y += w3[i] * h2[i];
            }}
            y
        }}"
    )
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let widths: &[usize] = if quick {
        &[8, 16]
    } else {
        &[8, 16, 24, 32, 48]
    };
    println!(
        "| H | shared words | shaders-gen time | primal ops | reverse ops | WGSL forward bytes | WGSL reverse bytes | Rust bytes |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &h in widths {
        let item: syn::ItemFn = syn::parse_str(&network(h)).expect("the generated source parses");
        let t = Instant::now();
        let c = match gradfuse_shaders_gen::compile(&item) {
            Ok(c) => c,
            Err(errors) => {
                let msgs: Vec<String> = errors.iter().map(ToString::to_string).collect();
                println!("| {h} | does not compile: {} |", msgs.join("; "));
                continue;
            }
        };
        let rust = gradfuse_shaders_gen::emit_rust::emit(&item, &c).to_string();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "| {h} | {} | {ms:.0} ms | {} | {} | {} | {} | {} |",
            c.lowered.layout.shared_words,
            c.primal.op_count(),
            c.reverse.function().op_count(),
            c.wgsl_forward.len(),
            c.wgsl_reverse.len(),
            rust.len()
        );
    }
}
