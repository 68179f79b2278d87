//! Hostile input for `#[differentiable]`: the corpus's token streams mutated (tokens
//! dropped, duplicated, swapped, replaced by extremes, unsupported constructs inserted) and
//! handed to the expansion. Property: it returns tokens (the function, its module, or its
//! spanned errors) within a time bound, and never panics: a panicking proc macro takes down
//! the user's whole build. A fixed seed and case count, so that CI runs the same cases
//! (`GRADFUSE_FUZZ_CASES=N` runs more; a failure prints the source that caused it).

use gradfuse_shaders_gen::expand;
use proc_macro2::{TokenStream, TokenTree};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use std::time::{Duration, Instant};

/// Functions covering the language: scalars, arrays, loops, branches, tuples, shared and
/// constant arguments, method calls, calls of other functions.
const CORPUS: &[&str] = &[
    "fn f(x: f32, y: f32) -> f32 { let a = x * y + 1.0; a.sin() / (1.0 + a * a) }",
    "fn f(p: [f32; 3], q: [f32; 3], #[constant] rest: f32) -> f32 {
        let dx = q[0] - p[0]; let dy = q[1] - p[1]; let dz = q[2] - p[2];
        let s = (dx * dx + dy * dy + dz * dz).sqrt() - rest; 0.5 * s * s }",
    "fn f(x: [f32; 4]) -> f32 { let mut s = 0.0; for i in 0..3 { s += 100.0 * (x[i + 1] - x[i] * x[i]).powi(2) + (1.0 - x[i]).powi(2); } s }",
    "fn f(x: f32, #[shared] w: [f32; 8]) -> f32 { let mut h = [0.0; 4]; for j in 0..4 { h[j] = (w[j] * x + w[j + 4]).tanh(); } h[0] + h[1] * h[2] - h[3] }",
    "fn f(x: f32, y: f32) -> (f32, [f32; 2]) { let r = (x * x + y * y).sqrt(); if r > 1.0 { (r, [x / r, y / r]) } else { (r, [x, y]) } }",
    "fn f(x: [f32; 2], #[constant] y: [f32; 8]) -> [f32; 8] { let t = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]; let mut r = [0.0; 8]; for k in 0..8 { r[k] = x[0] * (x[1] * t[k]).exp() - y[k]; } r }",
    "fn f(a: f32, b: f32) -> f32 { let m = a.max(b); let n = a.min(b).abs(); if m > 0.0 && n < 2.0 { m.ln() + n.atan2(m) } else { -m } }",
    "fn f(x: f32) -> f32 { const N: usize = 3; let mut s = x; for i in 0..=N { for j in 0..i { s = s * 0.5 + (j as f32); } } s }",
];

/// What a mutation may put in a token's place, or before it.
const EXTREMES: &[&str] = &[
    "1e39",
    "-1e39",
    "1e-45",
    "(0.0 / 0.0)",
    "f32::NAN",
    "usize::MAX",
    "4294967295",
    "100000",
    "[0.0; 100000]",
    "x[100000]",
    "r#type",
    "r#in",
    "?",
    "|v: f32| v",
    "Some(1.0)",
    "loop {}",
    "return",
    "unsafe",
    "&",
    "*",
    "as f64",
    "..",
    "'a",
    "#[inline]",
    "f(x)",
    "x.foo()",
    "{ { { { { { { { x } } } } } } } }",
    "self",
    "mut",
    "_",
];

/// A token stream's tokens in order, groups as their opening and closing delimiters, joint
/// punctuation (`+=`, `..`, `::`) as one token.
fn flatten(ts: TokenStream, out: &mut Vec<String>) {
    let mut joint = false;
    for tt in ts {
        match tt {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    proc_macro2::Delimiter::Parenthesis => ("(", ")"),
                    proc_macro2::Delimiter::Brace => ("{", "}"),
                    proc_macro2::Delimiter::Bracket => ("[", "]"),
                    proc_macro2::Delimiter::None => ("", ""),
                };
                out.push(open.to_string());
                flatten(g.stream(), out);
                out.push(close.to_string());
                joint = false;
            }
            TokenTree::Punct(p) => {
                match out.last_mut() {
                    Some(last) if joint => last.push(p.as_char()),
                    _ => out.push(p.as_char().to_string()),
                }
                joint = p.spacing() == proc_macro2::Spacing::Joint;
            }
            other => {
                out.push(other.to_string());
                joint = false;
            }
        }
    }
}

/// One mutation: (kind, position, extreme), each taken modulo what it picks from.
type Mutation = (u8, usize, usize);

/// `src` with `mutations` applied to its tokens, or `None` where the result is no token
/// stream (unbalanced delimiters).
fn mutate(src: &str, mutations: &[Mutation]) -> Option<String> {
    let ts: TokenStream = src.parse().ok()?;
    let mut tokens = Vec::new();
    flatten(ts, &mut tokens);
    for &(kind, at, extreme) in mutations {
        // Replacements and insertions go into the body, where most leave a function that
        // reaches the compiler; drops, duplicates and swaps anywhere test the parser too.
        let body = tokens.iter().position(|t| t == "{").unwrap_or(0) + 1;
        if tokens.len() <= body + 1 {
            break;
        }
        let anywhere = at % tokens.len();
        let in_body = body + at % (tokens.len() - body - 1);
        let e = EXTREMES[extreme % EXTREMES.len()].to_string();
        match kind % 10 {
            0 => {
                tokens.remove(anywhere);
            }
            1 => tokens.insert(anywhere, tokens[anywhere].clone()),
            2 if anywhere + 1 < tokens.len() => tokens.swap(anywhere, anywhere + 1),
            3..=6 => {
                // The next literal or name from there.
                let keywords = ["let", "mut", "for", "in", "if", "else", "const", "as"];
                let word = (in_body..tokens.len()).find(|&j| {
                    tokens[j].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                        && !keywords.contains(&tokens[j].as_str())
                });
                if let Some(j) = word {
                    tokens[j] = e;
                }
            }
            _ => tokens.insert(in_body, e),
        }
    }
    let text = tokens.join(" ");
    text.parse::<TokenStream>().ok().map(|_| text)
}

fn cases() -> u32 {
    std::env::var("GRADFUSE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

#[test]
fn mutated_functions_expand_to_tokens_or_errors_never_a_panic() {
    // The expansion's panics are caught and reported below, not printed as they happen.
    std::panic::set_hook(Box::new(|_| {}));
    let config = Config {
        cases: cases(),
        rng_seed: RngSeed::Fixed(0x6772_6164_6675_7365),
        failure_persistence: None,
        ..Config::default()
    };
    let mutations = prop::collection::vec((any::<u8>(), any::<usize>(), any::<usize>()), 1..3);
    let mut runner = TestRunner::new(config);
    // Cases that were token streams, and of those, functions (which reach the compiler).
    let (streams, functions) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let result = runner.run(&(0..CORPUS.len(), mutations), |(k, m)| {
        let Some(src) = mutate(CORPUS[k], &m) else {
            return Ok(());
        };
        streams.set(streams.get() + 1);
        if syn::parse_str::<syn::ItemFn>(&src).is_ok() {
            functions.set(functions.get() + 1);
        }
        // A case that takes the process down (out of memory) leaves its source here.
        if let Ok(path) = std::env::var("GRADFUSE_FUZZ_LAST") {
            let _ = std::fs::write(path, &src);
        }
        let item: TokenStream = src.parse().expect("checked by mutate");
        let began = Instant::now();
        let expanded = std::panic::catch_unwind(|| expand(TokenStream::new(), item).to_string());
        let took = began.elapsed();
        prop_assert!(expanded.is_ok(), "the expansion panicked on:\n{src}");
        prop_assert!(
            took < Duration::from_secs(10),
            "the expansion took {took:?} on:\n{src}"
        );
        Ok(())
    });
    let _ = std::panic::take_hook();
    if let Err(e) = result {
        panic!("{e}");
    }
    // The harness tests the compiler, not only the parser: a good share of the cases stay
    // functions.
    let (streams, functions) = (streams.get(), functions.get());
    eprintln!("{streams} token streams, {functions} of them functions");
    assert!(
        functions * 5 >= cases(),
        "only {functions} of {} cases reached the compiler",
        cases()
    );
}
