//! Which kernels load their argument rows through workgroup memory, which read them as
//! `vec4`s, and which write `tanh` without branches: rows mapped through `tanh`
//! (`abi::rows_mapped_by_tanh`) are staged with the branch-free form up to
//! `abi::STAGE_MAPPED_ROWS_MAX_WORK_PER_WORD`, but for an adjoint's rows of single-word
//! loads, read as `vec4`s instead (`abi::mapped_rows_as_vec4s`); networks over shared
//! weights, rows with a few `tanh` calls and f64 rows keep their loads and the branching
//! form. (`tests/wide_rows.rs` runs such kernels against the CPU.)

use gradfuse_shaders_gen::compile_str;

const STAGED: &str = "the group loads them through";
const BRANCH_FREE_TANH: &str = "tanh to about 2 ulp (Cephes' tanhf), without branches";
const VEC4_ROWS: &str = "var<storage, read> args: array<vec4<f32>>;";

/// The three kernels of `src`: value, tangent, adjoint.
fn kernels(src: &str) -> [(&'static str, String); 3] {
    let c = compile_str(src).unwrap_or_else(|e| panic!("compiles: {e:?}"));
    [
        ("value", c.wgsl_forward),
        ("tangent", c.wgsl_tangent),
        ("adjoint", c.wgsl_reverse),
    ]
}

#[test]
fn rows_mapped_through_tanh_are_staged_with_tanh_branch_free() {
    let src = "fn mapped(a: [f32; 40], s: f32) -> f32 {
        let mut b = [0.0; 40];
        for i in 0..40 {
            b[i] = (a[i] * s).tanh();
        }
        let mut acc = 0.0;
        for i in 0..39 {
            acc += b[i] * a[i + 1] - b[i + 1] * a[i];
        }
        acc * acc
    }";
    for (kind, wgsl) in kernels(src) {
        // The adjoint stages its gradients: its rows of 41 single words are read as
        // `vec4`s from their aligned start instead, 12 of them.
        let adjoint = kind == "adjoint";
        assert_eq!(wgsl.contains(STAGED), !adjoint, "{kind}: rows staged");
        assert_eq!(wgsl.contains(VEC4_ROWS), adjoint, "{kind}: rows as vec4s");
        assert!(wgsl.contains(BRANCH_FREE_TANH), "{kind}: tanh branch-free");
    }
    let adjoint = &kernels(src)[2].1;
    assert!(adjoint.contains("let row_r11 = args[min(row_q + 11u, arrayLength(&args) - 1u)];"));
    assert!(!adjoint.contains("row_r12"));
    assert!(adjoint.contains("let a_39 = row_w9.w;") && adjoint.contains("let s = row_w10.x;"));
}

#[test]
fn an_adjoint_of_pairs_of_words_mapped_through_tanh_keeps_its_stage() {
    // 42 words a row: `vec2` loads, which were measured read as `vec4`s in tangents only.
    let src = "fn pairs(a: [f32; 40], s: f32, t: f32) -> f32 {
        let mut acc = 0.0;
        for i in 0..40 {
            acc += (a[i] * s).tanh() * t;
        }
        acc
    }";
    let adjoint = &kernels(src)[2].1;
    assert!(adjoint.contains(STAGED) && !adjoint.contains("vec4<f32>>;"));
    assert!(adjoint.contains(BRANCH_FREE_TANH));
}

#[test]
fn a_network_over_shared_weights_keeps_its_loads_and_branches() {
    // 32-64-64-1 through `tanh`: 128 calls for a row of 33 words, but about 1,000 weighted
    // operations a word. Staged with the branch-free `tanh`, its value kernel ran 1.39x
    // slower on the H100 (BENCHMARKS.md, "Rows mapped through `tanh`").
    let src = "fn in32_64(#[constant] x: [f32; 32], #[constant] t: f32, #[shared] w1: [f32; 2112], #[shared] w2: [f32; 4160], #[shared] w3: [f32; 65]) -> f32 {
        let mut h1 = [0.0; 64];
        for j in 0..64 {
            let mut s = w1[32 * 64 + j];
            for k in 0..32 {
                s += w1[j * 32 + k] * x[k];
            }
            h1[j] = s.tanh();
        }
        let mut h2 = [0.0; 64];
        for j in 0..64 {
            let mut s = w2[64 * 64 + j];
            for k in 0..64 {
                s += w2[j * 64 + k] * h1[k];
            }
            h2[j] = s.tanh();
        }
        let mut y = w3[64];
        for k in 0..64 {
            y += w3[k] * h2[k];
        }
        (y - t) * (y - t)
    }";
    let c = compile_str(src).unwrap_or_else(|e| panic!("compiles: {e:?}"));
    assert!(
        c.wgsl_forward.matches("gf_tanh(").count() > 64,
        "the layers' calls are written out, so the rule sees them"
    );
    assert!(!c.wgsl_forward.contains(STAGED));
    assert!(!c.wgsl_forward.contains(BRANCH_FREE_TANH));
}

#[test]
fn a_few_tanh_calls_on_a_wide_row_keep_the_loads_and_branches() {
    let src = "fn few(a: [f32; 40], s: f32) -> f32 {
        let mut acc = 0.0;
        for i in 0..39 {
            acc += (a[i] * s).sin() * a[i + 1];
        }
        acc.tanh() + (a[0] * s).tanh() + (a[39] - s).tanh()
    }";
    for (kind, wgsl) in kernels(src) {
        assert!(!wgsl.contains(STAGED), "{kind}: rows not staged");
        assert!(!wgsl.contains(VEC4_ROWS), "{kind}: rows read word by word");
        assert!(!wgsl.contains(BRANCH_FREE_TANH), "{kind}: tanh branching");
    }
}

#[test]
fn f64_rows_mapped_through_tanh_keep_the_branching_tanh() {
    let src = "fn mapped64(a: [f64; 20], s: f64) -> f64 {
        let mut acc = 0.0f64;
        for i in 0..20 {
            acc += (a[i] * s).tanh();
        }
        acc
    }";
    for (kind, wgsl) in kernels(src) {
        assert!(
            !wgsl.contains(BRANCH_FREE_TANH),
            "{kind}: no f64 branch-free tanh"
        );
    }
}
