//! What the WGSL tests share: every kernel of a source, and naga's verdict on one.

use gradfuse_shaders_gen::compile_str;

/// The generated WGSL of one source, each kernel with its name.
pub fn kernels(src: &str) -> Vec<(&'static str, String)> {
    let c = compile_str(src).unwrap_or_else(|e| panic!("{src}: {}", e[0]));
    let mut out = vec![
        ("forward", c.wgsl_forward),
        ("tangent", c.wgsl_tangent),
        ("reverse", c.wgsl_reverse),
    ];
    if let Some(g) = c.wgsl_gathered {
        out.extend([
            ("gathered forward", g.forward),
            ("gathered reverse", g.reverse),
        ]);
    }
    if let Some(r) = c.wgsl_reduce {
        out.push(("reduce", r));
    }
    if let Some(h) = c.second.and_then(|s| s.hessian) {
        out.push(("hessian", h.wgsl));
    }
    out
}

/// naga's message, with the source lines it points at, where `wgsl` is not valid.
pub fn invalid(wgsl: &str) -> Option<String> {
    let module = match naga::front::wgsl::parse_str(wgsl) {
        Ok(m) => m,
        Err(e) => return Some(e.emit_to_string(wgsl)),
    };
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    .err()
    .map(|e| e.emit_to_string(wgsl))
}
