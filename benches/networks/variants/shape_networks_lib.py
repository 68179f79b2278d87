# The network sources the variant scripts write (shape_networks.py, wide_networks.py).
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
