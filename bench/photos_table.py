#!/usr/bin/python3
"""Table for bench/photos.sh: images/s of RandomResizedCrop(224) from the
large originals, from --max-side 512 and 256 packs, and torchvision on the
originals; the speed-up over the originals against the 8x target at
--max-side 512 on 12 MP photos; the doctor's pre-resize advice.

  photos_table.py RAW_DIR CORPUS_DIR OUT_JSON"""
import glob
import json
import os
import sys

TARGET = 8.0


def load(path):
    with open(path) as f:
        return json.load(f)


def rate(d):
    return d["summary"]["samples_per_s"]


def main(raw, corpus, out_path):
    result = {"target_512_on_12mp": TARGET, "sizes": {}}
    print("%-6s %-22s %10s %9s %10s" % ("MP", "run", "images/s", "x orig",
                                        "MB"))
    for orig in sorted(glob.glob(os.path.join(raw, "stoke_*mp_orig.json"))):
        mp = os.path.basename(orig).split("_")[1]
        o = load(orig)
        base = rate(o)
        row = {"originals": base}
        mb = {}
        for side in (512, 256):
            pj = os.path.join(corpus, mp, "pack%d.json" % side)
            if os.path.exists(pj):
                p = load(pj)
                mb["orig"] = p["bytes_in"] / 1e6
                mb[side] = p["bytes"] / 1e6
        print("%-6s %-22s %10.1f %9s %10s" % (mp, "stoke, originals", base,
                                            "1.00", "%.0f" % mb.get("orig", 0)))
        for side in (512, 256):
            p = os.path.join(raw, "stoke_%s_s%d.json" % (mp, side))
            if not os.path.exists(p):
                continue
            r = rate(load(p))
            row["max_side_%d" % side] = r
            row["speedup_%d" % side] = r / base if base else None
            print("%-6s %-22s %10.1f %9.2f %10.1f" % (
                mp, "stoke, --max-side %d" % side, r, r / base,
                mb.get(side, 0)))
        t = os.path.join(raw, "torch_%s.json" % mp)
        if os.path.exists(t):
            tr = load(t)["summary"]["samples_per_s"]
            row["torch_originals"] = tr
            print("%-6s %-22s %10.1f %9.2f" % (mp, "torchvision, originals",
                                               tr, tr / base))
        prof = os.path.join(raw, "profile_%s.json" % mp)
        if os.path.exists(prof):
            adv = [a for a in load(prof).get("diagnosis", {}).get("advice", [])
                   if a.get("kind") == "presize"]
            if adv:
                row["advice"] = adv[0]["text"]
                row["advice_speedup"] = adv[0].get("speedup")
                print("       doctor: %s" % adv[0]["text"])
        result["sizes"][mp] = row
    twelve = result["sizes"].get("12mp", {})
    s512 = twelve.get("speedup_512")
    if s512 is not None:
        print("\n--max-side 512 on 12 MP: %.1fx the originals (target %.0fx): "
              "%s" % (s512, TARGET, "met" if s512 >= TARGET else "NOT met"))
    machine = None
    for p in glob.glob(os.path.join(raw, "stoke_*.json")):
        machine = load(p).get("machine")
        break
    result["machine"] = machine
    for name in ("loadavg_start.txt", "loadavg_end.txt"):
        p = os.path.join(raw, name)
        if os.path.exists(p):
            result[name[:-4]] = open(p).read().strip()
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main(*sys.argv[1:])
