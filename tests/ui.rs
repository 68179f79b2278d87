//! Compile-time behaviour of `#[differentiable]`: every supported construct compiles
//! (`tests/ui/pass`), every unsupported one fails with the reviewed message in its `.stderr`
//! (`tests/ui/fail`). Regenerate with `TRYBUILD=overwrite cargo test --test ui`, then review
//! the diff of the `.stderr` files.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
