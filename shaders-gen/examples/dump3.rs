fn main() {
    let path = std::env::args().nth(1).unwrap();
    let src = std::fs::read_to_string(path).unwrap();
    let file: syn::File = syn::parse_str(&src).unwrap();
    let items: Vec<syn::ItemFn> = file
        .items
        .into_iter()
        .filter_map(|i| {
            if let syn::Item::Fn(f) = i {
                Some(f)
            } else {
                None
            }
        })
        .collect();
    let c = gradfuse_shaders_gen::compile_with(&items[items.len() - 1], &items[..items.len() - 1])
        .unwrap();
    std::fs::write("/tmp/fwd.wgsl", &c.wgsl_forward).unwrap();
    std::fs::write("/tmp/rev.wgsl", &c.wgsl_reverse).unwrap();
    if let Some(g) = &c.wgsl_gathered {
        std::fs::write("/tmp/gfwd.wgsl", &g.forward).unwrap();
        std::fs::write("/tmp/grev.wgsl", &g.reverse).unwrap();
    }
}
