"""The host link's bandwidth the way CUDA users measure it: a pinned host tensor copied to
and from the GPU with PyTorch, median of 20 after warm-up. Prints shell lines to `eval`:

    eval "$(python3 benches/transfers/link.py)"

which set GRADFUSE_LINK_UP_GBPS and GRADFUSE_LINK_DOWN_GBPS for `benches/transfers.rs`.
Pageable copies are printed too, as comments, for reference."""
import statistics
import sys
import time

import torch


def median_seconds(run, repeats=20):
    """The median time of `repeats` runs of `run` after one, each until the GPU is done."""
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def gbps(copy, nbytes, repeats=20):
    return nbytes / median_seconds(copy, repeats) / 1e9


def main():
    nbytes = 256 << 20
    words = nbytes // 4
    dev = torch.empty(words, dtype=torch.float32, device="cuda")
    rows = {}
    for pinned in (True, False):
        host = torch.ones(words, dtype=torch.float32, pin_memory=pinned)
        up = gbps(lambda: dev.copy_(host, non_blocking=pinned), nbytes)
        down = gbps(lambda: host.copy_(dev, non_blocking=pinned), nbytes)
        rows[pinned] = (up, down)
    (up, down), (pup, pdown) = rows[True], rows[False]
    print(f"# {torch.cuda.get_device_name()}, 256 MiB: pinned {up:.1f} up, {down:.1f} down;"
          f" pageable {pup:.1f} up, {pdown:.1f} down (GB/s)")
    print(f"export GRADFUSE_LINK_UP_GBPS={up:.2f}")
    print(f"export GRADFUSE_LINK_DOWN_GBPS={down:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
