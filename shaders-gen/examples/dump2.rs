fn main() {
    let src = std::fs::read_to_string(std::env::args().nth(1).unwrap()).unwrap();
    let item: syn::ItemFn = syn::parse_str(&src).unwrap();
    let c = gradfuse_shaders_gen::compile(&item).unwrap();
    std::fs::write("/tmp/rev2.wgsl", &c.wgsl_reverse).unwrap();
    std::fs::write("/tmp/rev2.ir", format!("{}", c.reverse.function())).unwrap();
}
