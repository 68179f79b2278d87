"""What a transfer through pinned *host* staging memory could reach on this machine, with
PyTorch, beside the link itself: the ceiling of an upload path that gradfuse cannot take
through wgpu today (wgpu places every mappable upload buffer in device memory across the
PCIe BAR, where the CPU's writes are the transfer).

Each row moves 256 MiB (or, for the last, 256 up and 320 down, a 2^24 `value_and_grad` of
`transcendental4`) between pageable host memory and the GPU, median of 10 after warm-up:
- the pinned link alone (DMA from or to pinned memory);
- a host copy between pageable and pinned memory, by PyTorch's threads;
- the two pipelined: pieces of 32 MiB in a ring of 3 pinned buffers, one piece copied by
  the CPU while the previous one's DMA runs on a stream of its own;
- upload and readback pipelined at the same time, each on a host thread and a stream.

    python3 benches/transfers/staging_ceiling.py
"""
import threading

import torch

from link import median_seconds

PIECE = (32 << 20) // 4
RING = 3


class Pipe:
    """A ring of pinned pieces and a stream: uploads from or readbacks into pageable
    memory, a piece's host copy beside the previous piece's DMA."""

    def __init__(self):
        self.ring = [torch.empty(PIECE, dtype=torch.float32).pin_memory() for _ in range(RING)]
        self.done = [None] * RING
        self.stream = torch.cuda.Stream()

    def upload(self, host, dev):
        for k, at in enumerate(range(0, host.numel(), PIECE)):
            n = min(PIECE, host.numel() - at)
            slot = k % RING
            if self.done[slot] is not None:
                self.done[slot].synchronize()
            self.ring[slot][:n].copy_(host[at:at + n])
            with torch.cuda.stream(self.stream):
                dev[at:at + n].copy_(self.ring[slot][:n], non_blocking=True)
                ev = torch.cuda.Event()
                ev.record(self.stream)
                self.done[slot] = ev
        self.stream.synchronize()

    def readback(self, dev, host):
        pieces = list(range(0, dev.numel(), PIECE))
        events = []
        # Every piece's DMA is queued RING ahead of its host copy.
        def queue(k):
            at = pieces[k]
            n = min(PIECE, dev.numel() - at)
            with torch.cuda.stream(self.stream):
                self.ring[k % RING][:n].copy_(dev[at:at + n], non_blocking=True)
                ev = torch.cuda.Event()
                ev.record(self.stream)
            return ev
        for k in range(min(RING, len(pieces))):
            events.append(queue(k))
        for k, at in enumerate(pieces):
            n = min(PIECE, dev.numel() - at)
            events[k].synchronize()
            host[at:at + n].copy_(self.ring[k % RING][:n])
            if k + RING < len(pieces):
                events.append(queue(k + RING))


def main():
    torch.set_num_threads(16)
    up_words, down_words = (256 << 20) // 4, (320 << 20) // 4
    host_up = torch.ones(up_words, dtype=torch.float32)
    host_down = torch.empty(down_words, dtype=torch.float32)
    host_down.fill_(0.0)
    dev_up = torch.empty(up_words, dtype=torch.float32, device="cuda")
    dev_down = torch.ones(down_words, dtype=torch.float32, device="cuda")
    pinned = torch.ones(up_words, dtype=torch.float32).pin_memory()
    up_pipe, down_pipe = Pipe(), Pipe()
    mib = lambda words: words * 4 / (1 << 20)
    rows = []

    def row(what, words, run):
        s = median_seconds(run, repeats=10)
        rows.append((what, mib(words), s * 1e3, words * 4 / s / 1e9))

    row("DMA up from pinned memory", up_words, lambda: dev_up.copy_(pinned, non_blocking=True))
    row("DMA down into pinned memory", up_words, lambda: pinned.copy_(dev_up, non_blocking=True))
    row("host copy, pageable -> pinned (16 threads)", up_words, lambda: pinned.copy_(host_up))
    row("host copy, pinned -> pageable (16 threads)", up_words, lambda: host_up.copy_(pinned))
    row("pageable upload, PyTorch's own", up_words, lambda: dev_up.copy_(host_up))
    row("upload through 3 pinned pieces of 32 MiB", up_words, lambda: up_pipe.upload(host_up, dev_up))
    row("readback through 3 pinned pieces of 32 MiB", down_words,
        lambda: down_pipe.readback(dev_down, host_down))

    def both():
        t = threading.Thread(target=down_pipe.readback, args=(dev_down, host_down))
        t.start()
        up_pipe.upload(host_up, dev_up)
        t.join()

    row("upload (256 MiB) and readback (320 MiB) at once", up_words + down_words, both)
    print(f"# {torch.cuda.get_device_name()}: transfers through pinned host staging, "
          "median of 10\n")
    print("| what | MiB | ms | GB/s |\n|---|---|---|---|")
    for what, size, ms, rate in rows:
        print(f"| {what} | {size:.0f} | {ms:.2f} | {rate:.1f} |")


if __name__ == "__main__":
    main()
