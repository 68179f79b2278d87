//! Every kernel of the performance corpus (`benches/corpus/functions.rs`: wide Jacobians,
//! arrays in loops, shared tables, long loops, random programs) is valid WGSL: the plain,
//! tangent, reverse, gathered, reduction and Hessian kernels. The bench runs them only on a
//! device; a kernel it cannot build (the gathered adjoint's rows entry once wrote single
//! words into a `vec4` buffer) must fail here first.

#[path = "../../benches/corpus/functions.rs"]
#[allow(dead_code)]
mod functions;

mod common;

use common::{invalid, kernels};

#[test]
fn every_corpus_kernel_is_valid_wgsl() {
    let mut failures = Vec::new();
    for f in functions::corpus() {
        for (kind, wgsl) in kernels(&f.src) {
            if let Some(e) = invalid(&wgsl) {
                failures.push(format!("{} {kind}:\n{e}", f.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
