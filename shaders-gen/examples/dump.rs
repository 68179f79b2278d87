fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().unwrap())
        .collect();
    let src = gradfuse_shaders_gen::samples::network(a[0], a[1], a[2]);
    let item: syn::ItemFn = syn::parse_str(&src).unwrap();
    let c = gradfuse_shaders_gen::compile(&item).unwrap();
    std::fs::write("/tmp/fwd.wgsl", &c.wgsl_forward).unwrap();
    std::fs::write("/tmp/rev.wgsl", &c.wgsl_reverse).unwrap();
    std::fs::write("/tmp/rev.ir", format!("{}", c.reverse.function())).unwrap();
}
