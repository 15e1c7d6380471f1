#!/usr/bin/env python3
"""Prints deploy/test.sh's closing table: the wall time of each stage, the slowest ctest
entries of the run (from the JUnit files ctest wrote with --output-junit), and what each fault
run did (writes acknowledged, faults injected: the checker's summary line, kept in the JUnit
output of passed tests too). A shorter stage must not come from fewer writes under faults
unnoticed.

    deploy/test_report.py STAGES_FILE [JUNIT_XML ...] [--slowest N] [--cpu CPU_TSV]

STAGES_FILE has one line per stage: NAME<TAB>SECONDS<TAB>STATUS[<TAB>NOTE], in run order (the
last one deploy/test.sh writes is the whole run's wall time).
A JUnit file that is missing (its stage did not run) is skipped. CPU_TSV is what
deploy/test_cpu.py counted: the CPU-seconds of each test (a column of the slowest entries) and
the tests that used most.
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

import test_cpu


def fmt(seconds):
    seconds = float(seconds)
    m, s = divmod(int(round(seconds)), 60)
    return f"{m:d}:{s:02d}"


def read_stages(path):
    stages = []
    if not os.path.exists(path):
        return stages
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                stages.append((parts[0], float(parts[1]), parts[2],
                               parts[3] if len(parts) > 3 else ""))
    return stages


def read_cases(paths):
    cases = []
    for path in paths:
        if not os.path.exists(path):
            continue
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            print(f"test_report: {path}: {e}", file=sys.stderr)
            continue
        tag = os.path.basename(path).removesuffix(".xml")
        for case in root.iter("testcase"):
            status = case.get("status", "run")
            if case.find("failure") is not None:
                status = "FAILED"
            elif case.find("skipped") is not None or status == "notrun":
                status = "skipped"
            else:
                status = "passed"
            out = "".join(e.text or "" for e in case.iter("system-out"))
            m = re.findall(r"fault_test: acknowledged=(\d+) faults=(\d+)", out)
            cases.append((float(case.get("time", "0") or 0), case.get("name", "?"), tag, status,
                          m[-1] if m else None))
    return cases


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stages")
    p.add_argument("junit", nargs="*")
    p.add_argument("--slowest", type=int, default=10)
    p.add_argument("--cpu", help="deploy/test_cpu.py's file: CPU-seconds per test")
    a = p.parse_args()
    cpu = test_cpu.read(a.cpu) if a.cpu else {}

    stages = read_stages(a.stages)
    print("deploy/test.sh: where the time went")
    print(f"  {'stage':<22} {'wall':>7}  {'result':<8} note")
    for name, secs, status, note in stages:
        print(f"  {name:<22} {fmt(secs):>7}  {status:<8} {note}")

    cases = read_cases(a.junit)
    if cases:
        cases.sort(key=lambda c: -c[0])
        print(f"  slowest {min(a.slowest, len(cases))} of {len(cases)} ctest entries"
              f"{' (and the CPU each used, m:ss)' if cpu else ''}:")
        for secs, name, tag, status, _ in cases[:a.slowest]:
            used = f"  {fmt(cpu[name]):>6} CPU" if name in cpu else ""
            print(f"  {fmt(secs):>7}  {name:<48} {tag:<10} {status:<8}{used}")
        runs = [c for c in cases if c[4] is not None]
        if runs:
            total = sum(int(c[4][0]) for c in runs)
            print(f"  fault runs: {total:,} writes acknowledged under faults in all")
            for secs, name, _, _, (acked, faults) in sorted(runs, key=lambda c: c[1]):
                print(f"  {fmt(secs):>7}  {name:<48} {int(acked):>9,} writes, {faults} faults")
        if cpu:
            test_cpu.show(a.cpu, a.slowest)
        failed = [c for c in cases if c[3] == "FAILED"]
        for secs, name, tag, _, _ in failed:
            print(f"  FAILED   {name} ({tag}, {fmt(secs)})")


if __name__ == "__main__":
    main()
