"""python3 -m stoke.doctor SCRIPT [ARGS...]

Run an unmodified training script with every torch.utils.data.DataLoader
iteration measured by stoke.TwoClock.  At exit it prints, for each loader,
its configuration, the wait/compute split per epoch, the verdict and the
escalation ladder's advice, and writes stoke-doctor/report.html (with one
JSON file per loader beside it, which `stoke report` also reads).

Each DataLoader gets one clock; its first epoch is the warm-up (worker
start-up), left out of the steady state.  With a GPU in
use the compute clock waits for the device first (torch.cuda.synchronize),
so that queued work is counted where it runs."""

import atexit
import os
import runpy
import sys

from .twoclock import TwoClock, _WeakIterable

OUT_DIR = "stoke-doctor"


class Doctor:
    def __init__(self, out_dir=OUT_DIR, warmup=None, stream=None):
        self.out_dir = out_dir
        self.warmup = warmup
        self.stream = stream or sys.stderr
        self.clocks = []   # in order of first iteration
        self._by_loader = {}
        self._orig_iter = None
        self._done = False

    def install(self):
        import torch.utils.data as tud
        DataLoader = tud.DataLoader
        self._orig_iter = orig = DataLoader.__iter__
        doctor = self

        def measured_iter(loader):
            clock = doctor._clock_for(loader, orig)
            return iter(clock)

        measured_iter.__wrapped__ = orig
        DataLoader.__iter__ = measured_iter
        self._cls = DataLoader

    def uninstall(self):
        if self._orig_iter is not None:
            self._cls.__iter__ = self._orig_iter
            self._orig_iter = None

    def _clock_for(self, loader, orig):
        key = id(loader)
        entry = self._by_loader.get(key)
        if entry is not None and entry[0]() is loader:
            return entry[1]
        import weakref
        n = len(self.clocks) + 1
        clock = TwoClock(_WeakIterable(loader, orig), warmup=self.warmup,
                         sync=self._sync(), describe=loader,
                         name=f"loader {n}: " + _describe(loader))
        self.clocks.append(clock)
        self._by_loader[key] = (weakref.ref(loader), clock)
        return clock

    @staticmethod
    def _sync():
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_available():
                return torch.cuda.synchronize
        except Exception:
            pass
        return None

    def finish(self):
        if self._done:
            return
        self._done = True
        self.uninstall()
        out = self.stream
        if not self.clocks:
            print("stoke doctor: no torch.utils.data.DataLoader was iterated",
                  file=out)
            return
        os.makedirs(self.out_dir, exist_ok=True)
        paths = []
        print(f"\nstoke doctor: {len(self.clocks)} DataLoader"
              f"{'s' if len(self.clocks) != 1 else ''} measured", file=out)
        for i, clock in enumerate(self.clocks, 1):
            print(f"\n== {clock.name}", file=out)
            print(_config_line(clock.info), file=out)
            print(clock.report(), file=out, end="")
            path = os.path.join(self.out_dir, f"loader-{i}.json")
            clock.save_json(path)
            paths.append(path)
        html = os.path.join(self.out_dir, "report.html")
        from . import _stoke
        try:
            _stoke.render_report(paths, html)
            print(f"\nstoke doctor: wrote {html}", file=out)
        except Exception as e:  # a report is not worth the script's exit code
            print(f"stoke doctor: no HTML report: {e}", file=out)


def _describe(loader):
    return (f"batch_size={getattr(loader, 'batch_size', None)}, "
            f"num_workers={getattr(loader, 'num_workers', None)}")


def _config_line(info):
    keys = ("batch_size", "num_workers", "pin_memory", "prefetch_factor",
            "persistent_workers", "drop_last")
    parts = [f"{k}={info[k]}" for k in keys if k in info]
    return "configuration: " + ", ".join(parts)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    script = argv[0]
    if not os.path.exists(script):
        print(f"stoke doctor: no such script: {script}", file=sys.stderr)
        return 2
    doctor = Doctor()
    doctor.install()
    atexit.register(doctor.finish)  # also when the script calls sys.exit
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
