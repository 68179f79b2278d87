"""JAX on the networks of the GPU bench's network table (benches/networks/mod.rs): the same
I-H-H-1 tanh network and squared-error loss, written as batched matrix products, timed as
jit(value_and_grad) of the batch's summed loss in the shared weights (the gradient gradfuse's
adjoint kernel sums over the batch). Run on the device next to the Rust bench:

    python3 benches/networks/jax_networks.py

GRADFUSE_JAX_NETWORKS="3-64 8-64 8-64-2" times other I-H-H-1 shapes, or I-H-H-O with a
third number (default "8-32 8-64"; O outputs, the loss the sum of their squared errors), and
GRADFUSE_JAX_ACTIVATIONS="tanh relu" each with these hidden activations (default "tanh";
relu as jax.nn.relu, gradfuse's `s.max(0.0)`). GRADFUSE_JAX_LAYERS="8-16-16-1 8-64-64-64-1
8-64-1" times networks given by every layer's width, inputs first and outputs last, any
depth (benches/networks/variants/shape_networks.rs; none by default).

Matrix products run at JAX's default precision (TF32 tensor cores on an H100) and at
"highest" (true f32, what gradfuse computes); both are printed.
"""
import os
import time

import jax
import jax.numpy as jnp


ACTIVATIONS = {"tanh": jnp.tanh, "relu": jax.nn.relu}


def network(i, h, activation="tanh", o=1):
    act = ACTIVATIONS[activation]

    def loss(w, x, t):
        w1, b1, w2, b2, w3, b3 = w
        h1 = act(x @ w1.T + b1)
        h2 = act(h1 @ w2.T + b2)
        # One output as a vector, as this script wrote it before it took several.
        y = (h2 @ w3 if o == 1 else h2 @ w3.T) + b3
        return jnp.sum((y - t) ** 2)

    key = jax.random.PRNGKey(0)
    ks = jax.random.split(key, 6)
    w = (
        0.3 * jax.random.normal(ks[0], (h, i)),
        0.1 * jax.random.normal(ks[1], (h,)),
        0.2 * jax.random.normal(ks[2], (h, h)),
        0.1 * jax.random.normal(ks[3], (h,)),
        0.2 * jax.random.normal(ks[4], (h,) if o == 1 else (o, h)),
        jnp.float32(0.0) if o == 1 else jnp.zeros((o,), jnp.float32),
    )
    return loss, w


def layered(widths, activation="tanh"):
    """A network of `widths` (inputs, hidden layers.., outputs), W of each layer `(out, in)`."""
    act = ACTIVATIONS[activation]

    def loss(w, x, t):
        h = x
        for wk, bk in w[:-1]:
            h = act(h @ wk.T + bk)
        wo, bo = w[-1]
        y = h @ wo.T + bo
        return jnp.sum((y - t) ** 2)

    ks = jax.random.split(jax.random.PRNGKey(0), 2 * len(widths))
    w = tuple(
        (
            (0.3 / (a ** 0.5)) * jax.random.normal(ks[2 * l], (b, a)),
            0.1 * jax.random.normal(ks[2 * l + 1], (b,)),
        )
        for l, (a, b) in enumerate(zip(widths[:-1], widths[1:]))
    )
    return loss, w


def median_ms(f, *args, repeats=30):
    out = f(*args)
    jax.block_until_ready(out)
    for _ in range(3):
        jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t)
    times.sort()
    return 1e3 * times[len(times) // 2]


def main():
    print(f"JAX {jax.__version__} on {jax.devices()[0].device_kind}")
    print("| network | precision | n | value ms | value_and_grad ms |")
    print("|---|---|---|---|---|")
    shapes = os.environ.get("GRADFUSE_JAX_NETWORKS", "8-32 8-64").split()
    activations = os.environ.get("GRADFUSE_JAX_ACTIVATIONS", "tanh").split()
    for activation in activations:
        for shape in shapes:
            i, h, *rest = map(int, shape.split("-"))
            time_network(i, h, activation, rest[0] if rest else 1)
        for layers in os.environ.get("GRADFUSE_JAX_LAYERS", "").split():
            widths = list(map(int, layers.split("-")))
            time_layers(widths, activation)


def time_network(i, h, activation, o):
    name = f"{i}-{h}-{h}-{o}" + ("" if activation == "tanh" else f" {activation}")
    loss, w = network(i, h, activation, o)
    time_loss(name, loss, w, i, (o,) if o > 1 else ())


def time_layers(widths, activation):
    name = "-".join(map(str, widths)) + ("" if activation == "tanh" else f" {activation}")
    loss, w = layered(widths, activation)
    time_loss(name, loss, w, widths[0], (widths[-1],))


def time_loss(name, loss, w, inputs, target_shape):
    """Prints the median times of `loss` and its value_and_grad in `w` at both precisions,
    on elements of `inputs` words and targets of `target_shape` each."""
    for precision in ["default", "highest"]:
        with jax.default_matmul_precision(precision):
            value = jax.jit(loss)
            vg = jax.jit(jax.value_and_grad(loss))
            for log_n in [20, 24]:
                n = 1 << log_n
                kx, kt = jax.random.split(jax.random.PRNGKey(log_n))
                x = jax.random.uniform(kx, (n, inputs), minval=0.5, maxval=2.0)
                t = jax.random.uniform(kt, (n, *target_shape), minval=0.5, maxval=2.0)
                v_ms = median_ms(value, w, x, t)
                g_ms = median_ms(vg, w, x, t)
                print(f"| {name} | {precision} | 2^{log_n} | {v_ms:.3f} | {g_ms:.3f} |")


if __name__ == "__main__":
    main()
