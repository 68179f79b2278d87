fn main() {
    for src in [
        "fn f(y: f32) -> f32 { let g = |x: f32| x * 2.0; g(y) }",
        "fn f(y: f32) -> f32 { Some(y)? }",
        "fn f(y: f32) -> f32 { Some(y).unwrap() }",
        "fn f(y: f32) -> f32 { helper(y) }",
    ] {
        let item: proc_macro2::TokenStream = src.parse().unwrap();
        let out = gradfuse_shaders_gen::expand(proc_macro2::TokenStream::new(), item);
        let s = out.to_string();
        let errs: Vec<&str> = s
            .match_indices("compile_error")
            .map(|(i, _)| &s[i..(i + 160).min(s.len())])
            .collect();
        println!(
            "{src}\n  errors: {errs:?}\n  continuation: {}",
            s.contains("__differentiable_with")
        );
    }
}
