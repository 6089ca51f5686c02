"""stoke.DataLoader(worker_type="process"): a map-style Python dataset on
worker processes that share out samples, not whole batches.

The main process iterates the (batch) sampler a few batches ahead, as in
thread mode, and publishes each unit of work (one sample; one whole batch
when the batch is collated in the worker: a custom collate_fn, or no
auto-collation) into a ring in shared memory, a batch's samples at
once, with one semaphore token per unit.  A worker takes the tokens there
are, up to its chunk (about _CHUNK_NS of its own recent units, within a
fair share), then claims that many consecutive units with one atomic fetch-and-add on a
shared counter: every unit is made exactly once, in the order it was
published, whichever worker is free first.  A chunk's results come back
in one message on one queue (torch's reductions move tensors through
shared memory, not the pipe); the main process assembles each batch from
its samples in order and collates it with torch's default_collate.

Shared memory: torch's shared tensors (file-descriptor strategy: the
segment is unlinked as soon as it is made, so /dev/shm never holds it and
it goes with the last process that maps it, a killed one included).

torch's worker semantics: get_worker_info() (torch's own global, set in
each worker), random/torch/NumPy seeded per worker as torch seeds them,
worker_init_fn, persistent_workers, timeout, pin_memory (main side), an
exception coming back with the worker's traceback in torch's
ExceptionWrapper (the original type where it can be rebuilt), and after a
failing batch the next one.  With seed_per_sample (the default) each
sample's draws from torch, random and NumPy are reseeded from (base seed,
epoch, key) before its __getitem__: the same for any number of workers and
any timing.  A worker that dies is a RuntimeError naming its pid, the
signal or exit code and the sample it held.

The doctor (stats(), diagnose(), report(), save_json(), save_trace(), the
live view): each worker records its samples' stages in a stage block in
shared memory, the iterator drives the consumer's clock in the main
process (python/stoke/_procstats.py)."""

import atexit
import os
import pickle
import multiprocessing as _mp
import queue as _queue
import signal
import time
import weakref

from . import _proctrace, _slots, _stoke

# ctl: the shared int64 counters.
_CLAIM = 0      # the next unit to claim (global number in the epoch's ring)
_STOP = 1       # 1: workers leave
_GATE = 2       # workers with an id at or above it leave (num_workers="auto")
_HELD = 3       # + worker id: the key the worker is making, or -1
# then, per worker (W = loader.num_workers), its totals so far: busy
# (wall) ns at _HELD + W + id, samples at _HELD + 2W + id, CPU ns at
# _HELD + 3W + id (single writer each: num_workers="auto" reads them), and
# at _HELD + 4W + id the results of worker id that the main process has
# taken in (its single writer; a worker leaving at the gate waits for it);
# last, at _HELD + 5W, the units published so far (the main process's):
# a claim takes at most its fair share of those not yet claimed.
_RETIRED = -2   # held: the worker left at the gate, as asked
# ring rows (one per unit, int64): its keys and where it goes
_N, _BATCH, _POS, _EP, _BASE, _KEYS = range(6)
_KEY_BYTES = 4096  # a unit's keys, pickled, when they are not all ints
_POLL_S = 0.1   # how often a waiting main process checks its workers
_NO_KEY = -1


def _mix(*words):
    """A 63-bit seed from integers (splitmix64 over each): the per-sample
    seed of (base seed, epoch, key)."""
    mask = (1 << 64) - 1
    h = 0x9E3779B97F4A7C15
    for w in words:
        h = (h ^ (int(w) & mask)) & mask
        h = (h + 0x9E3779B97F4A7C15) & mask
        z = h
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        h = z ^ (z >> 31)
    return h & ((1 << 63) - 1)


def _reseed(seed):
    """Seed torch, random and NumPy (when imported) from one integer."""
    import random
    import sys
    import torch
    random.seed(seed)
    # The CPU generator's own seeding: torch.manual_seed also looks for
    # CUDA and costs about 40 times more; a worker process has no CUDA.
    torch.default_generator.manual_seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % (1 << 32))


def _seed_worker(base_seed, worker_id):
    """As torch's _worker_loop seeds a worker: random and torch from base
    seed + id, NumPy (when imported) from torch's _generate_state."""
    import random
    import sys
    import torch
    seed = base_seed + worker_id
    random.seed(seed)
    torch.manual_seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            from torch.utils.data._utils.worker import _generate_state
            np.random.seed(_generate_state(base_seed, worker_id))
        except ImportError:
            np.random.seed(seed % (1 << 32))
    return seed


class _Job:
    """What a worker process needs: passed to it whole (pickled under
    spawn and forkserver, as torch pickles its dataset)."""

    def __init__(self, loader, ctl, ring, key_bytes, sem, results,
                 base_seed, stages):
        self.dataset = loader.dataset
        self.num_workers = loader.num_workers
        self.worker_init_fn = loader.worker_init_fn
        self.torch_threads = loader.torch_threads
        self.seed_per_sample = loader.seed_per_sample
        self.collate = _in_worker_collate(loader)
        self.auto_collation = loader._auto_collation
        self.ctl, self.ring, self.key_bytes = ctl, ring, key_bytes
        self.sem, self.results = sem, results
        self.base_seed = base_seed
        self.stages = stages     # the stage block (_procstats.py)
        self.spans = None        # trace=True: the span rings (_proctrace.py)


def _in_worker_collate(loader):
    """The function a worker applies to a whole batch, or None when workers
    make single samples (default collation, done in the main process)."""
    if not loader._auto_collation:
        return loader.collate_fn   # default_convert or the user's
    if loader._user_collate:
        return loader.collate_fn
    return None


def worker_setup(worker_id, job):
    """A worker process's start, as torch's _worker_loop: its torch
    threads, SIGINT left to the main process, torch's seeds and
    get_worker_info(), worker_init_fn.  False when worker_init_fn raised
    (its error is sent, and the worker must leave)."""
    import torch
    from torch._utils import ExceptionWrapper
    from torch.utils.data._utils import worker as tw
    torch.set_num_threads(int(job.torch_threads or 1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process decides
    seed = _seed_worker(job.base_seed, worker_id)
    tw._worker_info = tw.WorkerInfo(id=worker_id, num_workers=job.num_workers,
                                    seed=seed, dataset=job.dataset)
    try:
        if job.worker_init_fn is not None:
            job.worker_init_fn(worker_id)
    except Exception:
        job.results.put((-1, -1, "init", worker_id, ExceptionWrapper(
            where=f"in DataLoader worker process {worker_id}")))
        job.results.close()
        job.results.join_thread()   # the message must reach the main process
        return False
    return True


def _reseeder():
    """_reseed's work with its look-ups done once: a function of the seed
    (the per-sample reseed runs before every __getitem__, so its cost is
    the per-sample overhead's largest share on a cheap sample)."""
    import random
    import sys
    import torch
    inst = random._inst
    seed_random = type(inst).__mro__[1].seed   # _random.Random.seed (C)
    seed_torch = torch.default_generator.manual_seed
    if type(inst) is not random.Random or \
            getattr(inst.seed, "__func__", None) is not random.Random.seed:
        return _reseed   # random's generator replaced: its own seed()

    def reseed(seed):
        # random.Random.seed(int) less its Python wrapper: the C seeding,
        # and the cached normal variate dropped as the wrapper drops it.
        seed_random(inst, seed)
        inst.gauss_next = None
        seed_torch(seed)
        f = seed_np[0]
        if f is None:   # NumPy may be imported by the dataset later
            np = sys.modules.get("numpy")
            if np is None:
                return
            f = seed_np[0] = np.random.seed
        f(seed % (1 << 32))
    seed_np = [None]
    return reseed


# A worker claims several units at once: as many as it makes in about
# _CHUNK_NS (from its own recent time a unit), at most _CHUNK_MAX, and
# one while it has made none.  The units of a claim are consecutive in
# the published order (one fetch-and-add), so every unit is still made
# exactly once and batches are the same for any W; what is made goes back
# in one message, sent early when _FLUSH_NS have passed since the
# oldest result not yet sent (a slow sample does not hold back the
# others).
_CHUNK_NS = 500_000
_CHUNK_MAX = 256
_FLUSH_NS = 1_000_000
_UNITS = -2     # a message's first word: the results of one claim


def _worker_main(worker_id, job):
    """A worker process: claim units until told to stop."""
    import torch
    from torch._utils import ExceptionWrapper
    if not worker_setup(worker_id, job):
        return
    ctl = job.ctl.numpy()
    ring = job.ring.numpy()
    stages = job.stages.numpy()
    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    record = _stoke.stage_record
    load, store = _stoke.shared_load, _stoke.shared_store
    key_bytes = job.key_bytes.numpy()
    results = job.results
    spans = _proctrace.start_worker(job.spans, worker_id, os.getpid())
    held = _HELD + worker_id
    nw = job.num_workers
    at_busy, at_samples, at_cpu = (_HELD + nw + worker_id,
                                   _HELD + 2 * nw + worker_id,
                                   _HELD + 3 * nw + worker_id)
    at_taken = _HELD + 4 * nw + worker_id
    at_pub = _HELD + 5 * nw
    # A process started again in a retired one's place counts on from what
    # its predecessor sent (all of it taken in before that one left).
    sent = int(load(ctl, at_taken))
    parent = os.getppid()
    tot_busy = tot_samples = tot_cpu = 0
    cap = ring.shape[0]
    reseed = _reseeder() if job.seed_per_sample else None
    dataset, collate = job.dataset, job.collate
    sem_acquire = job.sem.acquire
    take_more, give_back = _taker(job.sem), _poster(job.sem)
    mix = _stoke.seed_mix
    # The thread's CPU clock is a system call (~3 us on a VM, 20 times the
    # wall clock's): read once a message, at its end.  Waiting for the
    # next claim uses none, so one message's end is the next one's start.
    cpu_was = cpu_clock()
    arena = _slots.WorkerArena(worker_id, job.rows)
    per_unit = 0        # this worker's recent wall ns a unit (0: none yet)
    while True:
        sem_acquire()
        want = 1 if per_unit <= 0 else \
            min(_CHUNK_MAX, _CHUNK_NS // per_unit)
        if want > 1:
            # No more than a fair share of what is there to claim, so that
            # the first worker awake does not take a window of cheap
            # samples while the others wait; and no less than a quarter
            # of the ring's share, so that claims do not shrink to single
            # samples as the window drains.
            active = max(1, load(ctl, _GATE))
            left = load(ctl, at_pub) - load(ctl, _CLAIM)
            want = min(want, max(-(-left // active),
                                 -(-cap // (4 * active))))
        n = 1 + (take_more(want - 1) if want > 1 else 0)
        if load(ctl, _STOP):
            # The stop's tokens may be among those taken: the others'
            # go back.  Leaving must not wait for the main process to
            # read what is still queued: it no longer wants it.
            give_back(n - 1)
            results.cancel_join_thread()
            return
        if worker_id >= load(ctl, _GATE):
            # num_workers="auto" shrank: the tokens are another worker's.
            give_back(n)
            how = _leave_when_taken(ctl, at_taken, sent, worker_id, parent)
            if how == "stay":
                continue
            if how == "stop":
                results.cancel_join_thread()
                return
            store(ctl, held, _RETIRED)
            return
        t = start = clock()     # a sample's clock starts at its claim
        first = _stoke.shared_fetch_add(ctl, _CLAIM, n)
        out, recs = [], []      # results not yet sent, and their times
        oldest = start
        for unit in range(first, first + n):
            row = ring[unit % cap]
            m, pos, epoch, base = (int(row[_N]), int(row[_POS]),
                                   int(row[_EP]), int(row[_BASE]))
            if m >= 0:
                keys = row[_KEYS:_KEYS + m].tolist()
            else:   # keys that are not ints: pickled beside the row
                keys = pickle.loads(key_bytes[unit % cap, :-m].tobytes())
            u_start = t
            times = []      # per sample: read, python (ns)
            try:
                samples = []
                for k in keys:
                    t0 = t
                    ik = k if type(k) is int else _key_number(k)
                    store(ctl, held, ik)
                    if reseed is not None:
                        reseed(mix(base, epoch, ik))
                    t1 = clock()
                    samples.append(dataset[k])
                    t = clock()
                    times.append((t1 - t0, t - t1))
                if collate is not None:
                    data = _apply(job, samples)
                    kind = "batch"
                else:
                    data = arena.write(samples[0], torch)
                    kind = "row"
                    if data is None:  # it does not fit a row: it crosses
                        data, kind = samples[0], "sample"
            except Exception:
                kind = "error"
                data = ExceptionWrapper(
                    where=f"in DataLoader worker process {worker_id}")
            samples = None
            now = clock()
            co = now - t
            t = now
            recs.append((times, co))
            out.append((epoch, unit, kind, pos, data))
            data = None
            if spans is not None:
                _proctrace.write_unit(
                    spans, u_start, times, co,
                    [k if type(k) is int else _key_number(k) for k in keys])
            if now - oldest >= _FLUSH_NS or unit == first + n - 1:
                # Recorded before the results go: the main process sees a
                # sample's stages no later than the sample.
                cpu = cpu_clock()
                record_units(record, stages, worker_id, recs, cpu - cpu_was)
                tot_busy += now - oldest
                tot_samples += sum(len(r[0]) for r in recs)
                tot_cpu += cpu - cpu_was
                store(ctl, at_busy, tot_busy)
                store(ctl, at_samples, tot_samples)
                store(ctl, at_cpu, tot_cpu)
                cpu_was = cpu
                if unit == first + n - 1:
                    store(ctl, held, _NO_KEY)
                results.put((_UNITS, worker_id, "units", out))
                sent += 1
                out, recs = [], []
                oldest = now
        took = (t - start) // n
        per_unit = took if per_unit <= 0 else (3 * per_unit + took) // 4


def _taker(sem):
    """take(n): up to n more tokens of sem without waiting, how many (one
    C call when the semaphore shows its handle)."""
    handle = getattr(getattr(sem, "_semlock", None), "handle", None)
    if isinstance(handle, int) and handle:
        take_n = _stoke.sem_take_n
        return lambda n: take_n(handle, n)
    acquire = sem.acquire

    def take(n):
        got = 0
        while got < n and acquire(False):
            got += 1
        return got
    return take


def _poster(sem):
    """post(n): n tokens into sem (one C call where it can)."""
    handle = getattr(getattr(sem, "_semlock", None), "handle", None)
    if isinstance(handle, int) and handle:
        post_n = _stoke.sem_post_n
        return lambda n: post_n(handle, n)
    release = sem.release

    def post(n):
        for _ in range(n):
            release()
    return post


def record_units(record, stages, worker_id, recs, cpu_ns):
    """A message's units into the worker's part of the stage block (see
    record_unit), the message's CPU time shared out by wall time."""
    if len(recs) == 1:
        record_unit(record, stages, worker_id, recs[0][0], recs[0][1], cpu_ns)
        return
    walls = [sum(rd + py for rd, py in times) + co for times, co in recs]
    total = sum(walls) or 1
    for (times, co), wall in zip(recs, walls):
        if len(times) == 1:     # a sample's unit: record_unit's one line
            rd, py = times[0]
            record(stages, worker_id, rd, py, co, wall,
                   cpu_ns * wall // total)
        else:
            record_unit(record, stages, worker_id, times, co,
                        cpu_ns * wall // total)


def _leave_when_taken(ctl, at_taken, sent, worker_id, parent):
    """A worker asked to leave at the gate waits until the main process
    has taken in the `sent` results it put: a batch or sample that
    crosses as a tensor has its storage's file descriptor fetched from
    this process when the main process unpickles it, so a sender that has
    left turns that result into a refused connection (CI's
    test_auto_shrinks_and_grows_again_without_losing_a_sample).  Returns
    "leave"; "stay" when the gate rose above it again meanwhile (it works
    on, nothing lost); "stop" when the loader stops or its process is
    gone."""
    while _stoke.shared_load(ctl, at_taken) < sent:
        if _stoke.shared_load(ctl, _STOP) or os.getppid() != parent:
            return "stop"
        if worker_id < _stoke.shared_load(ctl, _GATE):
            return "stay"
        time.sleep(0.001)
    return "leave"


def record_unit(record, stages, worker_id, times, collate_ns, cpu_ns):
    """A unit's samples into the worker's part of the stage block: each its
    (read, python) times, the last also the unit's collation, and the
    unit's CPU time shared out in proportion to each sample's wall time."""
    if not times:
        return
    wall = [rd + py for rd, py in times]
    wall[-1] += collate_ns
    total = sum(wall) or 1
    last = len(times) - 1
    for i, (rd, py) in enumerate(times):
        record(stages, worker_id, rd, py, collate_ns if i == last else 0,
               wall[i], cpu_ns * wall[i] // total)


def _key_number(key):
    """A key that is not an int, as a number (its seed and its name in a
    death's message): a stable hash of its pickle."""
    import zlib
    return zlib.crc32(pickle.dumps(key)) | (1 << 40)


def _apply(job, samples):
    """The in-worker collation of one unit: a whole batch through the
    user's collate_fn, or (no auto-collation) one sample through
    default_convert."""
    return job.collate(samples) if job.auto_collation else \
        job.collate(samples[0])


# ---- the main process --------------------------------------------------------

_live = weakref.WeakSet()


@atexit.register
def _stop_all():
    for pool in list(_live):
        pool.shutdown()


def _how(proc):
    """torch's words for how a worker process ended."""
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"is killed by signal: {name}"
    return f"exited unexpectedly with exit code {code}"


def _death(proc, key):
    """torch's words for a worker that died, and the sample it held."""
    held = "no sample" if key < 0 else f"dataset[{key}]"
    return (f"DataLoader worker (pid {proc.pid}) {_how(proc)}; it held {held} "
            f"(stoke.DataLoader, worker_type='process')")


# What unpickling a message raises when its sender died before handing
# over a shared file descriptor (multiprocessing's resource sharer).
_LOST_SENDER = (ConnectionError, EOFError, FileNotFoundError)
_REAP_S = 5.0   # how long a reset sender may take to be seen as ended


def _death_after(pool, error):
    """The message for the worker whose death broke a message off, waiting
    up to _REAP_S for its end to be seen (a reset socket comes before the
    exit code).  No worker dead by then: the error was something else, and
    goes on up."""
    deadline = time.monotonic() + _REAP_S
    while True:
        why = pool.dead()
        if why is not None:
            return why
        if time.monotonic() >= deadline:
            raise error
        time.sleep(_POLL_S / 10)


def _death_when_drained(pool):
    """pool.dead()'s message once nothing is left queued, else None: a
    worker's last message (worker_init_fn's error) reaches the pipe before
    it ends, so a death seen first and an empty queue after it mean no
    message of the dead worker is still to be read."""
    why = pool.dead()
    return why if why is None or pool.results.empty() else None


def wait_result(pool, block, timeout, fail):
    """One message off pool.results, or None when not block and none is
    there.  Waiting, the workers are watched (fail(RuntimeError) for one
    that died: it raises) and the timeout is kept.  Shared by the map and
    the iterable iterators."""
    waited = 0.0
    while True:
        try:
            return pool.results.get(timeout=_POLL_S) if block else \
                pool.results.get(block=False)
        except _LOST_SENDER as e:
            # A tensor's storage travels as a file descriptor that the
            # sending worker hands over when the message is unpickled; a
            # worker killed between its put and this get leaves a reset
            # connection, not a message.  Name the dead worker, as torch's
            # loader does, rather than let the socket error through.
            why = _death_after(pool, e)
            fail(RuntimeError(why))
        except _queue.Empty:
            if not block:
                return None
            why = _death_when_drained(pool)
            if why is not None:
                fail(RuntimeError(why))
            waited += _POLL_S
            if timeout and waited >= timeout:
                raise RuntimeError("DataLoader timed out after {} "
                                   "seconds".format(timeout))


class PoolBase:
    """What both pools share: starting the worker processes, and stopping
    them (after the subclass's _signal_stop has told them to leave)."""

    procs = ()
    closed = False
    ledger = None       # the loader's memory ledger (_procmem.py)

    def _start(self, ctx, target, job, w):
        self.procs = []
        self.closed = False
        self._how_to_start = (ctx, target, job)
        _live.add(self)
        try:
            for i in range(w):
                self._spawn(i)
        except BaseException:
            self.shutdown()
            raise

    def _spawn(self, i):
        """Start worker i (again, when it left: num_workers="auto")."""
        ctx, target, job = self._how_to_start
        p = ctx.Process(target=target, args=(i, job), daemon=True,
                        name=f"stoke-p{i}")
        p.start()
        if i < len(self.procs):
            self.procs[i] = p
        else:
            self.procs.append(p)

    def _signal_stop(self):
        raise NotImplementedError

    def pids(self):
        """The worker processes' pids (those started)."""
        return [p.pid for p in self.procs]

    def shared_segments(self):
        """The pool's shared memory, by name: bytes (for the ledger)."""
        return {}

    def shutdown(self):
        if self.closed:
            return
        self.closed = True
        _live.discard(self)
        if self.ledger is not None:
            try:
                self.ledger.stopping(self)   # the workers' last reading
            except Exception:
                pass
        try:
            self._signal_stop()
        except Exception:
            pass
        for p in self.procs:
            p.join(timeout=5)   # a hang guard: a worker leaves at once
        for p in self.procs:
            if p.exitcode is None:
                p.kill()
                p.join()
        try:
            self.results.cancel_join_thread()
            self.results.close()
        except Exception:
            pass


class IteratorBase:
    """What both iterators share: the checks at the top of __next__, a
    failure that stops the pool, the epoch's end, and the pool's end with
    the iterator."""

    _closed = False     # loader.close() stopped it

    def __iter__(self):
        return self

    def _receive_msg(self, block):
        return wait_result(self._pool, block, self._timeout, self._fail)

    def _check_next(self):
        """Raise what __next__ must raise before it waits: an earlier
        error, a newer iter(loader), an ended epoch, a dead worker."""
        if self._closed:
            raise RuntimeError("stoke.DataLoader: the loader was closed; "
                               "start a new iteration with iter(loader)")
        if self._failed is not None:
            raise RuntimeError("stoke.DataLoader: this iteration stopped at "
                               "an earlier error; start a new one with "
                               "iter(loader)")
        loader = self._loader_ref()
        if loader is not None and loader.persistent_workers and \
                loader._proc_epoch != self._epoch:
            raise RuntimeError("stoke.DataLoader: this iterator was replaced "
                               "by a newer iter(loader)")
        if self._done:
            # Ended: StopIteration again, as torch's (its workers may be
            # gone: that is no death), and no step for the clock.
            raise StopIteration
        # As torch: a worker that died is an error at the next call, even
        # when the others could finish the epoch without it; what it sent
        # before it ended is read first.
        why = _death_when_drained(self._pool)
        if why is not None:
            self._fail(RuntimeError(why))

    def _close(self):
        """loader.close(): the workers stop, and this iteration with them
        (its clocks go with the loader's reference to them)."""
        self._closed = True
        self._pool.shutdown()
        self._stats = None

    def _fail(self, exc):
        """The pool cannot go on: stop it and raise (torch's wrapper is
        re-raised as the worker's exception)."""
        self._pool.shutdown()
        self._failed = exc
        self._raise(exc)

    @staticmethod
    def _raise(exc):
        from torch._utils import ExceptionWrapper
        if isinstance(exc, ExceptionWrapper):
            exc.reraise()
        raise exc

    def _pin_data(self, data):
        if self._pin:
            from torch.utils.data._utils.pin_memory import pin_memory
            data = pin_memory(data)
        return data

    def _end(self):
        self._done = True
        self._stats.end_epoch()
        loader = self._loader_ref()
        if loader is None or not loader.persistent_workers:
            self._pool.shutdown()

    def __getstate__(self):
        raise NotImplementedError("{} cannot be pickled",
                                  self.__class__.__name__)

    def __del__(self):
        pool = getattr(self, "_pool", None)
        loader = self._loader_ref() if hasattr(self, "_loader_ref") else None
        if pool is not None and (loader is None or
                                 not loader.persistent_workers):
            pool.shutdown()


class _Pool(PoolBase):
    """The worker processes of a loader, its shared counters and ring, and
    the results queue.  Units are numbered across epochs: a ring row is
    reused only once its unit came back."""

    def __init__(self, loader, base_seed, ahead, stages, spans=None):
        import torch
        ctx = loader.multiprocessing_context or _mp.get_context("fork")
        w = loader.num_workers
        self.workers = w
        per_unit = (loader._max_batch if _in_worker_collate(loader) is not None
                    and loader._auto_collation else 1)
        units_ahead = ahead * (1 if per_unit > 1 or not loader._auto_collation
                               else loader._max_batch)
        self.cap = units_ahead + w + 1
        self.ctl = torch.full((_HELD + 5 * w + 1,), _NO_KEY,
                              dtype=torch.int64)
        self.ctl[_CLAIM] = 0
        self.ctl[_STOP] = 0
        self.ctl[_HELD + w:] = 0
        self._at_pub = _HELD + 5 * w
        # num_workers="auto": the tuner's count of workers (the others are
        # started when it grows); else all of them.
        tuner = getattr(loader._pstats, "tuner", None)
        start = tuner.active if tuner is not None else w
        self.ctl[_GATE] = start
        self.ctl.share_memory_()
        self.ring = torch.zeros((self.cap, _KEYS + per_unit),
                                dtype=torch.int64).share_memory_()
        # A unit's keys when they are not ints, pickled: one key's worth
        # for a sample, a batch's for a whole batch.
        self.key_width = _KEY_BYTES if per_unit > 1 else _KEY_BYTES // 16
        self.key_bytes = torch.zeros((self.cap, self.key_width),
                                     dtype=torch.uint8).share_memory_()
        self._ctl, self._ring = self.ctl.numpy(), self.ring.numpy()
        self._taken = [0] * w  # taken_from's counts, as stored in ctl
        self._key_bytes = self.key_bytes.numpy()
        self.sem = ctx.Semaphore(0)
        self._post = _poster(self.sem)
        self.results = ctx.Queue()
        job = _Job(loader, self.ctl, self.ring, self.key_bytes, self.sem,
                   self.results, base_seed, stages)
        job.spans = spans
        # Rows per worker: its share of the samples in flight, and two
        # more (a sample that finds none free crosses whole instead): the
        # rows cost no more shared memory than torch's batches in flight.
        job.rows = -(-units_ahead // max(w, 1)) + 2
        self.arenas = _slots.MainArenas()
        self.published = 0
        # Units come back in any order: low is the oldest not come back
        # (a ring row is reused only from there), back[u % cap] marks
        # those above it that have.
        self.low = 0
        self.back = bytearray(self.cap)
        import numpy as np
        self._steps = np.arange(self.cap, dtype=np.int64)
        self._start(ctx, _worker_main, job, start)

    def set_active(self, n):
        """num_workers="auto": n workers from now on; those above leave
        at their next claim, those below that are not running start."""
        _stoke.shared_store(self._ctl, _GATE, n)
        for i in range(n):
            if i >= len(self.procs) or self._retired(i):
                _stoke.shared_store(self._ctl, _HELD + i, _NO_KEY)
                self._spawn(i)

    def _retired(self, i):
        p = self.procs[i]
        return p.exitcode == 0 and \
            _stoke.shared_load(self._ctl, _HELD + i) == _RETIRED

    def worker_totals(self):
        """The workers' (busy ns, samples, CPU ns) so far, summed."""
        w = self.workers
        c = self._ctl
        return tuple(int(c[_HELD + k * w:_HELD + (k + 1) * w].sum())
                     for k in (1, 2, 3))

    def room(self):
        """How many more units can be published without overwriting a
        row whose unit is still out?"""
        return self.low + self.cap - self.published

    def publish_samples(self, keys, batch, pos, epoch, base_seed):
        """Units of one int key each (a batch's samples, from its
        position pos on), as publish() would one by one; as many as there
        is room for.  Returns how many."""
        n = min(len(keys), self.room())
        if n <= 0:
            return 0
        if not all(type(k) is int and 0 <= k < (1 << 62)
                   for k in keys[:n]):
            k = 0
            while k < n:
                self.publish([keys[k]], batch, pos + k, epoch, base_seed)
                k += 1
            return n
        u, cap = self.published, self.cap
        at = (u + self._steps[:n]) % cap
        ring = self._ring
        ring[at, _N] = 1
        ring[at, _BATCH] = batch
        ring[at, _POS] = pos + self._steps[:n]
        ring[at, _EP] = epoch
        ring[at, _BASE] = base_seed
        ring[at, _KEYS] = keys[:n]
        self.published = u + n
        _stoke.shared_store(self._ctl, self._at_pub, self.published)
        self._post(n)   # a worker may now claim them
        return n

    def publish(self, keys, batch, pos, epoch, base_seed):
        u = self.published
        row = self._ring[u % self.cap]
        row[_BATCH], row[_POS] = batch, pos
        row[_EP], row[_BASE] = epoch, base_seed
        if len(keys) > self._ring.shape[1] - _KEYS:
            raise ValueError(
                f"stoke.DataLoader: the batch sampler gave a batch of "
                f"{len(keys)} samples, more than max_batch_size="
                f"{self._ring.shape[1] - _KEYS}: pass a larger max_batch_size")
        if all(type(k) is int and 0 <= k < (1 << 62) for k in keys):
            row[_N] = len(keys)
            row[_KEYS:_KEYS + len(keys)] = keys
        else:
            data = pickle.dumps(keys)
            if len(data) > self.key_width:
                raise ValueError(
                    f"stoke.DataLoader(worker_type='process'): the keys "
                    f"{keys!r} take {len(data)} bytes pickled, more than "
                    f"{self.key_width}; use worker_type='thread'")
            self._key_bytes[u % self.cap, :len(data)] = memoryview(data)
            row[_N] = -len(data)
        self.published += 1
        _stoke.shared_store(self._ctl, self._at_pub, self.published)
        self.sem.release()  # a worker may now claim it

    def taken_from(self, worker_id):
        """One more result of worker_id taken in, whole (its tensors' file
        descriptors received): a worker leaving at the gate waits for
        this count (_leave_when_taken)."""
        # The main process is the count's only writer, so it keeps the
        # count itself and stores it: one shared access a result, not two.
        n = self._taken[worker_id] + 1
        self._taken[worker_id] = n
        _stoke.shared_store(self._ctl, _HELD + 4 * self.workers + worker_id,
                            n)

    def came_back(self, unit):
        back, cap = self.back, self.cap
        back[unit % cap] = 1
        low = self.low
        while low < self.published and back[low % cap]:
            back[low % cap] = 0
            low += 1
        self.low = low

    def dead(self):
        """The message for a worker that died, or None."""
        gate = _stoke.shared_load(self._ctl, _GATE)
        for i, p in enumerate(self.procs):
            if p.exitcode is not None:
                if self._retired(i):
                    if i < gate:     # it left as the count grew back
                        _stoke.shared_store(self._ctl, _HELD + i, _NO_KEY)
                        self._spawn(i)
                    continue
                return _death(p, _stoke.shared_load(self._ctl, _HELD + i))
        return None

    def shared_segments(self):
        from ._procmem import tensor_bytes
        return {"ring": tensor_bytes(self.ctl) + tensor_bytes(self.ring) +
                tensor_bytes(self.key_bytes),
                "arenas": self.arenas.shared_bytes()}

    def _signal_stop(self):
        _stoke.shared_store(self._ctl, _STOP, 1)
        for _ in self.procs:
            self.sem.release()


class ProcessIterator(IteratorBase):
    """One epoch of a stoke.DataLoader on worker processes (the
    counterpart of dataloader._Iterator)."""

    def __init__(self, loader):
        self._reset(loader)

    def _reset(self, loader, first_iter=False):
        import torch
        self._loader_ref = weakref.ref(loader)
        self._index_sampler = loader._index_sampler
        it = iter(loader._index_sampler)
        base_seed = torch.empty((), dtype=torch.int64).random_(
            generator=loader.generator).item()
        w = loader.num_workers
        ahead = (loader.prefetch_factor or 2) * w
        # The loader's clocks: an epoch left early ends here.
        self._stats = loader._proc_stats()
        self._stats.end_epoch()
        # worker_type="auto": this epoch's wall time, iter() to its end.
        self._epoch_t0 = time.perf_counter()
        pool = getattr(self, "_pool", None)
        if pool is None or pool.closed or not loader.persistent_workers:
            if pool is not None:
                pool.shutdown()
            pool = _Pool(loader, base_seed, ahead, self._stats.block,
                         self._stats.spans)
        self._stats.ledger.attach(pool)
        for entry in getattr(self, "_pending", {}).values():
            if pool is getattr(self, "_pool", None):
                self._free_rows(entry[1])   # batches of an epoch left early
        self._pool = pool
        loader._proc_epoch = getattr(loader, "_proc_epoch", -1) + 1
        self._epoch = loader._proc_epoch
        if self._stats.tuner is not None:
            self._stats.tuner.attach(pool, self._epoch)
        self._base_seed = base_seed
        self._order = it
        self._order_ended = False
        self._ahead = ahead
        self._pf = loader.prefetch_factor or 2
        self._per_batch = _in_worker_collate(loader) is not None
        self._auto = loader._auto_collation
        self._collate = None if self._per_batch else _main_collate()
        self._pin = bool(loader.pin_memory) and torch.cuda.is_available()
        self._in_order = loader.in_order
        self._timeout = float(loader.timeout or 0)
        self._next_batch = 0     # batches given to the workers
        self._next_out = 0       # the next batch to hand out (in order)
        self._pending = {}       # batch -> [units, {pos: data}, {pos: err}]
        self._units_of = {}      # unit -> batch
        self._num_yielded = 0
        self._failed = None
        self._done = False       # StopIteration given: the epoch ended
        self._closed = False

    def __len__(self):
        return len(self._index_sampler)

    def _ahead_now(self):
        """Batches given out ahead: prefetch_factor per worker, as torch;
        num_workers="auto": per worker in use (each worker's arena has
        rows for its share of that), the ring holding the most's."""
        tuner = self._stats.tuner
        return self._ahead if tuner is None else self._pf * tuner.active

    def _top_up(self):
        pool = self._pool
        while not self._order_ended and \
                self._next_batch - self._num_yielded < self._ahead_now():
            keys = None
            try:
                item = next(self._order)
            except StopIteration:
                self._order_ended = True
                return
            keys = list(item) if self._auto else [item]
            b = self._next_batch
            self._next_batch += 1
            if self._per_batch:
                self._pending[b] = [1, {}, {}, len(keys)]
                while pool.room() <= 0:
                    self._receive(block=True)
                self._units_of[pool.published] = b
                try:
                    pool.publish(keys, b, 0, self._epoch, self._base_seed)
                except Exception as e:
                    # A batch half given cannot complete: the iteration
                    # stops here, as thread mode's does at a sampler error.
                    self._fail(e)
                continue
            # One unit a sample, published together (as many as the ring
            # has room for at a time).
            self._pending[b] = [len(keys), {}, {}, len(keys)]
            pos = 0
            while pos < len(keys):
                while pool.room() <= 0:
                    self._receive(block=True)
                u = pool.published
                try:
                    n = pool.publish_samples(keys[pos:], b, pos, self._epoch,
                                             self._base_seed)
                except Exception as e:
                    self._units_of.update(
                        dict.fromkeys(range(u, pool.published), b))
                    self._fail(e)
                self._units_of.update(dict.fromkeys(range(u, u + n), b))
                pos += n

    def _receive(self, block):
        """Take one result off the queue (waiting, with the workers watched
        and the timeout kept, when block); False when none was there."""
        msg = self._receive_msg(block)
        if msg is None:
            return False
        if msg[2] == "init":
            self._fail(msg[4])
        self._pool.taken_from(msg[1])
        for item in msg[3]:
            self._take(*item)
        return True

    def _take(self, epoch, unit, kind, pos, data):
        """One unit's result into its batch."""
        pool = self._pool
        pool.came_back(unit)
        if kind == "row":
            pool.arenas.register(data)   # the first row of an arena brings it
        b = self._units_of.pop(unit, None)
        if epoch != self._epoch or b is None:
            if kind == "row":
                pool.arenas.free(data)
            return True   # a unit of an epoch left early
        entry = self._pending.get(b)
        if entry is not None:
            (entry[2] if kind == "error" else entry[1])[pos] = data
        return True

    def _depth(self):
        """The ready queue a step finds: batches complete and not yet
        handed out (what came back so far is taken in first)."""
        while self._receive(block=False):
            pass
        return sum(1 for e in self._pending.values()
                   if len(e[1]) + len(e[2]) == e[0])

    def _ready(self):
        """The next batch to hand out, complete, or None."""
        order = [self._next_out] if self._in_order else sorted(self._pending)
        for b in order:
            e = self._pending.get(b)
            if e is not None and len(e[1]) + len(e[2]) == e[0]:
                return b
        return None

    def _epoch_timed(self):
        """A whole epoch ended: its wall time to a worker_type="auto"
        loader (its measured gain, dataloader._auto_summary)."""
        loader = self._loader_ref()
        if self._epoch_t0 is not None and loader is not None and \
                loader.worker_type == "auto":
            loader._auto_process_epochs.append(time.perf_counter() -
                                               self._epoch_t0)
        self._epoch_t0 = None

    def __next__(self):
        self._check_next()
        # The consumer's clock: waiting from here to the return (a step
        # that raises is counted in neither clock).
        self._stats.enter()
        self._top_up()
        depth = self._depth()
        while True:
            self._top_up()
            b = self._ready()
            if b is not None:
                break
            if not self._pending:
                self._end()
                self._epoch_timed()
                raise StopIteration
            self._receive(block=True)
            while self._receive(block=False):
                pass
        units, got, errors, n_keys = self._pending.pop(b)
        if self._in_order:
            self._next_out += 1
            while self._next_out < self._next_batch and \
                    self._next_out not in self._pending:
                self._next_out += 1
        self._num_yielded += 1
        if errors:
            # torch's worker stops a batch at its first error.
            self._free_rows(got)
            self._raise(errors[min(errors)])
        if self._per_batch:
            data = got[0]
        else:
            arenas = self._pool.arenas
            try:
                data = self._collate([
                    arenas.sample(got[p]) if type(got[p]) is _slots.Row
                    else got[p] for p in range(units)])
            finally:
                self._free_rows(got)   # the batch is a copy of its rows
        data = self._pin_data(data)
        self._stats.leave(n_keys, depth)
        return data

    def _free_rows(self, got):
        for x in got.values():
            if type(x) is _slots.Row:
                self._pool.arenas.free(x)


def _main_collate():
    """torch's default_collate, run in the main process over the samples
    the workers made."""
    from torch.utils.data._utils.collate import default_collate
    return default_collate
