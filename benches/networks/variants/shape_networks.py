# writes benches/networks/variants/shape_networks.rs
import sys
def net(name, layers, act="tanh"):
    i, hs, o = layers[0], layers[1:-1], layers[-1]
    args = [f"#[constant] x: [f32; {i}]", f"#[constant] t: [f32; {o}]" if o > 1 else "#[constant] t: f32"]
    prev, src, body = i, "x", []
    for l, h in enumerate(hs, 1):
        args.append(f"#[shared] w{l}: [f32; {h*prev + h}]")
        body.append(f"""    let mut h{l} = [0.0; {h}];
    for j in 0..{h} {{
        let mut s = w{l}[{prev} * {h} + j];
        for k in 0..{prev} {{
            s += w{l}[j * {prev} + k] * {src}[k];
        }}
        h{l}[j] = s.{act}();
    }}""")
        prev, src = h, f"h{l}"
    L = len(hs) + 1
    args.append(f"#[shared] w{L}: [f32; {o*prev + o}]")
    if o == 1:
        body.append(f"""    let mut y = w{L}[{prev}];
    for k in 0..{prev} {{
        y += w{L}[k] * {src}[k];
    }}
    (y - t) * (y - t)""")
    else:
        body.append(f"""    let mut loss = 0.0;
    for j in 0..{o} {{
        let mut y = w{L}[{prev} * {o} + j];
        for k in 0..{prev} {{
            y += w{L}[j * {prev} + k] * {src}[k];
        }}
        loss += (y - t[j]) * (y - t[j]);
    }}
    loss""")
    return f"fn {name}({', '.join(args)}) -> f32 {{\n" + "\n".join(body) + "\n}\n"
nets = [("net16", [8,16,16,1]), ("net24", [8,24,24,1]), ("net40", [8,40,40,1]), ("net48", [8,48,48,1]), ("net128", [8,128,128,1]),
        ("four_out_128", [16,128,128,4]), ("deep32", [8,32,32,32,1]), ("deep64", [8,64,64,64,1]),
        ("shallow64", [8,64,1]), ("shallow128", [8,128,1]),
        ("funnel_64_32", [8,64,32,1]), ("funnel_32_64", [8,32,64,1]), ("funnel_64_16", [8,64,16,1]),
        ("funnel_16_64", [8,16,64,1]), ("funnel_48_24", [8,48,24,1]), ("funnel_64_48", [8,64,48,1]),
        ("deep32x4", [8,32,32,32,32,1]), ("deep24", [8,24,24,24,1]), ("deep_coord32", [3,32,32,32,1])]
print("// Tanh networks of shapes other than the bench's I-32-32-O and I-64-64-O (other widths, one,\n// three and four hidden layers), written as users write them, for the corpus bench:\n// GRADFUSE_CORPUS_EXTRA=benches/networks/variants/shape_networks.rs (BENCHMARKS.md,\n// \"Networks of other shapes\"). Written by benches/networks/variants/shape_networks.py.")
for n, l in nets:
    print(net(n, l))
