"""JAX on the functions of the Hessian bench (benches/hessian.rs, functions in
benches/common/mod.rs): jit(vmap(hessian(f))) over a batch, and jit(vmap(f, grad f,
hessian f)) (the three results gradfuse's Hessian kernel writes), at the bench's batch
sizes, inputs uniform in (0.5, 2) like the bench's. Run on the device next to the Rust bench:

    python3 benches/hessian/jax_hessian.py
    python3 benches/hessian/jax_hessian.py --f64   # the f64 table's functions, in float64
"""
import sys
import time

import jax
import jax.numpy as jnp


def transcendental4(x):
    return jnp.sin(x[0]) * jnp.exp(x[1]) + jnp.log(x[2]) * jnp.sqrt(x[3])


def rosenbrock4(x):
    a0 = x[1] - x[0] * x[0]
    a1 = x[2] - x[1] * x[1]
    a2 = x[3] - x[2] * x[2]
    b0, b1, b2 = 1.0 - x[0], 1.0 - x[1], 1.0 - x[2]
    return 100.0 * (a0 * a0 + a1 * a1 + a2 * a2) + b0 * b0 + b1 * b1 + b2 * b2


def edge_residual(x):
    p, q, rest = x[0:3], x[3:6], x[6]
    d = q - p
    return jnp.sqrt(jnp.sum(d * d)) - rest


def reprojection(x):
    cam, point, obs = x[0:9], x[9:12], x[12:14]
    theta = jnp.sqrt(cam[0] ** 2 + cam[1] ** 2 + cam[2] ** 2 + 1e-12)
    k = cam[0:3] / theta
    c, s = jnp.cos(theta), jnp.sin(theta)
    dot = jnp.dot(k, point) * (1.0 - c)
    p = point * c + jnp.cross(k, point) * s + k * dot + cam[3:6]
    u, v = -p[0] / p[2], -p[1] / p[2]
    r2 = u * u + v * v
    d = cam[6] * (1.0 + cam[7] * r2 + cam[8] * r2 * r2)
    ex, ey = d * u - obs[0], d * v - obs[1]
    return 0.5 * (ex * ex + ey * ey)


def chain24(x):
    a, b = x[:-1], x[1:]
    return jnp.sum(jnp.sin(a * b) * jnp.exp(0.5 * a) + (a - b) * (a - b))


CASES = [
    ("transcendental4", transcendental4, 4, 24),
    ("rosenbrock4", rosenbrock4, 4, 24),
    ("edge_residual", edge_residual, 7, 24),
    ("reprojection", reprojection, 14, 24),
    ("chain24", chain24, 24, 20),
]


def median_ms(f, *args, repeats=20):
    jax.block_until_ready(f(*args))
    for _ in range(3):
        jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t)
    times.sort()
    return 1e3 * times[len(times) // 2]


F64_CASES = [
    ("transcendental4", transcendental4, 4, 23),
    ("rosenbrock4", rosenbrock4, 4, 23),
    ("edge_residual", edge_residual, 7, 22),
]


def main():
    f64 = "--f64" in sys.argv
    if f64:
        jax.config.update("jax_enable_x64", True)
    dtype = jnp.float64 if f64 else jnp.float32
    cases = F64_CASES if f64 else CASES
    print(f"JAX {jax.__version__} on {jax.devices()[0].device_kind}, {jnp.dtype(dtype).name}")
    print("| function | N | n | jit(vmap(hessian)) ms | value, grad and hessian ms |")
    print("|---|---|---|---|---|")
    for name, f, words, max_log_n in cases:
        hess = jax.jit(jax.vmap(jax.hessian(f)))
        all3 = jax.jit(jax.vmap(lambda x: (f(x), jax.grad(f)(x), jax.hessian(f)(x))))
        for log_n in sorted({20, min(24, max_log_n)}):
            n = 1 << log_n
            x = jax.random.uniform(jax.random.PRNGKey(log_n), (n, words), dtype=dtype, minval=0.5, maxval=2.0)
            try:
                h_ms = median_ms(hess, x)
                a_ms = median_ms(all3, x)
                print(f"| {name} | {words} | 2^{log_n} | {h_ms:.3f} | {a_ms:.3f} |")
            except Exception as e:  # out of memory at the largest sizes
                print(f"| {name} | {words} | 2^{log_n} | failed: {type(e).__name__} | |")


if __name__ == "__main__":
    main()
