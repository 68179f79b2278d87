//! A local may take any name the user gives it, even one the generated stores declare:
//! the stores' names are reserved and the local is renamed (a user's `grads_group` once
//! made the wide adjoint's WGSL redefine it).

mod common;

use common::{invalid, kernels};
use gradfuse_shaders_gen::compile_str;
use std::collections::BTreeSet;

fn valid(wgsl: &str) {
    let module =
        naga::front::wgsl::parse_str(wgsl).unwrap_or_else(|e| panic!("{}", e.emit_to_string(wgsl)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    .expect("valid");
}

#[test]
fn locals_named_like_the_stores_names_are_renamed() {
    for src in [
        // A Jacobian stored in chunks of 16 words as its rows are computed.
        "fn f(x: [f32; 16]) -> [f32; 4] {
            let mut r = [0.0; 4];
            for j in 0..4 {
                let jacobians_group = j as f32 + 1.0;
                let mut t = 0.0;
                for k in 0..16 {
                    let jacobians_swizzle_0 = (x[k] * jacobians_group).sin();
                    let jacobians_from_0_0 = jacobians_swizzle_0 * x[15 - k];
                    t += jacobians_from_0_0;
                }
                r[j] = t;
            }
            r
        }",
        // 21 gradient words through the stage.
        "fn g(a: [f32; 20], s: f32) -> f32 {
            let mut grads_group = 0.0;
            for i in 0..19 {
                let grads_swizzle_0 = (a[i] * s).tanh();
                let grads_left_1 = grads_swizzle_0 * a[i + 1];
                grads_group += grads_left_1;
            }
            grads_group * s
        }",
    ] {
        let c = compile_str(src).expect("compiles");
        assert!(
            c.wgsl_reverse.contains("_swizzle_0 = (lid"),
            "the stores are chunked"
        );
        valid(&c.wgsl_forward);
        valid(&c.wgsl_reverse);
        valid(&c.wgsl_tangent);
    }
}

/// Every identifier a kernel of `src` declares (`let`, `var`, `fn`, `struct`, `override`,
/// `const`), module-scope and local.
fn declared(wgsl: &str) -> BTreeSet<String> {
    let words: Vec<&str> = wgsl
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '<' || c == '>'))
        .filter(|t| !t.is_empty())
        .collect();
    let declares = |w: &str| {
        ["let", "var", "fn", "struct", "override", "const"].contains(&w) || w.starts_with("var<")
    };
    words
        .windows(2)
        .filter(|p| declares(p[0]))
        .map(|p| p[1].trim_end_matches(['<', '>']).to_string())
        .filter(|n| n.starts_with(|c: char| c.is_alphabetic() || c == '_'))
        .collect()
}

/// `src` with every whole word `from` replaced by `to`.
fn rename(src: &str, from: &str, to: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    for c in src.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        out.push_str(if word == from { to } else { &word });
        word.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// The shape of a name, digits folded (`args_0` and `args_12` are one family).
fn shape(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if !(c.is_ascii_digit() && s.ends_with('#')) {
            s.push(if c.is_ascii_digit() { '#' } else { c });
        }
    }
    s
}

/// The audit the hand-kept reserved list could not give: every name any kernel of these
/// functions declares (one of each family, `args_0` for `args_12`), given by the user to a
/// local (`t`) and to an argument (`q`) in turn, still makes valid kernels of every kind.
/// The functions cover vector row loads, gathered fields and the rows entry, several
/// elements a thread with a shared reduction, Jacobian chunks, staged gradients, tapes and
/// Hessians. It caught `args_0`, `args_b_0`, `in_base_b`, `out_stage` and an argument named
/// `adjoint` (whose rows buffer `adjoint_rows` is the rows entry's name).
#[test]
fn every_declared_name_can_be_a_users() {
    let sources = [
        "fn rows(w: [f32; 7], q: f32) -> f32 {
            let mut t = 0.0;
            for k in 0..7 {
                t += w[k] * (q * (k as f32)).sin();
            }
            t * q
        }",
        "fn shared(x: [f32; 3], q: f32, #[shared] m: [f32; 8]) -> f32 {
            let mut t = q;
            for k in 0..8 {
                t = (t * m[k] + x[0] + x[1] * x[2]).tanh();
            }
            t
        }",
        "fn rows_out(x: [f32; 16], q: f32) -> [f32; 4] {
            let mut r = [0.0; 4];
            for j in 0..4 {
                let mut t = 0.0;
                for k in 0..16 {
                    t += (x[k] * q * (j as f32 + 1.0)).sin();
                }
                r[j] = t;
            }
            r
        }",
        "fn staged(a: [f32; 20], q: f32) -> f32 {
            let mut t = q;
            for j in 0..15 {
                for k in 0..20 {
                    t = t * 0.99 + (a[k] * t).sin();
                }
            }
            t
        }",
    ];
    let mut failures = Vec::new();
    for src in sources {
        let mut names = BTreeSet::new();
        for (_, wgsl) in kernels(src) {
            names.extend(declared(&wgsl));
        }
        let mut shapes = BTreeSet::new();
        for name in names {
            // A name the source uses, or a value's own (`v12`), is not the emitters'.
            if rename(src, &name, "_") != src
                || shape(&name) == "v#"
                || !shapes.insert(shape(&name))
            {
                continue;
            }
            for user in ["t", "q"] {
                let renamed = rename(src, user, &name);
                if syn::parse_str::<syn::ItemFn>(&renamed).is_err() {
                    continue;
                }
                for (kind, wgsl) in kernels(&renamed) {
                    if let Some(e) = invalid(&wgsl) {
                        failures.push(format!("`{user}` named `{name}`, {kind}:\n{e}"));
                        break;
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
