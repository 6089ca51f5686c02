"""worker_type="auto" against both fixed modes (docs/dataloader.md,
"worker_type='auto'"): the wall time of E whole epochs of stoke.DataLoader
at W=2, batch 8, on three datasets (pure Python, about 0.4 ms of bytecode
a sample; time.sleep(4 ms); a tensor of one int), with and without
persistent_workers, the three modes alternating within each round (one
process; the rounds reverse the order).  For each: every round's seconds,
auto's decisions, and auto's best over the best fixed mode's.

    PYTHONPATH=build-release/python python3 bench/autoswitch.py [E [ROUNDS]]

About 30 s on 2 cores at E=5, ROUNDS=2."""

import sys
import time

import torch

import stoke


class PurePython(torch.utils.data.Dataset):
    def __len__(self):
        return 240

    def __getitem__(self, i):
        s = 0
        for k in range(25000):
            s += k
        return torch.tensor([i, s % 7])


class Sleepy(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.tensor([i])


class Tiny(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.tensor([i])


def run(ds, worker_type, persistent, epochs):
    dl = stoke.DataLoader(ds(), batch_size=8, num_workers=2,
                          worker_type=worker_type,
                          persistent_workers=persistent)
    t0 = time.perf_counter()
    for _ in range(epochs):
        for _b in dl:
            pass
    t = time.perf_counter() - t0
    kinds = ""
    if worker_type == "auto":
        kinds = ",".join(f"{h['kind']}@{h['epoch']}"
                         for h in dl.stats()["auto"]["decisions"])
    dl.close()
    return t, kinds


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    res = {}
    for r in range(rounds):
        for ds in (PurePython, Sleepy, Tiny):
            for p in (False, True):
                order = ("thread", "process", "auto")
                for wt in (order if r % 2 == 0 else order[::-1]):
                    t, k = run(ds, wt, p, epochs)
                    res.setdefault((ds.__name__, p), {}).setdefault(
                        wt, []).append((t, k))
    print(f"{epochs} epochs, W=2, batch 8, {rounds} rounds (seconds)")
    for (name, p), d in res.items():
        best = {wt: min(x[0] for x in v) for wt, v in d.items()}
        cells = "  ".join(
            f"{wt} " + "/".join(f"{x[0]:.3f}" for x in d[wt])
            for wt in ("thread", "process", "auto"))
        print(f"{name:10s} persistent={p!s:5s} {cells}  "
              f"[{' '.join(x[1] for x in d['auto'])}]  auto/best fixed "
              f"{best['auto'] / min(best['thread'], best['process']):.2f}")


if __name__ == "__main__":
    main()
