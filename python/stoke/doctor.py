"""python3 -m stoke.doctor SCRIPT [ARGS...]

Run an unmodified training script with every torch.utils.data.DataLoader
iteration measured by stoke.TwoClock.  At exit it prints, for each loader,
its configuration, the wait/compute split per epoch, the verdict and the
escalation ladder's advice, and writes stoke-doctor/report.html (with one
JSON file per loader beside it, which `stoke report` also reads).

Each DataLoader gets one clock; its first epoch is the warm-up (worker
start-up), left out of the steady state.  With a GPU in
use the compute clock waits for the device first (torch.cuda.synchronize),
so that queued work is counted where it runs.

Options (before SCRIPT):
  --steps N      end the script once a loader has measured N steps after
                 its warm-up, printing the verdict and the report
  --seconds S    the same after S seconds of measured steps
  --every S      print a one-line summary per loader every S seconds
  --metrics-file PATH   Prometheus text per loader, rewritten atomically
                 every 10 s (loader 2 writes PATH's name with -loader2
                 before its extension, and so on)
  --log-jsonl PATH      a JSON line per epoch and every 100 steps, per
                 loader as --metrics-file
  --out DIR      where the report goes (default stoke-doctor)

The warm-up is each loader's first epoch, or its first 10 steps and 5 s
if those come first, so a long epoch is judged within seconds.  With
--steps or --seconds the doctor ends the script by raising SystemExit(0)
from the DataLoader's next(): the script's finally blocks, with
statements and atexit handlers run, and the exit status is 0.  Ctrl-C
and SIGTERM print what was measured so far.  Under torchrun, each rank
measures its own loaders; once torch.distributed is initialised, the
ranks stop at the same step and rank 0 prints the job's table (the
slowest rank named) after its own report."""

import atexit
import os
import runpy
import signal
import sys
import threading
import time

from . import _stoke
from .twoclock import TwoClock, _WeakIterable

OUT_DIR = "stoke-doctor"

#: The key, in torch.distributed's store, of the step every rank ends at.
_STOP_KEY = "stoke-doctor-stop-at"


class _Enough(SystemExit):
    """Raised from a DataLoader's next() once the doctor has measured what
    it was asked to: the script unwinds as at sys.exit(0)."""

    def __init__(self):
        super().__init__(0)


class _Terminated(SystemExit):
    """SIGTERM: unwind the script so the report is printed (exit 143)."""

    def __init__(self):
        super().__init__(128 + signal.SIGTERM)


def _dist():
    """torch.distributed when it is initialised with more than one rank."""
    tdist = sys.modules.get("torch.distributed")
    try:
        if tdist is not None and tdist.is_available() and \
                tdist.is_initialized() and tdist.get_world_size() > 1:
            return tdist
    except Exception:
        pass
    return None


class Doctor:
    def __init__(self, out_dir=OUT_DIR, warmup=None, stream=None, steps=None,
                 seconds=None, every=None, metrics_file=None, log_jsonl=None):
        self.out_dir = out_dir
        self.warmup = warmup
        self.stream = stream or sys.stderr
        self.steps = steps        # end after this many measured steps
        self.seconds = seconds    # ... or this many seconds of them
        self.every = every        # a summary line every this many seconds
        self.metrics_file = metrics_file
        self.log_jsonl = log_jsonl
        self.clocks = []   # in order of first iteration
        self._by_loader = {}
        self._orig_iter = None
        self._done = False
        self._measuring_since = {}  # clock -> monotonic time of its first
        self._asked = {}            # clock -> steps asked for (all ranks
        self._stop_at = None        #   count alike); the agreed last one
        self._ticker = None
        self._tick_stop = threading.Event()
        self._t0 = time.monotonic()
        self._ended = False         # the doctor ended the script

    def install(self):
        import torch.utils.data as tud
        DataLoader = tud.DataLoader
        self._orig_iter = orig = DataLoader.__iter__
        doctor = self

        def measured_iter(loader):
            clock = doctor._clock_for(loader, orig)
            if doctor.steps is None and doctor.seconds is None:
                return iter(clock)
            return doctor._watched(clock)

        measured_iter.__wrapped__ = orig
        DataLoader.__iter__ = measured_iter
        self._cls = DataLoader
        if self.every:
            self._ticker = threading.Thread(target=self._tick, daemon=True,
                                            name="stoke-doctor-every")
            self._ticker.start()

    def uninstall(self):
        if self._orig_iter is not None:
            self._cls.__iter__ = self._orig_iter
            self._orig_iter = None
        self._tick_stop.set()

    def _clock_for(self, loader, orig):
        key = id(loader)
        entry = self._by_loader.get(key)
        if entry is not None and entry[0]() is loader:
            return entry[1]
        import weakref
        n = len(self.clocks) + 1
        clock = TwoClock(_WeakIterable(loader, orig), warmup=self.warmup,
                         sync=self._sync(), describe=loader,
                         name=f"loader {n}: " + _describe(loader),
                         metrics_file=_nth_path(self.metrics_file, n),
                         log_jsonl=_nth_path(self.log_jsonl, n))
        self.clocks.append(clock)
        self._by_loader[key] = (weakref.ref(loader), clock)
        return clock

    # ---- --steps and --seconds ------------------------------------------

    def _watched(self, clock):
        """One epoch of clock, ending the script once enough is measured:
        checked each time the loop asks for a batch, so the step before
        has both its clocks."""
        it = iter(clock)
        while True:
            if self._enough(clock):
                clock._close_step()
                n = clock._measured_steps()
                print(f"stoke doctor: {clock.name}: {n} steps measured after "
                      f"the warm-up; ending the script (exit 0)",
                      file=self.stream)
                self._ended = True
                raise _Enough()
            try:
                item = next(it)
            except StopIteration:
                return
            self._asked[clock] = self._asked.get(clock, 0) + 1
            yield item

    def _enough(self, clock):
        n = clock._measured_steps()
        mine = False
        if n and clock not in self._measuring_since:
            self._measuring_since[clock] = time.monotonic()
        if self.steps is not None and n >= self.steps:
            mine = True
        if self.seconds is not None and n and \
                time.monotonic() - self._measuring_since[clock] >= \
                self.seconds:
            mine = True
        dist = _dist()
        if dist is None:
            return mine
        return self._agreed_stop(dist, clock, mine)

    def _agreed_stop(self, dist, clock, mine):
        """Under torch.distributed every rank must stop at the same step, or
        the ones still training would wait forever at the next collective
        for the ones that stopped.  The first rank to have measured enough
        writes, in the process group's store, a step a little ahead; every
        rank stops when it gets there (data-parallel ranks are never more
        than a step apart: they meet at each step's all-reduce)."""
        asked = self._asked.get(clock, 0)
        if self._stop_at is None:
            store = dist.distributed_c10d._get_default_store()
            # Counters, since add() is what every store kind has: adding 0
            # reads one (0: not set yet).
            if mine and store.add(_STOP_KEY + "-first", 1) == 1:
                store.add(_STOP_KEY, asked + 2)
            stop_at = store.add(_STOP_KEY, 0)
            if stop_at:
                self._stop_at = stop_at
        return self._stop_at is not None and asked >= self._stop_at

    # ---- --every --------------------------------------------------------

    def _tick(self):
        while not self._tick_stop.wait(self.every):
            for clock in list(self.clocks):
                try:
                    line = self._summary_line(clock)
                except Exception:  # a summary is not worth the script
                    continue
                if line:
                    print(line, file=self.stream, flush=True)

    def _summary_line(self, clock):
        # The C clocks may be read from any thread (EventTwoClock's own
        # stats() would also drain its events: the main thread's job).
        st = _stoke.TwoClock._summary(clock)
        steps = st.get("steps") or 0
        t = time.monotonic() - self._t0
        if not steps:
            return f"stoke doctor [{t:.0f} s] {clock.name}: warming up"
        verdict = _stoke.TwoClock._diagnosis(clock)["verdict"]
        step_ms = 1e3 * (st["wait_s"] + st["compute_s"]) / steps
        return (f"stoke doctor [{t:.0f} s] {clock.name}: {steps} steps, "
                f"waiting {100 * st['wait_ratio']:.1f}% of a {step_ms:.2f} "
                f"ms step (wait p95 {st.get('wait_p95_ms', 0):.2f} ms), "
                f"verdict {verdict}")

    # ---- the end --------------------------------------------------------

    @staticmethod
    def _sync():
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_available():
                return torch.cuda.synchronize
        except Exception:
            pass
        return None

    def _gather(self):
        """Every rank's rows for each of its loaders, through
        torch.distributed (rank order), or None when it is not in use."""
        dist = _dist()
        if dist is None:
            return None
        import socket
        rank, world = dist.get_rank(), dist.get_world_size()
        mine = [{"rank": rank, "world_size": world,
                 "host": socket.gethostname(), "name": c.name,
                 "stats": c.stats(), "diagnosis": c.diagnose()}
                for c in self.clocks]
        out = [None] * world
        try:
            dist.all_gather_object(out, mine)
        except Exception as e:
            print(f"stoke doctor: no job table: {e}", file=self.stream)
            return None
        return out

    def finish(self):
        if self._done:
            return
        self._done = True
        self.uninstall()
        out = self.stream
        ranks = self._gather()
        rank = 0
        out_dir = self.out_dir
        if ranks is not None:
            rank = _dist().get_rank()
            out_dir = os.path.join(self.out_dir, f"rank-{rank}")
        try:
            self._report(out, ranks, rank, out_dir)
        finally:
            # The script would have closed its process group had the doctor
            # not ended it first; left open, gloo aborts the interpreter's
            # exit.
            dist = _dist()
            if self._ended and dist is not None:
                dist.destroy_process_group()

    def _report(self, out, ranks, rank, out_dir):
        if not self.clocks:
            print("stoke doctor: no torch.utils.data.DataLoader was iterated",
                  file=out)
            return
        if rank != 0:
            print(f"stoke doctor: rank {rank}: {len(self.clocks)} DataLoader"
                  f"{'s' if len(self.clocks) != 1 else ''} measured (in "
                  f"{out_dir}); rank 0 prints the job's table", file=out)
            self._write(out_dir, print_report=False)
            return
        self._write(out_dir, print_report=True)
        if ranks is not None:
            self._print_job(ranks)

    def _write(self, out_dir, print_report):
        out = self.stream
        os.makedirs(out_dir, exist_ok=True)
        paths = []
        if print_report:
            print(f"\nstoke doctor: {len(self.clocks)} DataLoader"
                  f"{'s' if len(self.clocks) != 1 else ''} measured", file=out)
        for i, clock in enumerate(self.clocks, 1):
            if print_report:
                print(f"\n== {clock.name}", file=out)
                print(_config_line(clock.info), file=out)
                print(clock.report(), file=out, end="")
            path = os.path.join(out_dir, f"loader-{i}.json")
            clock.save_json(path)
            paths.append(path)
        html = os.path.join(out_dir, "report.html")
        try:
            _stoke.render_report(paths, html)
            if print_report:
                print(f"\nstoke doctor: wrote {html}", file=out)
        except Exception as e:  # a report is not worth the script's exit code
            print(f"stoke doctor: no HTML report: {e}", file=out)

    def _print_job(self, ranks):
        """The job's table per loader: each rank's row, the slowest named."""
        from .distributed import ranks_report
        n = min(len(r) for r in ranks)
        for i in range(n):
            rows = [r[i] for r in ranks]
            print(f"\n== the job, {rows[0]['name']}", file=self.stream)
            print(ranks_report(rows), file=self.stream, end="")


def _nth_path(path, n):
    """Loader n's file: path itself for the first, else path's name with
    -loader<n> before its extension (one writer per file)."""
    if path is None or n == 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}-loader{n}{ext}"


def _describe(loader):
    return (f"batch_size={getattr(loader, 'batch_size', None)}, "
            f"num_workers={getattr(loader, 'num_workers', None)}")


def _config_line(info):
    keys = ("batch_size", "num_workers", "pin_memory", "prefetch_factor",
            "persistent_workers", "drop_last")
    parts = [f"{k}={info[k]}" for k in keys if k in info]
    return "configuration: " + ", ".join(parts)


def _parse(argv):
    """(options, script argv) or raises ValueError with the usage error."""
    opts = {"steps": None, "seconds": None, "every": None,
            "out_dir": OUT_DIR, "metrics_file": None, "log_jsonl": None}
    kinds = {"--steps": ("steps", int), "--seconds": ("seconds", float),
             "--every": ("every", float), "--out": ("out_dir", str),
             "--metrics-file": ("metrics_file", str),
             "--log-jsonl": ("log_jsonl", str)}
    i = 0
    while i < len(argv) and argv[i].startswith("--"):
        name, eq, value = argv[i].partition("=")
        if name not in kinds:
            raise ValueError(f"unknown option {name} (see --help)")
        if not eq:
            i += 1
            if i >= len(argv):
                raise ValueError(f"{name} needs a value")
            value = argv[i]
        key, kind = kinds[name]
        try:
            v = kind(value)
        except ValueError:
            raise ValueError(f"{name}: not a number: {value!r}") from None
        if kind is not str and not v > 0:
            raise ValueError(f"{name}: expected a number > 0, got {value!r}")
        opts[key] = v
        i += 1
    if i >= len(argv):
        raise ValueError("no script given")
    return opts, argv[i:]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    try:
        opts, argv = _parse(argv)
    except ValueError as e:
        print(f"stoke doctor: {e}", file=sys.stderr)
        return 2
    script = argv[0]
    if not os.path.exists(script):
        print(f"stoke doctor: no such script: {script}", file=sys.stderr)
        return 2
    doctor = Doctor(**opts)
    doctor.install()
    atexit.register(doctor.finish)  # also when the script calls sys.exit

    terms = []

    def on_term(signum, frame):
        # The first one unwinds the script; a second one (timeout(1) and
        # process-group kills send two) must not cut the report short.
        terms.append(signum)
        if len(terms) == 1 and not doctor._done:
            raise _Terminated()

    try:
        signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread: SIGTERM stays the default
        pass
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None
                                                        else 1)
    except KeyboardInterrupt:
        code = 130
    finally:
        doctor.finish()
    return code


if __name__ == "__main__":
    sys.exit(main())
