//! The functions of the performance corpus, as source text: structured families (wide
//! Jacobians, per-element arrays read in loops, chains of transcendental calls, branches,
//! `#[shared]` tables) and random programs from fixed seeds. None is a function the
//! generator was tuned on; they are compiled at run time by `compile_str`, the macro's own
//! compiler.

use gradfuse_shaders_gen::grammar::{self, Sizes};

/// One function of the corpus.
pub struct Function {
    /// Its name in the tables (also the Rust name).
    pub name: String,
    /// Its family.
    pub family: &'static str,
    /// The source, as a user writes it.
    pub src: String,
}

impl Function {
    fn new(name: String, family: &'static str, src: String) -> Self {
        Function { name, family, src }
    }
}

/// Every function of the corpus, structured families first.
pub fn corpus() -> Vec<Function> {
    let mut out = Vec::new();
    for (m, n) in [(2, 12), (4, 8), (4, 16), (3, 24), (4, 32)] {
        out.push(jacobian(m, n));
    }
    for w in [8, 16, 32, 64] {
        out.push(array_loop(w));
    }
    for w in [16, 64] {
        out.push(stencil(w));
    }
    for calls in [8, 16, 32] {
        out.push(transcendental(calls));
    }
    for depth in [2, 4, 6] {
        out.push(branches(depth));
    }
    for t in [16, 256, 1024] {
        out.push(shared_table(t));
    }
    for k in [16, 64] {
        out.push(shared_softmax(k));
    }
    for steps in [64, 512, 4096] {
        out.push(oscillator(steps));
    }
    for seed in 0..24u64 {
        out.push(random_program(seed));
    }
    out
}

/// Programs the corpus does not hold, for a run that checks the generator on functions it
/// was never measured on: random programs from the seeds `GRADFUSE_CORPUS_SEEDS` names
/// (`"24..64"`, or seeds apart), functions of the whole language from the seeds
/// `GRADFUSE_CORPUS_GRAMMAR` names (`gradfuse_shaders_gen::grammar`'s wide sizes, family
/// "grammar"), and the functions of the Rust file `GRADFUSE_CORPUS_EXTRA` names (every `fn`
/// item, family "extra"). An unreadable file or range is an error, not an empty list: a
/// check that silently ran nothing would pass.
pub fn unseen() -> Result<Vec<Function>, String> {
    let mut out = Vec::new();
    for seed in seeds("GRADFUSE_CORPUS_SEEDS")? {
        out.push(random_program(seed));
    }
    for seed in seeds("GRADFUSE_CORPUS_GRAMMAR")? {
        let src = grammar::function(seed, Sizes::Wide).replacen(
            "fn f(",
            &format!("fn grammar_{seed}("),
            1,
        );
        out.push(Function::new(format!("grammar_{seed}"), "grammar", src));
    }
    if let Ok(path) = std::env::var("GRADFUSE_CORPUS_EXTRA") {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        let file = syn::parse_file(&text).map_err(|e| format!("{path}: {e}"))?;
        for item in file.items {
            if let syn::Item::Fn(f) = item {
                let name = f.sig.ident.to_string();
                let src = quote::quote!(#f).to_string();
                out.push(Function::new(name, "extra", src));
            }
        }
    }
    Ok(out)
}

/// The seeds the environment variable `var` names: seeds and ranges `a..b` apart; none
/// where it is unset.
fn seeds(var: &str) -> Result<Vec<u64>, String> {
    let Ok(list) = std::env::var(var) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for part in list.split_whitespace() {
        let bad = || format!("{var}: `{part}` is not a seed or a range a..b");
        let range = match part.split_once("..") {
            Some((a, b)) => a.parse().map_err(|_| bad())?..b.parse().map_err(|_| bad())?,
            None => {
                let s: u64 = part.parse().map_err(|_| bad())?;
                s..s + 1
            }
        };
        out.extend(range);
    }
    Ok(out)
}

/// `m` outputs of `n` inputs, each a loop over every input: an `m x n` Jacobian.
fn jacobian(m: usize, n: usize) -> Function {
    let name = format!("jacobian_{m}x{n}");
    let src = format!(
        "fn {name}(x: [f32; {n}]) -> [f32; {m}] {{
            let mut r = [0.0; {m}];
            for j in 0..{m} {{
                let c = j as f32 + 1.0;
                let mut s = 0.0;
                for k in 0..{n} {{
                    s += (x[k] * c).sin() * x[{last} - k];
                }}
                r[j] = s;
            }}
            r
        }}",
        last = n - 1
    );
    Function::new(name, "wide Jacobian", src)
}

/// A per-element array of `w` words mapped into a local array, then read pairwise at
/// neighbouring computed indices.
fn array_loop(w: usize) -> Function {
    let name = format!("array_{w}");
    let src = format!(
        "fn {name}(a: [f32; {w}], s: f32) -> f32 {{
            let mut b = [0.0; {w}];
            for i in 0..{w} {{
                b[i] = (a[i] * s).tanh();
            }}
            let mut acc = 0.0;
            for i in 0..{last} {{
                acc += b[i] * a[i + 1] - b[i + 1] * a[i];
            }}
            acc * acc
        }}",
        last = w - 1
    );
    Function::new(name, "array in loops", src)
}

/// A 1-D elastic energy over a per-element array with per-element stiffnesses.
fn stencil(w: usize) -> Function {
    let name = format!("stencil_{w}");
    let src = format!(
        "fn {name}(u: [f32; {w}], #[constant] k: [f32; {w}]) -> f32 {{
            let mut e = 0.0;
            for i in 1..{last} {{
                let d = u[i + 1] - 2.0 * u[i] + u[i - 1];
                e += k[i] * d * d + 0.1 * (u[i] - u[i - 1]).abs();
            }}
            e
        }}",
        last = w - 1
    );
    Function::new(name, "array in loops", src)
}

/// The methods a generated chain cycles through, each kept inside its domain.
const CALLS: [&str; 8] = [
    "(A).sin()",
    "(A).tanh().exp()",
    "((A) * (A) + 1.0).ln()",
    "(A).atan2(B)",
    "((A) * (A) + 1.0).sqrt()",
    "(A).cos().cosh()",
    "(0.5 * (A).tanh()).asin()",
    "(A).hypot(B)",
];

/// A chain of `calls` transcendental calls over three arguments.
fn transcendental(calls: usize) -> Function {
    let name = format!("transcendental_{calls}");
    let mut body = String::from("let v0 = x;\nlet v1 = y;\nlet v2 = z;\n");
    for k in 0..calls {
        let call = CALLS[k % CALLS.len()]
            .replace('A', &format!("v{}", k + 2))
            .replace('B', &format!("v{}", k));
        body.push_str(&format!("let v{} = {call} + v{};\n", k + 3, k + 1));
    }
    let src = format!(
        "fn {name}(x: f32, y: f32, z: f32) -> f32 {{\n{body}v{} + v{}\n}}",
        calls + 2,
        calls + 1
    );
    Function::new(name, "transcendental", src)
}

/// Nested `if`/`else` on per-element comparisons, `depth` deep, each branch its own work.
fn branches(depth: usize) -> Function {
    let name = format!("branches_{depth}");
    let mut expr = String::from("(x * y).sin() + z");
    for d in 0..depth {
        let (a, b) = (["x", "y", "z"][d % 3], ["y", "z", "x"][d % 3]);
        expr = format!(
            "if {a} > {b} * {c:.1} {{ ({expr}) * {a}.cos() }} else {{ ({expr}).tanh() - {b}.exp() }}",
            c = 0.5 + 0.25 * d as f32
        );
    }
    let src = format!("fn {name}(x: f32, y: f32, z: f32) -> f32 {{\n{expr}\n}}");
    Function::new(name, "branches", src)
}

/// A `#[shared]` table of `t` words read in a loop (`samples::table_loop`): a uniform
/// table up to the uniform limit, and its gradient summed over the batch.
fn shared_table(t: usize) -> Function {
    let name = format!("shared_table_{t}");
    let src = gradfuse_shaders_gen::samples::table_loop(t).replacen(
        "fn table(",
        &format!("fn {name}("),
        1,
    );
    Function::new(name, "shared table", src)
}

/// A mixture weighted by a softmax over `k` shared logits (a soft choice among `k`
/// candidates, as a soft logic gate or a mixture of experts writes it): the maximum and the
/// exponentials are the same for every element, the candidates per element.
fn shared_softmax(k: usize) -> Function {
    let name = format!("shared_softmax_{k}");
    let src = format!(
        "fn {name}(x: f32, y: f32, #[shared] logits: [f32; {k}]) -> f32 {{
            let mut m = logits[0];
            for j in 1..{k} {{
                m = m.max(logits[j]);
            }}
            let mut z = 0.0;
            let mut out = 0.0;
            for j in 0..{k} {{
                let e = (logits[j] - m).exp();
                z += e;
                out += e * (x * (j as f32) * 0.1 + y);
            }}
            out / z
        }}"
    );
    Function::new(name, "shared softmax", src)
}

/// A pendulum with friction stepped `steps` times (semi-implicit Euler), scored by the
/// sum of its squared angles: a long loop carrying three scalars, each step's state read
/// back by the reverse pass (a time integration, as a user fitting `k` and `c` writes it).
fn oscillator(steps: usize) -> Function {
    let name = format!("oscillator_{steps}");
    let src = format!(
        "fn {name}(x: f32, v: f32, k: f32, c: f32) -> f32 {{
            let mut p = x;
            let mut q = v;
            let mut e = 0.0;
            for i in 0..{steps} {{
                let a = -k * p.sin() - c * q;
                q += 0.01 * a;
                p += 0.01 * q;
                e += p * p;
            }}
            e
        }}"
    );
    Function::new(name, "long loop", src)
}

/// A small xorshift generator: the corpus is the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// One random statement's right-hand side over the values `a`, `b`, `c`.
fn random_expr(rng: &mut Rng, a: &str, b: &str, c: &str) -> String {
    match rng.below(16) {
        0 => format!("{a} + {b}"),
        1 => format!("{a} - {b}"),
        2 => format!("{a} * {b}"),
        3 => format!("{a} / (1.0 + {b} * {b})"),
        4 => format!("{a}.sin()"),
        5 => format!("{a}.tanh()"),
        6 => format!("({a} * {a} + 1.0).ln()"),
        7 => format!("({a} * {a} + 1.0).sqrt()"),
        8 => format!("{a}.sin().exp()"),
        9 => format!("{a}.atan2({b})"),
        10 => format!("{a}.mul_add({b}, {c})"),
        11 => format!("{a}.max({b}) - {c}.min({a})"),
        12 => format!("{a}.hypot({b})"),
        13 => format!("if {a} > {b} {{ {a} * {c} }} else {{ {b}.cos() }}"),
        14 => format!("{a}.abs().powf(0.5)"),
        _ => format!("{a}.cos() * {b}"),
    }
}

/// A random program: 1-8 scalar arguments, sometimes an array argument read in a loop,
/// 8-40 statements, an `f32` result or (one in four) a vector result of 2-4 words.
fn random_program(seed: u64) -> Function {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (seed + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let name = format!("random_{seed:02}");
    let scalars = 1 + rng.below(8);
    let array = (rng.below(2) == 0).then(|| 4 + rng.below(13));
    let mut args: Vec<String> = (0..scalars).map(|i| format!("x{i}: f32")).collect();
    let mut vals: Vec<String> = (0..scalars).map(|i| format!("x{i}")).collect();
    let mut body = String::new();
    if let Some(len) = array {
        args.push(format!("a: [f32; {len}]"));
        body.push_str(&format!(
            "let mut s = 0.0;\nfor i in 0..{len} {{\n    s += (a[i] * {}).sin();\n}}\n",
            vals[0]
        ));
        vals.push("s".into());
    }
    let statements = 8 + rng.below(33);
    for k in 0..statements {
        let pick = |rng: &mut Rng| vals[vals.len() - 1 - rng.below(vals.len().min(6))].clone();
        let (a, b, c) = (pick(&mut rng), pick(&mut rng), pick(&mut rng));
        body.push_str(&format!(
            "let v{k} = {};\n",
            random_expr(&mut rng, &a, &b, &c)
        ));
        vals.push(format!("v{k}"));
    }
    let last = |j: usize| vals[vals.len() - 1 - j.min(vals.len() - 1)].clone();
    let (result, value) = if rng.below(4) == 0 {
        let m = 2 + rng.below(3);
        let words: Vec<String> = (0..m).map(last).collect();
        (format!("[f32; {m}]"), format!("[{}]", words.join(", ")))
    } else {
        (
            "f32".into(),
            format!("{} + {} + {}", last(0), last(1), last(2)),
        )
    };
    let src = format!(
        "fn {name}({}) -> {result} {{\n{body}{value}\n}}",
        args.join(", ")
    );
    Function::new(name, "random", src)
}
