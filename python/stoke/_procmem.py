"""The memory ledger of stoke.DataLoader(worker_type="process").

Adding up each process's RSS counts the shared memory once per process
that maps it (the slots: the ring, the workers' arenas, the stage block)
and, after fork, every page of torch and the dataset the workers still
share with the main process.  The ledger counts instead:
  - the shared segments once, at their size (the main process made or
    received each of them: it knows them all);
  - each process's own memory beside them: from /proc/PID/smaps_rollup,
    its proportional share of anonymous and file pages (Pss_Anon +
    Pss_File), so a page shared copy-on-write by N processes counts 1/N
    in each and once in the sum, and shared memory (Pss_Shmem, the slots)
    not at all.  Where smaps_rollup is missing (kernels before 4.14, or
    before 5.8 without the Pss_ split), RssAnon + RssFile from
    /proc/PID/status: then pages shared after fork count in each process.

Read when asked (stats(), report()) while the workers live, and once as
they stop (the last reading is kept: a loader without persistent_workers
stops its workers at each epoch's end).  Reading smaps_rollup walks the
process's page tables: about a millisecond for a process with torch
loaded, never on the path of a batch."""

import os
import weakref

_PSS_KEYS = ("Pss_Anon:", "Pss_File:")
_STATUS_KEYS = ("RssAnon:", "RssFile:")


def _sum_kb(path, keys):
    """The sum of the named kB fields of a /proc file, or None."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    got = 0
    found = 0
    for line in text.splitlines():
        for k in keys:
            if line.startswith(k):
                got += int(line.split()[1]) * 1024
                found += 1
    return got if found == len(keys) else None


def own_bytes(pid):
    """A process's own memory (see the module's text), or None when it is
    gone."""
    b = _sum_kb(f"/proc/{pid}/smaps_rollup", _PSS_KEYS)
    if b is None:
        b = _sum_kb(f"/proc/{pid}/status", _STATUS_KEYS)
    return b


def tensor_bytes(t):
    return int(t.numel() * t.element_size()) if t is not None else 0


class Ledger:
    """One loader's: the stage block's bytes, and the pool of the moment
    (weakly: the iterator owns it) with the last reading of its workers."""

    def __init__(self, block_bytes):
        self.block_bytes = int(block_bytes)
        self.span_bytes = 0   # trace=True: the workers' span rings
        self._pool = None
        self._last = None     # (shared dict, workers list) as they stopped

    def attach(self, pool):
        self._pool = weakref.ref(pool)
        pool.ledger = self

    def stopping(self, pool):
        """The pool is about to stop its workers: read them a last time."""
        self._last = (pool.shared_segments(), _workers(pool))

    def read(self):
        pool = self._pool() if self._pool is not None else None
        if pool is not None and not pool.closed:
            shared, workers, alive = pool.shared_segments(), _workers(pool), \
                True
        elif self._last is not None:
            (shared, workers), alive = self._last, False
        else:
            shared, workers, alive = {}, [], False
        shared = dict(shared)
        shared["stage_block"] = self.block_bytes
        if self.span_bytes:
            shared["span_rings"] = self.span_bytes
        main = own_bytes(os.getpid()) or 0
        shared_total = sum(shared.values())
        return {
            "shared_bytes": shared_total,
            "shared": shared,
            "main_bytes": main,
            "workers": workers,
            "workers_alive": alive,
            "total_bytes": shared_total + main +
            sum(w["own_bytes"] for w in workers),
        }


def _workers(pool):
    out = []
    for i, p in enumerate(pool.procs):
        if p.pid is None:
            continue
        b = own_bytes(p.pid)
        if b is not None and p.exitcode is None:
            out.append({"id": i, "pid": p.pid, "own_bytes": b})
    return out


def report_lines(m):
    """The ledger in the report's words, under its peak RSS line."""
    mib = 1 << 20
    w = m["workers"]
    each = ", ".join(f"{x['own_bytes'] / mib:.1f}" for x in w) or "none"
    when = "" if m["workers_alive"] else " (as they stopped)"
    return [f"  memory        {m['total_bytes'] / mib:.1f} MiB: shared slots "
            f"{m['shared_bytes'] / mib:.1f} MiB counted once, main process "
            f"{m['main_bytes'] / mib:.1f} MiB, {len(w)} worker processes' "
            f"own{when}: {each} MiB"]
