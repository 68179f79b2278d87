//! Generated code size against network size: an I-H-H-O tanh network with a squared-error
//! loss, written as the README's language allows (`#[shared]` weight arrays,
//! `let mut h = [0.0; H]`, loops that read and write arrays at loop indices), compiled by
//! shaders-gen from 8-16-16-1 to 16-128-128-4. It prints, per network, the compiler's own
//! time, the IR sizes and the bytes of the generated WGSL and Rust: what rustc and the GPU
//! driver are handed. `benches/build_scaling.sh` measures what rustc then takes.
//!
//! `cargo bench --bench code_size` (a few seconds; `--quick` stops at 8-32-32-1).
//! The table is in BENCHMARKS.md.

use gradfuse_shaders_gen::samples::{deep_network, network};
use std::time::Instant;

/// The networks of the table: input, hidden width, outputs.
pub const NETWORKS: [(usize, usize, usize); 6] = [
    (8, 16, 1),
    (8, 32, 1),
    (8, 48, 1),
    (16, 64, 4),
    (16, 96, 4),
    (16, 128, 4),
];

/// Networks of three hidden layers (input, the hidden widths, outputs), for the table only:
/// a deeper network adds its layers' code, not their unrolled weights'.
const DEEP_NETWORKS: [(usize, [usize; 3], usize); 2] = [(8, [32; 3], 1), (8, [64; 3], 1)];

/// Writes one crate per network under `dir` (`net_I_H_O/`, each its own workspace,
/// depending on this repository's `gradfuse` without GPU support, whose code it does not
/// change), for `benches/build_scaling.sh` to build.
fn write_crates(dir: &std::path::Path, networks: &[(usize, usize, usize)]) -> std::io::Result<()> {
    let root = env!("CARGO_MANIFEST_DIR");
    for &(i, h, o) in networks {
        let krate = dir.join(format!("net_{i}_{h}_{o}"));
        std::fs::create_dir_all(krate.join("src"))?;
        std::fs::write(
            krate.join("Cargo.toml"),
            format!(
                "[package]\nname = \"net_{i}_{h}_{o}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
                 [dependencies]\ngradfuse = {{ path = \"{root}\", default-features = false }}\n\n\
                 [workspace]\n"
            ),
        )?;
        std::fs::write(
            krate.join("src/lib.rs"),
            format!(
                "#[gradfuse::differentiable]\npub {}\n\n\
                 /// Uses every CPU version and kernel description, so that rustc generates \
                 their code in this crate (they are `#[inline]`).\n\
                 pub fn use_all(a: &net::Args, s: &net::Shared) -> f32 {{\n\
                 \x20   let (v, _, g) = net::value_and_grad(a, s);\n\
                 \x20   let (w, d) = net::jvp(a, s, &net::Grad {{}}, &g);\n\
                 \x20   std::hint::black_box((&net::FORWARD_KERNEL, &net::ADJOINT_KERNEL));\n\
                 \x20   v + w + d\n\
                 }}\n",
                network(i, h, o)
            ),
        )?;
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let networks: &[(usize, usize, usize)] = if quick { &NETWORKS[..2] } else { &NETWORKS };
    if let Some(at) = args.iter().position(|a| a == "--write-crates") {
        let dir = std::path::Path::new(args.get(at + 1).expect("--write-crates DIR"));
        write_crates(dir, networks).expect("the crates are written");
        return;
    }
    println!(
        "| network | shared words | shaders-gen time | primal ops | reverse ops | WGSL forward bytes | WGSL reverse bytes | Rust bytes |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let deep = DEEP_NETWORKS.iter().filter(|_| !quick).map(|(i, hs, o)| {
        let widths: Vec<String> = hs.iter().map(ToString::to_string).collect();
        (
            format!("{i}-{}-{o}", widths.join("-")),
            deep_network(*i, hs, *o),
        )
    });
    let rows = (networks.iter())
        .map(|&(i, h, o)| (format!("{i}-{h}-{h}-{o}"), network(i, h, o)))
        .chain(deep);
    for (name, src) in rows {
        let item: syn::ItemFn = syn::parse_str(&src).expect("the generated source parses");
        let t = Instant::now();
        let c = match gradfuse_shaders_gen::compile(&item) {
            Ok(c) => c,
            Err(errors) => {
                let msgs: Vec<String> = errors.iter().map(ToString::to_string).collect();
                println!("| {name} | does not compile: {} |", msgs.join("; "));
                continue;
            }
        };
        let rust = gradfuse_shaders_gen::emit_rust::emit(&item, &c).to_string();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "| {name} | {} | {ms:.0} ms | {} | {} | {} | {} | {} |",
            c.lowered.layout.shared_words,
            c.primal.op_count(),
            c.reverse.function().op_count(),
            c.wgsl_forward.len(),
            c.wgsl_reverse.len(),
            rust.len()
        );
    }
}
