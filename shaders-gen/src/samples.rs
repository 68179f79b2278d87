//! Programs of a fixed family and any size, for measuring how the compiler scales (the
//! code-size test and benches): not part of the compiler.

/// An I-H-H-O tanh network with a squared-error loss, as a user writes it: `x` and the
/// targets `t` per element, three `#[shared]` weight
/// blocks (each layer's weights row by row, then its biases).
pub fn network(i: usize, h: usize, o: usize) -> String {
    deep_network(i, &[h, h], o)
}

/// A tanh network of any depth with a squared-error loss: `i` inputs, a hidden layer of
/// each width of `hidden` in turn (`w1 ..`, each layer's weights row by row, then its
/// biases), `o` outputs after them, as a user writes it layer by layer.
pub fn deep_network(i: usize, hidden: &[usize], o: usize) -> String {
    let mut args = format!("#[constant] x: [f32; {i}], #[constant] t: [f32; {o}]");
    let mut body = String::new();
    let (mut cols, mut input) = (i, "x".to_string());
    for (l, &h) in hidden.iter().enumerate() {
        let w = format!("w{}", l + 1);
        let out = format!("h{}", l + 1);
        args.push_str(&format!(", #[shared] {w}: [f32; {}]", h * cols + h));
        body.push_str(&format!(
            "let mut {out} = [0.0; {h}];
            for j in 0..{h} {{
                let mut s = {w}[{cols} * {h} + j];
                for k in 0..{cols} {{
                    s += {w}[j * {cols} + k] * {input}[k];
                }}
                {out}[j] = s.tanh();
            }}
            "
        ));
        (cols, input) = (h, out);
    }
    let w = format!("w{}", hidden.len() + 1);
    args.push_str(&format!(", #[shared] {w}: [f32; {}]", o * cols + o));
    format!(
        "fn net({args}) -> f32 {{
            {body}let mut loss = 0.0;
            for j in 0..{o} {{
                let mut y = {w}[{cols} * {o} + j];
                for k in 0..{cols} {{
                    y += {w}[j * {cols} + k] * {input}[k];
                }}
                loss += (y - t[j]) * (y - t[j]);
            }}
            loss
        }}"
    )
}

/// An I-H-H-1 network with one output row, as the README's example and the benches' networks
/// write it: `x` per element, `t` after it, three `#[shared]` weight blocks (each layer's
/// weights, then its biases), `y = w3 . h2 + b3`, then a loss of `y` and `t`. The fields say
/// what varies; [`DenseNetwork::new`] is a tanh network with a squared error.
#[derive(Clone, Debug)]
pub struct DenseNetwork {
    /// Inputs `I`.
    pub inputs: usize,
    /// Rows of both hidden layers, `H`.
    pub hidden: usize,
    /// The hidden layers' activation, an expression of the row's sum `s` (`s.tanh()`,
    /// `s.max(0.0)`).
    pub activation: &'static str,
    /// The second layer's weight index in `w2`, of `j` (row) and `k` (column); `None`:
    /// row by row, `j * H + k`.
    pub second_weight: Option<String>,
    /// Attributes of `t` (`#[constant]`).
    pub target_attr: &'static str,
    /// The loss, an expression (or a block's statements and tail) of `y` and `t`.
    pub loss: String,
}

impl DenseNetwork {
    /// An `inputs`-`hidden`-`hidden`-1 tanh network with the loss `(y - t)^2`.
    pub fn new(inputs: usize, hidden: usize) -> Self {
        DenseNetwork {
            inputs,
            hidden,
            activation: "s.tanh()",
            second_weight: None,
            target_attr: "#[constant]",
            loss: "(y - t) * (y - t)".into(),
        }
    }

    /// The function `net`'s source.
    pub fn source(&self) -> String {
        let (i, h, act) = (self.inputs, self.hidden, self.activation);
        let w2 = (self.second_weight.clone()).unwrap_or_else(|| format!("j * {h} + k"));
        format!(
            "fn net(#[constant] x: [f32; {i}], {} t: f32, #[shared] w1: [f32; {}], \
                    #[shared] w2: [f32; {}], #[shared] w3: [f32; {}]) -> f32 {{
                let mut h1 = [0.0; {h}];
                for j in 0..{h} {{
                    let mut s = w1[{i} * {h} + j];
                    for k in 0..{i} {{
                        s += w1[j * {i} + k] * x[k];
                    }}
                    h1[j] = {act};
                }}
                let mut h2 = [0.0; {h}];
                for j in 0..{h} {{
                    let mut s = w2[{h} * {h} + j];
                    for k in 0..{h} {{
                        s += w2[{w2}] * h1[k];
                    }}
                    h2[j] = {act};
                }}
                let mut y = w3[{h}];
                for k in 0..{h} {{
                    y += w3[k] * h2[k];
                }}
                {}
            }}",
            self.target_attr,
            i * h + h,
            h * h + h,
            h + 1,
            self.loss
        )
    }
}

/// A chain of `masses` masses on springs stepped `steps` times (semi-implicit Euler), its
/// final positions scored: a loop carrying two arrays it rewrites at every step, whose
/// stiffness `0.5 + k` is a `#[shared]` word when `shared`.
pub fn spring_chain(masses: usize, steps: usize, shared: bool) -> String {
    let attr = if shared { "#[shared] " } else { "" };
    format!(
        "fn chain(p0: [f32; {masses}], {attr}k: f32) -> f32 {{
            let mut p = p0;
            let mut q = [0.0; {masses}];
            for _t in 0..{steps} {{
                let mut f = [0.0; {masses}];
                for i in 1..{inner} {{
                    f[i] = (0.5 + k) * (p[i + 1] - 2.0 * p[i] + p[i - 1]) - 0.1 * q[i];
                }}
                for i in 0..{masses} {{
                    q[i] += 0.1 * f[i];
                    p[i] += 0.1 * q[i];
                }}
            }}
            let mut e = 0.0;
            for i in 0..{masses} {{
                e += p[i] * p[i];
            }}
            e
        }}",
        inner = masses - 1
    )
}

/// A `#[shared]` table of `trips` words read in a loop of as many trips that carries two
/// words, `s` and `p`, both of which its reverse pass needs: a tape of `2 trips` words.
pub fn table_loop(trips: usize) -> String {
    format!(
        "fn table(x: f32, y: f32, #[shared] table: [f32; {trips}]) -> f32 {{
            let mut s = 0.0;
            let mut p = x;
            for i in 0..{trips} {{
                s += table[i] * p;
                p = p * y + 0.01 * (i as f32);
            }}
            s.tanh()
        }}"
    )
}
