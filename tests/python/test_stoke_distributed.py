"""Two ranks on the gloo backend, on this machine: every rank's clocks
gathered through torch.distributed, and the report naming the rank whose
slower dataset holds the others back.

The processes are started the way torchrun starts them (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE and LOCAL_RANK in the environment, read by
init_process_group("gloo")): Debian's torchrun (torch 1.13, Python 3.11)
crashes at start-up in elastic's stdout/stderr-redirect parsing whatever
the flags."""

import os
import re
import socket
import subprocess
import sys

from conftest import python_env

RANK_SCRIPT = r'''
import os, time
import torch
import torch.distributed as dist
from torch.utils.data import Dataset
import stoke

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()


class Sleepy(Dataset):
    def __init__(self, delay):
        self.delay = delay

    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(self.delay)
        return torch.zeros(4), i


# Rank 1's samples cost 12x rank 0's.
loader = stoke.DataLoader(Sleepy(0.001 if rank == 0 else 0.012),
                          batch_size=8, num_workers=2)
for epoch in range(2):
    for x, y in loader:
        t = torch.ones(1)
        dist.all_reduce(t)  # the step's collective: the ranks meet here
        time.sleep(0.002)
text = loader.report(all_ranks=True)
rows = stoke.gather_stats(loader)
# A stoke source shards by torch.distributed's rank and world by default.
cfg = stoke.Loader(stoke.synthetic("tensor", samples=10, shape=(2,)),
                   batch_size=2).config
print(f"RANK {rank} LOADER {cfg['rank']} {cfg['world_size']} "
      f"{cfg['samples_per_epoch']}")
print(f"RANK {rank} ROWS {[r['rank'] for r in rows]}")
if rank == 0:
    print(text)
dist.destroy_process_group()
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_report_the_straggler(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = python_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                         RANK=str(rank), WORLD_SIZE="2",
                         LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen(
            [sys.executable, str(script)], cwd=tmp_path, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-4000:]
        outs.append(out)
    r0, r1 = outs
    for rank, out in enumerate(outs):
        assert f"RANK {rank} ROWS [0, 1]" in out
        # torch.distributed's rank and world; 10 samples over 2 ranks.
        assert f"RANK {rank} LOADER {rank} 2 5" in out
    assert "== all ranks (2) ==" in r0
    rows = re.findall(r"^ +([01]) +\S+ +(\d+) +([\d.]+) +([\d.]+) +[\d.]+% +"
                      r"(\S+)$", r0, re.M)
    assert [r[0] for r in rows] == ["0", "1"], r0
    assert "slowest rank: 1" in r0, r0
    share = re.search(r"rank 0 spends ([\d.]+)% of its step waiting for "
                      r"rank 1", r0)
    assert share and float(share.group(1)) > 30, r0
    assert re.search(r"job verdict: starving \(rank 1's loader sets the "
                     r"pace", r0), r0
    assert "(rank 1)" in r0  # the straggler's advice
