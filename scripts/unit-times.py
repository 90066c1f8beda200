#!/usr/bin/env python3
"""Adds up the `cargo --timings` reports a run collected (TACHYON_UNIT_TIMES=DIR, see
scripts/harness.sh): seconds per crate over every build of the run (each unit's wall time,
which is about its processor time except in a build at low priority), and the same by target
kind (lib, test, bin, build script), so the crates a cold run spends its compile time on are
named. Usage: scripts/unit-times.py DIR [TOP]."""
import collections
import json
import pathlib
import re
import sys


def units(report):
    text = report.read_text(errors="replace")
    found = re.search(r"const UNIT_DATA = (\[.*?\]);", text, re.S)
    return json.loads(found.group(1)) if found else []


def summary(report):
    """The report's profile and what it built (cargo's own summary table)."""
    text = report.read_text(errors="replace")
    cell = lambda name: (re.search(name + r":</td><td>([^<]*)", text) or [None, "?"])[1].strip()
    return cell("Profile"), cell("Targets")


def main():
    folder = pathlib.Path(sys.argv[1])
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    by_crate = collections.Counter()
    by_kind = collections.Counter()
    builds = collections.Counter()
    reports = sorted(folder.glob("*.html"))
    for report in reports:
        for unit in units(report):
            target = unit.get("target", "").strip()
            kind = "build script" if "build-script" in target else (
                "test" if "(test)" in target else "bin" if '"bin"' in target or '"example"' in target else "lib")
            seconds = float(unit["duration"])
            if seconds < 0.05:
                continue  # (a unit that was fresh: nothing compiled)
            by_crate[unit["name"]] += seconds
            by_kind[kind] += seconds
            builds[unit["name"]] += 1
    total = sum(by_crate.values())
    # (Each unit's wall time: for a build at low priority beside others, as the fuzz build
    # is, more than the processor time it took.)
    print(f"Compile units of {len(reports)} cargo builds: {total / 60:.1f} min of units' wall time in all")
    print("  " + ", ".join(f"{kind} {seconds / 60:.1f} min" for kind, seconds in by_kind.most_common()))
    print(f"  {'min':>6} {'built':>5}  crate")
    for name, seconds in by_crate.most_common(top):
        print(f"  {seconds / 60:6.2f} {builds[name]:5d}  {name}")
    by_report = sorted(((sum(float(u["duration"]) for u in units(r)), r) for r in reports), reverse=True)
    print(f"  The {min(top, len(by_report))} builds with the most compiler time (min, profile, what):")
    for seconds, report in by_report[:top]:
        profile, targets = summary(report)
        print(f"  {seconds / 60:6.2f}  {profile:8.8}  {targets[:110]}")


if __name__ == "__main__":
    main()
