//! Programs of a fixed family and any size, for measuring how the compiler scales (the
//! code-size test and benches): not part of the compiler.

/// An I-H-H-O tanh network with a squared-error loss, as a user writes it: `x` and the
/// targets `t` per element, three `#[shared]` weight
/// blocks (each layer's weights row by row, then its biases).
pub fn network(i: usize, h: usize, o: usize) -> String {
    let (w1, w2, w3) = (i * h + h, h * h + h, h * o + o);
    format!(
        "fn net(#[constant] x: [f32; {i}], #[constant] t: [f32; {o}], #[shared] w1: [f32; {w1}], \
                #[shared] w2: [f32; {w2}], #[shared] w3: [f32; {w3}]) -> f32 {{
            let mut h1 = [0.0; {h}];
            for j in 0..{h} {{
                let mut s = w1[{i} * {h} + j];
                for k in 0..{i} {{
                    s += w1[j * {i} + k] * x[k];
                }}
                h1[j] = s.tanh();
            }}
            let mut h2 = [0.0; {h}];
            for j in 0..{h} {{
                let mut s = w2[{h} * {h} + j];
                for k in 0..{h} {{
                    s += w2[j * {h} + k] * h1[k];
                }}
                h2[j] = s.tanh();
            }}
            let mut loss = 0.0;
            for j in 0..{o} {{
                let mut y = w3[{h} * {o} + j];
                for k in 0..{h} {{
                    y += w3[j * {h} + k] * h2[k];
                }}
                loss += (y - t[j]) * (y - t[j]);
            }}
            loss
        }}"
    )
}
