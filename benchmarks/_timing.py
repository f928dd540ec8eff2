"""Host-side timing helpers shared by the benchmarks: warm up, repeat, take medians."""
import statistics
import time

import torch


def per_call_us(fn, *, calls=2000, repeats=25, warmup=500):
    """Median host time of one call in microseconds, over `repeats` loops of `calls` calls.

    The device is synchronized before and after each loop, so queued work never throttles the
    host loop; launches are tiny, so the host cost is what is measured."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        samples.append((t1 - t0) / calls * 1e6)
    return statistics.median(samples)
