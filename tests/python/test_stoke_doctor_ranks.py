"""The doctor under two gloo ranks on this machine, started as torchrun
starts them (see test_stoke_distributed.py for why not torchrun itself):
`--steps N` ends both ranks at one agreed step (else the rank still
training would wait forever at the next all-reduce for the one that
stopped), each rank measures its own loader, and rank 0 prints the job's
table naming the rank whose slower dataset holds the other back.  Rank 1's
samples cost 12x rank 0's; the margin is the verdicts', not a time."""

import re
import socket
import subprocess
import sys

from conftest import python_env

RANK_SCRIPT = r'''
import time
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

dist.init_process_group("gloo")
rank = dist.get_rank()


class Long(Dataset):
    def __init__(self, delay):
        self.delay = delay

    def __len__(self):
        return 100000 * 4

    def __getitem__(self, i):
        time.sleep(self.delay)
        return torch.zeros(4), i


loader = DataLoader(Long(0.0005 if rank == 0 else 0.006), batch_size=4)
for x, y in loader:
    t = torch.ones(1)
    dist.all_reduce(t)  # the step's collective: the ranks meet here
    time.sleep(0.002)
print("NEVER HERE")
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_stop_together_and_rank0_prints_the_job(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = python_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                         RANK=str(rank), WORLD_SIZE="2",
                         LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "stoke.doctor", "--steps", "20",
             str(script)], cwd=tmp_path, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    errs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-4000:]
        assert "NEVER HERE" not in out
        errs.append(err)
    e0, e1 = errs
    assert "rank 1: 1 DataLoader measured" in e1, e1
    assert "rank 0 prints the job's table" in e1
    assert "verdict:" in e0 and "== the job, loader 1" in e0, e0
    assert "== all ranks (2) ==" in e0
    assert "slowest rank: 1" in e0, e0
    assert (tmp_path / "stoke-doctor" / "rank-0" / "loader-1.json").exists()
    assert (tmp_path / "stoke-doctor" / "rank-1" / "loader-1.json").exists()
    # Both ranks stopped at the same step: their measured counts differ by
    # at most what their warm-ups (each its own 10 steps and 5 s) did.
    steps = [int(re.search(r"steady state over part of an epoch \((\d+) "
                           r"steps", e)[1]) for e in (e0, e1)
             if "steady state" in e]
    assert steps and all(s > 0 for s in steps), e0
