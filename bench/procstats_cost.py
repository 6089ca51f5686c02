"""What process mode's doctor adds to each unit a worker process makes
(python/stoke/_procs.py, _worker_main): the wall clock around the claim and
the __getitem__, the thread's CPU clock once a unit, and the record into
the stage block (record_unit, _stoke.stage_record), without the dataset.

    PYTHONPATH=build/python /usr/bin/python3 bench/procstats_cost.py

Prints the best of 5 runs of 100,000 one-sample units, and each clock's own
cost (on a VM the thread's CPU clock is a system call)."""

import time

import torch

from stoke import _stoke
from stoke._procs import record_unit

N = 100000


def main():
    block = torch.zeros((_stoke.stage_block_bytes(2),),
                        dtype=torch.uint8).share_memory_()
    view = block.numpy()
    _stoke.stage_block_init(view, 2)
    clock, cpu_clock, record = (time.perf_counter_ns, time.thread_time_ns,
                                _stoke.stage_record)
    state = {"cpu_was": cpu_clock()}

    def unit():   # the lines _worker_main adds to a one-sample unit
        t = clock()
        times = []
        t0 = t
        t1 = clock()
        t = clock()
        times.append((t1 - t0, t - t1))
        co = clock() - t
        cpu = cpu_clock()
        record_unit(record, view, 0, times, co, cpu - state["cpu_was"])
        state["cpu_was"] = cpu

    def best(f, n):
        out = None
        for _ in range(5):
            a = time.perf_counter_ns()
            for _ in range(n):
                f()
            d = (time.perf_counter_ns() - a) / n
            out = d if out is None else min(out, d)
        return out

    print(f"timing + record per one-sample unit: {best(unit, N):.0f} ns "
          f"(best of 5 x {N})")
    for name in ("perf_counter_ns", "thread_time_ns"):
        print(f"  time.{name}: {best(getattr(time, name), N):.0f} ns")


if __name__ == "__main__":
    main()
