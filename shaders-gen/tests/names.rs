//! A local may take any name the user gives it, even one the generated stores declare:
//! the stores' names are reserved and the local is renamed (a user's `grads_group` once
//! made the wide adjoint's WGSL redefine it).

use gradfuse_shaders_gen::compile_str;

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
