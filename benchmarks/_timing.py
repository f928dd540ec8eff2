"""Host-side timing helpers shared by the benchmarks: warm up, repeat, take medians."""
import statistics
import time

import torch


def per_call_us(fn, *, calls=2000, repeats=25, warmup=500):
    """Median host time of one call in microseconds, over `repeats` loops of `calls` calls.

    The device is synchronized before and after each loop, so queued work never throttles the
    host loop; launches are tiny, so the host cost is what is measured."""
    return per_call_us_interleaved([fn], calls=calls, repeats=repeats, warmup=warmup)[0]


def _loop_us(fn, calls):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def per_call_us_interleaved(fns, *, calls=2000, repeats=25, warmup=500):
    """Like per_call_us for several functions, which take turns loop by loop: drift of the
    machine's clocks within the run then hits every row alike. Returns the medians in order."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    samples = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            samples[i].append(_loop_us(fn, calls))
    return [statistics.median(s) for s in samples]
