"""Every rank's clocks through torch.distributed.

``stoke.gather_stats(loader)`` gathers each rank's statistics and verdict
with ``all_gather_object`` on the default group (gloo on CPUs, NCCL on
GPUs: torch.distributed's own transport, no distributed layer of stoke's)
and ``loader.report(all_ranks=True)`` prints them: one row per rank, the
slowest rank and the share of the step every other rank spends waiting for
it, and the verdict of the job as a whole.

In data-parallel training the ranks meet at every step's collectives
(the gradients' all-reduce), so a rank whose loader makes it wait longer for
its batch arrives late and every other rank waits for it inside the
collective: inside its *computing* clock, which its own doctor cannot tell
from real work.  Comparing the ranks' waiting clocks tells it: the rank that
waits longest for data is the straggler, and rank r spends (wait_slowest -
wait_r) per step waiting for it.  The job runs at the straggler's pace, so
the job's verdict is the straggler's."""

import socket

#: A rank whose wait per step is within this share of the step of the
#: least-waiting rank's is not a straggler.
STRAGGLER_MIN_SHARE = 0.05


def dist_rank_world():
    """(rank, world size) of torch.distributed when it is initialised, else
    None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


def gather_stats(loader, group=None):
    """Every rank's ``{"rank", "world_size", "host", "stats", "diagnosis"}``,
    in rank order, gathered through ``torch.distributed.all_gather_object``
    (a collective: every rank of the group must call it).  ``loader`` is a
    stoke.DataLoader, a stoke.Loader or a stoke.TwoClock."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("stoke.gather_stats: torch.distributed is not "
                           "initialised (call init_process_group first)")
    mine = {"rank": dist.get_rank(group), "host": socket.gethostname(),
            "world_size": dist.get_world_size(group),
            "stats": loader.stats(), "diagnosis": loader.diagnose()}
    out = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, mine, group=group)
    return out


def _per_step(row):
    st = row["stats"]
    steps = st.get("steps") or 0
    wait = st.get("wait_s", 0.0)
    comp = st.get("compute_s", 0.0)
    if not steps:
        return 0, 0.0, 0.0
    return steps, 1e3 * wait / steps, 1e3 * (wait + comp) / steps


def stragglers(rows):
    """The analysis behind the report: ``{"slowest": rank or None,
    "wait_ms": {rank: ms per step}, "step_ms": {...}, "waits_for_slowest":
    {rank: share of its step}, "verdict": the job's, "reason": ...}``."""
    wait, step = {}, {}
    for r in rows:
        _, w, s = _per_step(r)
        wait[r["rank"]], step[r["rank"]] = w, s
    measured = [r for r in rows if _per_step(r)[0] > 0]
    out = {"slowest": None, "wait_ms": wait, "step_ms": step,
           "waits_for_slowest": {}, "verdict": "unknown",
           "reason": "no rank has measured steps yet"}
    if not measured:
        return out
    slow = max(measured, key=lambda r: wait[r["rank"]])
    fast = min(measured, key=lambda r: wait[r["rank"]])
    sr = slow["rank"]
    gap = wait[sr] - wait[fast["rank"]]
    diag = slow.get("diagnosis") or {}
    out["verdict"] = diag.get("verdict", "unknown")
    if len(measured) > 1 and step[sr] > 0 and \
            gap >= STRAGGLER_MIN_SHARE * step[sr]:
        out["slowest"] = sr
        for r in measured:
            if r["rank"] != sr and step[r["rank"]] > 0:
                out["waits_for_slowest"][r["rank"]] = \
                    (wait[sr] - wait[r["rank"]]) / step[r["rank"]]
        out["reason"] = (f"rank {sr}'s loader sets the pace: "
                         f"{diag.get('reason', '')}")
    else:
        out["reason"] = (f"no straggler: every rank waits within "
                         f"{100 * STRAGGLER_MIN_SHARE:.0f}% of a step of the "
                         f"others; {diag.get('reason', '')}")
    return out


def ranks_report(rows):
    """The text of report(all_ranks=True)."""
    a = stragglers(rows)
    lines = [f"== all ranks ({len(rows)}) ==",
             "  rank  host                 steps   step ms  waiting ms  "
             "wait %  verdict"]
    for r in rows:
        steps, w, s = _per_step(r)
        st = r["stats"]
        verdict = (r.get("diagnosis") or {}).get("verdict", "unknown")
        lines.append(f"  {r['rank']:4d}  {r['host'][:19]:19s}  {steps:6d}  "
                     f"{s:8.2f}  {w:10.2f}  "
                     f"{100 * st.get('wait_ratio', 0.0):5.1f}%  {verdict}")
    sr = a["slowest"]
    if sr is not None:
        lines.append(f"  slowest rank: {sr}, waiting {a['wait_ms'][sr]:.2f} "
                     f"ms per step for its data; the others wait for it at "
                     f"the collectives (inside their computing clock):")
        for rank, share in sorted(a["waits_for_slowest"].items()):
            lines.append(f"    rank {rank} spends {100 * share:.1f}% of its "
                         f"step waiting for rank {sr}")
    else:
        lines.append("  slowest rank: none stands out")
    lines.append(f"  job verdict: {a['verdict']} ({a['reason']})")
    if sr is not None:
        advice = (next(r for r in rows if r["rank"] == sr).get("diagnosis")
                  or {}).get("advice", [])
        for i, adv in enumerate(advice[:3]):
            lines.append(f"    {i + 1}. (rank {sr}) {adv['text']}")
    return "\n".join(lines) + "\n"
