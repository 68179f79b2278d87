//! Random functions of the whole supported language, as source text: arguments of every
//! kind (per-element, `#[constant]`, `#[shared]`; scalars and arrays), `let` and `let mut`,
//! assignments and compound assignments to variables and array elements, `for` loops whose
//! index appears in arithmetic and in indices, `if`/`else` as statements and as values,
//! every method of the function table, and vector results.
//!
//! One generator serves the compiler's property tests (`shaders-gen/tests/fuzz_grammar.rs`:
//! every function compiles to valid kernels whose derivatives agree with differences) and
//! the GPU's (`tests/grammar_gpu.rs`: every kernel, run, agrees with the interpreter), so
//! that both draw from the same language. [`Sizes::Small`] keeps arrays and loops short
//! (what a compile-time check can afford many of); [`Sizes::Wide`] draws arrays and loops
//! of up to 64 words and trips and `#[shared]` tables of up to 320 words, the sizes at which
//! kernels unroll or keep loops, stage rows, sum shared gradients in streams and compute
//! several elements a thread.

use crate::ops;

/// How large the arrays and loops of a generated function may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sizes {
    /// Arrays of 1-6 words, loops of 1-5 trips.
    Small,
    /// Arrays of up to 64 words (`#[shared]` ones up to 320), loops of up to 64 trips.
    Wide,
}

/// The function of `seed`, named `f`.
pub fn function(seed: u64, sizes: Sizes) -> String {
    Grammar {
        rng: Draws(seed ^ 0x6772_616d_6d61_7273),
        fresh: 0,
        sizes,
    }
    .function()
}

/// A splitmix64 stream: every seed gives its own function, the same on every run.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// What an expression may read: scalar names, arrays with their lengths, loop indices with
/// their trip counts.
#[derive(Clone, Default)]
struct Scope {
    scalars: Vec<String>,
    arrays: Vec<(String, usize)>,
    indices: Vec<(String, usize)>,
    mutable_scalars: Vec<String>,
    mutable_arrays: Vec<(String, usize)>,
}

/// The generator of one function.
struct Grammar {
    rng: Draws,
    fresh: usize,
    sizes: Sizes,
}

impl Grammar {
    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn literal(&mut self) -> String {
        let v = (self.rng.below(2000) as f64 - 1000.0) / 256.0;
        format!("{v:?}")
    }

    /// The length of a new array (`shared`: of a `#[shared]` argument).
    fn array_len(&mut self, shared: bool) -> usize {
        match self.sizes {
            Sizes::Small => 1 + self.rng.below(6),
            Sizes::Wide if shared && self.rng.chance(40) => [40, 96, 160, 320][self.rng.below(4)],
            Sizes::Wide if self.rng.chance(50) => [8, 16, 33, 64][self.rng.below(4)],
            Sizes::Wide => 1 + self.rng.below(6),
        }
    }

    /// The trip count of a new loop.
    fn trips(&mut self) -> usize {
        match self.sizes {
            Sizes::Wide if self.rng.chance(50) => [8, 16, 32, 63, 64][self.rng.below(5)],
            _ => 1 + self.rng.below(5),
        }
    }

    /// An index into an array of `len` words: a literal, or a loop index whose range fits
    /// (shifted by a constant where room is left).
    fn index(&mut self, scope: &Scope, len: usize) -> String {
        let fitting: Vec<&(String, usize)> =
            scope.indices.iter().filter(|(_, n)| *n <= len).collect();
        if !fitting.is_empty() && self.rng.chance(60) {
            let (i, n) = fitting[self.rng.below(fitting.len())];
            let room = len - n;
            if room > 0 && self.rng.chance(40) {
                return format!("{i} + {}", self.rng.below(room + 1).min(room));
            }
            return i.clone();
        }
        self.rng.below(len).to_string()
    }

    /// A scalar expression of at most `depth` levels.
    fn expr(&mut self, scope: &Scope, depth: u32) -> String {
        let leaf = depth == 0 || self.rng.chance(25);
        if leaf {
            return match self.rng.below(4) {
                0 => self.literal(),
                1 if !scope.arrays.is_empty() => {
                    let (a, n) = scope.arrays[self.rng.below(scope.arrays.len())].clone();
                    format!("{a}[{}]", self.index(scope, n))
                }
                2 if !scope.indices.is_empty() => {
                    let (i, _) = &scope.indices[self.rng.below(scope.indices.len())];
                    format!("({i} as f32)")
                }
                _ if !scope.scalars.is_empty() => {
                    scope.scalars[self.rng.below(scope.scalars.len())].clone()
                }
                _ => self.literal(),
            };
        }
        let d = depth - 1;
        match self.rng.below(6) {
            0 | 1 => {
                let op = ["+", "-", "*", "/"][self.rng.below(4)];
                format!("({} {op} {})", self.expr(scope, d), self.expr(scope, d))
            }
            2 => format!("(-{})", self.expr(scope, d)),
            3 => {
                let cmp = ["<", "<=", ">", ">=", "==", "!="][self.rng.below(6)];
                format!(
                    "(if {} {cmp} {} {{ {} }} else {{ {} }})",
                    self.expr(scope, d),
                    self.expr(scope, d),
                    self.expr(scope, d),
                    self.expr(scope, d)
                )
            }
            _ => self.method(scope, d),
        }
    }

    /// A call of a method of the function table, with arguments of the kind it takes.
    fn method(&mut self, scope: &Scope, d: u32) -> String {
        let m = &ops::METHODS[self.rng.below(ops::METHODS.len())];
        let recv = self.expr(scope, d);
        let arg = match (m.name, m.arity) {
            ("powi", _) => format!("{}", self.rng.below(9) as i32 - 4),
            (_, 1) => String::new(),
            (_, 2) => self.expr(scope, d),
            (_, _) => format!("{}, {}", self.expr(scope, d), self.expr(scope, d)),
        };
        if self.rng.chance(15) {
            format!(
                "f32::{}({recv}{}{arg})",
                m.name,
                if arg.is_empty() { "" } else { ", " }
            )
        } else {
            format!("({recv}).{}({arg})", m.name)
        }
    }

    /// Statements into `out`, at most `depth` levels of loops and branches.
    fn statements(&mut self, scope: &mut Scope, depth: u32, count: usize, out: &mut String) {
        for _ in 0..count {
            match self.rng.below(8) {
                0 | 1 => self.binding(scope, out),
                2 if !scope.mutable_scalars.is_empty() => {
                    let v =
                        scope.mutable_scalars[self.rng.below(scope.mutable_scalars.len())].clone();
                    let op = ["=", "+=", "-=", "*=", "/="][self.rng.below(5)];
                    out.push_str(&format!("{v} {op} {};\n", self.expr(scope, 2)));
                }
                3 => {
                    let a = self.name("a");
                    let n = self.array_len(false);
                    out.push_str(&format!("let mut {a} = [{}; {n}];\n", self.literal()));
                    scope.arrays.push((a.clone(), n));
                    scope.mutable_arrays.push((a, n));
                }
                4 if !scope.mutable_arrays.is_empty() => {
                    let (a, n) =
                        scope.mutable_arrays[self.rng.below(scope.mutable_arrays.len())].clone();
                    let op = ["=", "+=", "*="][self.rng.below(3)];
                    let k = self.index(scope, n);
                    out.push_str(&format!("{a}[{k}] {op} {};\n", self.expr(scope, 2)));
                }
                5 if depth > 0 => self.for_loop(scope, depth, out),
                6 if depth > 0 && !scope.mutable_scalars.is_empty() => {
                    let cmp = ["<", ">", "<=", ">="][self.rng.below(4)];
                    out.push_str(&format!(
                        "if {} {cmp} {} {{\n",
                        self.expr(scope, 1),
                        self.expr(scope, 1)
                    ));
                    let mut inner = scope.clone();
                    self.statements(&mut inner, depth - 1, 1, out);
                    out.push_str("} else {\n");
                    let mut inner = scope.clone();
                    self.statements(&mut inner, depth - 1, 1, out);
                    out.push_str("}\n");
                }
                _ => {
                    let v = self.name("v");
                    out.push_str(&format!("let {v} = {};\n", self.expr(scope, 2)));
                    scope.scalars.push(v);
                }
            }
        }
    }

    /// A `let` of a scalar, mutable or not, its type written or not.
    fn binding(&mut self, scope: &mut Scope, out: &mut String) {
        let v = self.name("v");
        let mutable = self.rng.chance(50);
        let e = self.expr(scope, 3);
        let ty = if self.rng.chance(20) { ": f32" } else { "" };
        out.push_str(&format!(
            "let {}{v}{ty} = {e};\n",
            if mutable { "mut " } else { "" }
        ));
        scope.scalars.push(v.clone());
        if mutable {
            scope.mutable_scalars.push(v);
        }
    }

    /// A `for` loop over `0..n` or `0..=n - 1` with one to three statements.
    fn for_loop(&mut self, scope: &Scope, depth: u32, out: &mut String) {
        let i = self.name("i");
        let n = self.trips();
        let range = if self.rng.chance(20) {
            format!("0..={}", n - 1)
        } else {
            format!("0..{n}")
        };
        out.push_str(&format!("for {i} in {range} {{\n"));
        // Names declared inside the loop end with it; the outer scope's mutable values are
        // only assigned.
        let mut inner = scope.clone();
        inner.indices.push((i, n));
        let k = 1 + self.rng.below(3);
        self.statements(&mut inner, depth - 1, k, out);
        out.push_str("}\n");
    }

    /// A function of the supported language.
    fn function(&mut self) -> String {
        let mut scope = Scope::default();
        let mut params = Vec::new();
        let count = 1 + self.rng.below(4);
        let mut has_shared = false;
        for k in 0..count {
            let name = format!("p{k}");
            // The first argument is per-element and differentiable.
            let (attr, shared) = match (k, self.rng.below(5)) {
                (0, _) => ("", false),
                (_, 0) => ("#[constant] ", false),
                (_, 1) => ("#[shared] ", true),
                _ => ("", false),
            };
            has_shared |= shared;
            if self.rng.chance(50) {
                let n = self.array_len(shared);
                params.push(format!("{attr}{name}: [f32; {n}]"));
                scope.arrays.push((name, n));
            } else {
                params.push(format!("{attr}{name}: f32"));
                scope.scalars.push(name);
            }
        }
        let mut body = String::new();
        let n = 1 + self.rng.below(6);
        self.statements(&mut scope, 2, n, &mut body);
        let vector = !has_shared && self.rng.chance(25);
        let (result, tail) = if vector {
            let m = 2 + self.rng.below(2);
            let words: Vec<String> = (0..m).map(|_| self.expr(&scope, 2)).collect();
            (format!("[f32; {m}]"), format!("[{}]", words.join(", ")))
        } else {
            ("f32".to_string(), self.expr(&scope, 3))
        };
        format!(
            "fn f({}) -> {result} {{\n{body}{tail}\n}}",
            params.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_give_their_own_functions_and_the_same_on_every_call() {
        assert_eq!(function(7, Sizes::Small), function(7, Sizes::Small));
        assert_ne!(function(7, Sizes::Small), function(8, Sizes::Small));
    }

    #[test]
    fn wide_functions_hold_wide_arrays_and_long_loops() {
        let all: String = (0..200).map(|s| function(s, Sizes::Wide)).collect();
        assert!(all.contains("; 64]"), "no array of 64 words");
        assert!(all.contains("#[shared] p1: [f32; 320]") || all.contains("; 320]"));
        assert!(all.contains("in 0..64 {"), "no loop of 64 trips");
    }
}
