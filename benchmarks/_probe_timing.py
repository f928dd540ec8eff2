"""Timing of one kernel call over rotating input sets, for the kernel-shape probes
(row_kernel_probe.py, run_kernel_probe.py)."""
import statistics

import torch


def time_ms(fn, sets, repeats=51):
    """Median milliseconds of one call over rotating input sets: a pass over all sets is
    captured in a CUDA graph and its replays timed with CUDA events, so the host's cost of a
    call (a compiled function's wrapper, Python) is out of the figure."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture (compiles, loads, allocates)
        for s in sets:
            fn(*s)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for s in sets:
            fn(*s)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) / len(sets))
    return statistics.median(samples)
