//! Property: every unsupported construct of a function is reported in one compilation, each
//! once, at the line and column of the offending token, with a message that says what to
//! write instead. Checked on `compile_str` (no proc macro, no rustc), in the style of
//! naga's `check(source, expected)`; tests/ui keeps the end-to-end trybuild cases.

use gradfuse_shaders_gen::compile_str;

/// Compiles `src` and compares its diagnostics, one `line:column: message` per line in the
/// order reported, with `expected` (lines counted from the source's first line).
#[track_caller]
fn check(src: &str, expected: &str) {
    let errors = match compile_str(src) {
        Ok(_) => panic!("expected errors, but it compiles:\n{src}"),
        Err(errors) => errors,
    };
    let got: Vec<String> = errors
        .iter()
        .flat_map(|e| e.clone().into_iter())
        .map(|e| {
            let start = e.span().start();
            format!("{}:{}: {}", start.line, start.column + 1, e)
        })
        .collect();
    let expected: Vec<&str> = expected
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(got, expected, "diagnostics of\n{src}");
}

#[test]
fn several_errors_in_one_build() {
    check(
        "fn f(x: f32, p: [f32; 2]) -> f32 {
    let a = x as f64;
    let b = p[2];
    let c = x % 2.0;
    let d = x.powi(p[0]);
    x
}",
        "
        2:18: `f64` in a function over `f32`: a differentiable function is written in one precision, its signature's (write `f32` here)
        2:15: only an integer (a loop index) converts, and only to `f32` (`i as f32`): this value is already an `f32`, and array indices are integers computed from loop indices
        3:15: index 2 is out of range for an array of length 2
        4:15: `%` is not supported; use `x - (x / m).floor() * m`
        5:20: the exponent of `powi` must be an integer literal; use `powf` for a computed exponent
        ",
    );
}

#[test]
fn loops() {
    check(
        "fn f(p: [f32; 3], n: f32) -> f32 {
    let mut s = 0.0;
    for i in 0..p.len() {
        s += p[i];
    }
    for i in (0..3).rev() {
        s += p[i];
    }
    for i in 0..4 {
        s += p[i];
    }
    for i in 0..3 {
        if p[i] > 1.0 {
            break;
        }
        s += p[i + 1];
    }
    'outer: for _ in 0..3 {
        continue;
    }
    let mut k = 0;
    for i in 0..3 {
        k += i;
    }
    s
}",
        "
        3:19: unsupported method `len`; the supported f32 methods are: sin cos tan asin acos atan atan2 sinh cosh tanh exp exp2 ln log2 log10 sqrt recip powi powf abs signum min max clamp floor ceil round mul_add hypot
        6:14: loops run over a range with constant ends (`for i in 0..8` or `0..=7`); iterators, `.rev()` and `.step_by()` are not supported
        10:16: this index takes the values 0..=3, out of range for an array of length 3: gradfuse proves indices in range at compile time
        14:13: `break` is not supported: loops run their full range (`for i in A..B`)
        16:16: this index takes the values 1..=3, out of range for an array of length 3: gradfuse proves indices in range at compile time
        18:5: loop labels are not supported
        19:9: `continue` is not supported: wrap the rest of the body in an `if`
        22:5: `k` is an integer changed in the loop: integers other than loop indices are not supported
        ",
    );
}

#[test]
fn statements_and_branches() {
    check(
        "fn f(x: f32, p: [f32; 2]) -> f32 {
    let mut y = x;
    y %= 2.0;
    let big = true;
    if big {
        y = p;
    }
    let z = if x > 0.0 { y };
    let w = if x { y } else { 1.0 };
    let q = x;
    q = 2.0 * x;
    p[0] = 1.0;
    let above = x > 1.0;
    if above {
        return x;
    }
    y + z + w + helper(x)
}",
        "
        3:7: only `+= -= *= /=` are supported among compound assignments
        4:15: `true`/`false` literals are not supported: write the condition itself (`x > 0.0`)
        6:13: type mismatch: `y` is `f32` but the value is `[f32; 2]`
        8:24: an `if` without `else` has no value: add an `else` branch, or end this branch with a statement (`;`)
        9:16: expected a condition (`bool`), found `f32`: compare it (`x > 0.0`)
        11:5: cannot assign to `q`: it is not mutable (declare it `let mut q`)
        12:5: cannot assign to `p`: it is not mutable (declare the argument `mut p` in the signature)
        15:9: `return` is not supported: end the body with the result expression
        17:17: only `#[differentiable]` functions (and `f32::` methods) can be called here
        ",
    );
}

#[test]
fn signatures() {
    check(
        "const fn f<T>(#[shared(all)] w: f32, #[constant(x)] c: f32, r: &f32, #[shared] #[constant] s: f32, v: f64, a: [f32; 0]) -> [f32; 2] {
    [w, c]
}",
        "
        1:1: a differentiable function cannot be `const`
        1:11: a differentiable function cannot be generic: write it for f32; `f::eval` is the generic version gradfuse generates
        1:15: `#[shared]` takes no arguments
        1:38: `#[constant]` takes no arguments
        1:64: references are not supported: take the argument by value (`x: f32` or `p: [f32; N]`)
        1:70: an argument cannot be both `#[shared]` and `#[constant]` yet: a shared argument has a gradient (summed over the batch)
        1:117: arrays must have at least one element
        1:30: `#[shared]` arguments need an `f32` result (their gradient is that of the sum over the batch); with an array result, pass them per element
        1:103: `f64` in a function over `f32`: a differentiable function is written in one precision, its signature's (write `f32` here)
        ",
    );
}

#[test]
fn a_parameter_bound_twice() {
    // Once generated WGSL that redefined the argument's buffers (`x_rows`).
    check(
        "fn f(x: f32, y: [f32; 2], x: f32) -> f32 {
    x * y[0]
}",
        "
        1:27: `x` is bound twice in the parameter list
        ",
    );
}

#[test]
fn arrays_past_the_bound() {
    // Found by tests/fuzz_tokens.rs: the first took the build's memory.
    check(
        "fn f(x: f32, #[shared] w: [f32; 2000000]) -> f32 {
    let h = [0.0; 4294967295];
    x + h[0]
}",
        "
        1:33: an array holds at most 1048576 words (2^20, 4 MiB); split the data over several arguments
        2:19: an array holds at most 1048576 words (2^20, 4 MiB); split the data over several arguments",
    );
}

#[test]
fn functions_past_the_size_bound() {
    // 8,000 statements straight: past MAX_OPERATIONS once lowered, a spanned error at the
    // name instead of minutes of rustc (10,000 took 90 s to expand before names were made in
    // linear time, and 16 MB of tokens after). 500 statements (2,000 operations) compile.
    let body: String = (0..8000)
        .map(|k| format!("s = s * 0.999 + ({k}.0 * x).sin();\n"))
        .collect();
    let src = format!("fn long(x: f32) -> f32 {{ let mut s = x; {body} s }}");
    let errors = match gradfuse_shaders_gen::compile_str(&src) {
        Ok(_) => panic!("an 8,000-statement function compiled"),
        Err(e) => e,
    };
    assert_eq!(errors.len(), 1);
    let message = errors[0].to_string();
    assert!(message.contains("past the limit of 6000"), "{message}");
    assert_eq!(errors[0].span().start().line, 1);
    assert_eq!(errors[0].span().start().column, 3);
    // Under the bound, the same kind of function compiles.
    let body: String = (0..500)
        .map(|k| format!("s = s * 0.999 + ({k}.0 * x).sin();\n"))
        .collect();
    let src = format!("fn short(x: f32) -> f32 {{ let mut s = x; {body} s }}");
    assert!(gradfuse_shaders_gen::compile_str(&src).is_ok());
}

/// A `let` of a type the language lacks is a variable's error, not an argument's (it said
/// "unsupported argument type `i32`: arguments are ..."; found by `fuzz_grammar.rs`).
#[test]
fn variables_of_other_types() {
    check(
        "fn f(x: f32) -> f32 {
    let k: i32 = 3;
    let r: &f32 = &x;
    x
}",
        "2:12: unsupported variable type `i32`: variables are `f32`, `[f32; N]` or `bool`; an integer is a `const N: usize = ...;` or a loop index
         3:12: references are not supported: take the variable by value (`x: f32` or `p: [f32; N]`)
         3:19: references are not supported: the language works with values",
    );
}

/// An argument whose declaration is an error is reported once: its reads in the body are
/// not "cannot find" errors on top (they were, one per read).
#[test]
fn a_bad_argument_is_one_error() {
    check(
        "fn f(x: f32, #[shared] w: [f32; 2000000], v: f64) -> f32 {
    x * w[0] + w[1] * v
}",
        "1:33: an array holds at most 1048576 words (2^20, 4 MiB); split the data over several arguments
         1:46: `f64` in a function over `f32`: a differentiable function is written in one precision, its signature's (write `f32` here)",
    );
}

#[test]
fn sin_cos_outside_a_tuple_let_says_how_to_bind_it() {
    // `sin_cos` is in the language, but only where `let (s, c) = ..` binds its pair; it
    // was "unsupported method `sin_cos`" beside a list of methods without it.
    check(
        "fn f(x: f32) -> f32 {
    let p = x.sin_cos();
    let q = f32::sin_cos(x);
    let (s, c) = x.sin_cos();
    s * c + x.bar()
}",
        "
        2:15: `sin_cos` gives a pair, bound only by `let (s, c) = x.sin_cos();` (or call `sin` and `cos`)
        3:18: `sin_cos` gives a pair, bound only by `let (s, c) = x.sin_cos();` (or call `sin` and `cos`)
        5:15: unsupported method `bar`; the supported f32 methods are: sin cos tan asin acos atan atan2 sinh cosh tanh exp exp2 ln log2 log10 sqrt recip powi powf abs signum min max clamp floor ceil round mul_add hypot
        ",
    );
}

#[test]
fn a_tuple_pattern_is_one_error() {
    // A pattern it cannot bind is one error: the names it meant to bind are not "not
    // found" at every read, and a tuple of values beside it is not a second error; a real
    // error inside the values still is. A tuple of names over a tuple written out binds.
    check(
        "fn f(x: f32, p: [f32; 2]) -> f32 {
    let (c, s) = (x.cos(), x.sin());
    let [a, b] = p;
    let (u, v) = (x.cos(), x.foo());
    let (g, h) = (x, x, x);
    let (k, (l, m)) = (x, (x, x));
    let (q, r, z) = x.sin_cos();
    c * s + a * b + u * v + g * h + k * l * m + q * r * z
}",
        "
        3:9: only `let name = ...;` and `let (a, b) = (x, y);` bindings are supported (no struct patterns, no tuple but one written out or `x.sin_cos()`): write one `let` per name
        4:30: unsupported method `foo`; the supported f32 methods are: sin cos tan asin acos atan atan2 sinh cosh tanh exp exp2 ln log2 log10 sqrt recip powi powf abs signum min max clamp floor ceil round mul_add hypot
        5:18: the pattern binds 2 names but the tuple holds 3 values
        6:9: only `let name = ...;` and `let (a, b) = (x, y);` bindings are supported (no struct patterns, no tuple but one written out or `x.sin_cos()`): write one `let` per name
        7:21: the pattern binds 3 names but the tuple holds 2 values
        ",
    );
}
