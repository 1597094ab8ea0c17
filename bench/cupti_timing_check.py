#!/usr/bin/env python3
"""CUPTI's kernel times in the rank file against independent clocks (a GPU check).

Runs bench/cupti_timing (spin kernels of 10 us to 20 ms; launch i has i + 1 blocks) under
`rankscope profile` and compares each kernel the collector recorded with what the program
measured itself:
- duration between two bounds: at most the CUDA events' time around the launch on the same
  stream (+2 us of event resolution: the events bracket the kernel, and also hold the
  launch's own gap, a few us to tens of us), at least the kernel's own global-timer reading
  (-2 us: that timer ticks coarsely). Timestamps in TSC ticks taken for ns would be 2-4x too
  long, ns taken for ticks too short;
- placement on the rank file's clock: the kernel's start and end lie between the program's
  CLOCK_REALTIME readings before the launch and after the synchronization, within
  --clock-slack-us (50): the collector's conversion of CUPTI's timestamps to CLOCK_REALTIME.
The events' margin over the recorded time is reported, not judged.

Exits 0 when every launch passes, 1 when one misses, 2 when it cannot run. --self-test
checks the reading and comparing on hand-made inputs (ctest runs it; no GPU needed).
"""
import argparse
import json
import os
import sqlite3
import sys
import tempfile

from bench_env import BudgetExceeded, RunFailed, SelfTest, existing_directory, find_program, gzip_copy, \
    hand_made_rank_file, profile_ranks

EVENT_SLACK_NS = 2_000
GPU_TIMER_SLACK_NS = 2_000


def recorded_spins(rank_file, kernel_name):
    """{blocks: [(start_ns, end_ns), ...]} of the spin kernels in a rank file."""
    db = sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True)
    try:
        meta = dict(db.execute("SELECT key, value FROM meta"))
        if meta.get("cupti.status") != "on":
            raise RuntimeError(f"CUPTI was not on in {rank_file}: {meta.get('cupti.status', 'no status')}")
        rows = db.execute("SELECT k.grid_x, k.start_ns, k.end_ns FROM kernels k JOIN strings s ON s.id = k.name "
                          "WHERE s.value = ? ORDER BY k.start_ns", (kernel_name,)).fetchall()
    finally:
        db.close()
    spins = {}
    for blocks, start, end in rows:
        spins.setdefault(blocks, []).append((start, end))
    return spins


def compare(program, spins, clock_slack_ns):
    """(lines, ok): one line per launch that misses, then the summary lines."""
    lines = []
    margins = []
    worst_outside_ns = 0
    ours_total = events_total = 0
    for launch in program["launches"]:
        index, blocks = launch["index"], launch["blocks"]
        found = spins.get(blocks, [])
        if len(found) != 1:
            lines.append(f"  launch {index} ({launch['target_ns'] / 1e3:g} us, {blocks} blocks): "
                         f"{len(found)} kernels recorded with that grid, expected 1")
            continue
        start, end = found[0]
        ours, events, gpu = end - start, launch["event_ns"], launch["gpu_ns"]
        ours_total += ours
        events_total += events
        problems = []
        if ours > events + EVENT_SLACK_NS:
            problems.append(f"{ours} ns recorded, longer than the {events} ns between the CUDA events around it")
        if ours < gpu - GPU_TIMER_SLACK_NS:
            problems.append(f"{ours} ns recorded, shorter than the {gpu} ns the kernel spun")
        outside = max(launch["host_before_ns"] - start, end - launch["host_after_ns"], 0)
        if outside > clock_slack_ns:
            problems.append(f"{outside / 1e3:.1f} us outside the host's CLOCK_REALTIME bracket "
                            f"[{launch['host_before_ns']}, {launch['host_after_ns']}] of [{start}, {end}]")
        margins.append(events - ours)
        worst_outside_ns = max(worst_outside_ns, outside)
        if problems:
            lines.append(f"  launch {index} ({launch['target_ns'] / 1e3:g} us): " + "; ".join(problems))
    ok = not lines
    launches = len(program["launches"])
    lines.append(f"{launches} spin kernels of 10 us to 20 ms on {program.get('device', '?')}: total "
                 f"{ours_total / 1e6:.3f} ms recorded, {events_total / 1e6:.3f} ms by CUDA events "
                 f"(ratio {ours_total / events_total if events_total else float('nan'):.4f})")
    margins.sort()
    margin = (f"events minus recorded: median {margins[len(margins) // 2] / 1e3:.1f} us, max {margins[-1] / 1e3:.1f} us"
              if margins else "no kernel matched")
    lines.append(f"{margin}; worst placement outside the host clock's bracket {worst_outside_ns / 1e3:.1f} us "
                 f"(slack {clock_slack_ns / 1e3:g} us)")
    return lines, ok


def self_test():
    """The reader and the comparison on a rank file and program output made by hand."""
    test = SelfTest("cupti_timing_check.py")
    expect = test.expect

    def launch(index, target, event, gpu, before, after):
        return {"index": index, "blocks": index + 1, "target_ns": target, "event_ns": event, "gpu_ns": gpu,
                "host_before_ns": before, "host_after_ns": after}

    program = {"device": "hand-made", "kernel": "spin", "launches": [
        launch(0, 10_000, 14_000, 10_050, 1_000_000, 1_100_000),
        launch(1, 20_000_000, 20_003_000, 20_000_100, 2_000_000, 22_100_000)]}
    with tempfile.TemporaryDirectory() as tmp:
        rank_file = os.path.join(tmp, "rank-0.sqlite")
        hand_made_rank_file(
            rank_file,
            "CREATE TABLE kernels(id INTEGER PRIMARY KEY, name INTEGER, grid_x INTEGER, start_ns INTEGER, "
            "end_ns INTEGER);"
            "INSERT INTO strings VALUES(1, 'spin'), (2, 'other');"
            # 11 us inside [1.0, 1.1] ms; 20.001 ms inside [2, 22.1] ms; a kernel of another name
            # with grid 1, and the warm-up launch (100 blocks), which the check ignores.
            "INSERT INTO kernels VALUES(1, 1, 1, 1010000, 1021000), (2, 1, 2, 2010000, 22011000), "
            "(3, 2, 1, 5, 6), (4, 1, 100, 100, 200);")
        spins = recorded_spins(rank_file, "spin")
        expect(spins == {1: [(1010000, 1021000)], 2: [(2010000, 22011000)], 100: [(100, 200)]},
               f"recorded_spins read {spins}")

        def verdict(changed):
            return compare(program, changed, 50_000)[1]

        expect(verdict(spins), "matching kernels fail")
        # Raw TSC ticks at 2.4 GHz taken for nanoseconds: every duration 2.4x too long.
        ticks = {b: [(s, s + int((e - s) * 2.4)) for s, e in v] for b, v in spins.items()}
        expect(not verdict(ticks), "durations 2.4x too long pass")
        # The right durations on a clock 200 us late: launch 0 ends 121 us after its bracket.
        late = {b: [(s + 200_000, e + 200_000) for s, e in v] for b, v in spins.items()}
        expect(not verdict(late), "kernels 121 us outside the host's bracket pass")
        # 40 us late: 21 us outside the bracket, within the slack.
        expect(verdict({b: [(s + 40_000, e + 40_000) for s, e in v] for b, v in spins.items()}),
               "kernels 21 us outside the host's bracket fail")
        shorter = {**spins, 2: [(2010000, 2010000 + 19_990_000)]}
        expect(not verdict(shorter), "a kernel shorter than it spun passes")
        expect(not verdict({1: spins[1]}), "a launch with no kernel passes")
        expect(not verdict({**spins, 1: spins[1] * 2}), "two kernels for one launch pass")
        # The 20 ms launch's events span 20.003 ms: 1 us more is event resolution, 3 us is not.
        expect(verdict({**spins, 2: [(2010000, 2010000 + 20_004_000)]}), "1 us more than the events fails")
        expect(not verdict({**spins, 2: [(2010000, 2010000 + 20_006_000)]}), "3 us more than the events passes")
        db = sqlite3.connect(rank_file)
        db.execute("UPDATE meta SET value = 'off: hand-made' WHERE key = 'cupti.status'")
        db.commit()
        db.close()
        try:
            recorded_spins(rank_file, "spin")
            expect(False, "a rank file without CUPTI is read")
        except RuntimeError:
            pass
    return test.finish()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build/release", help="a build tree or a GPU bundle")
    parser.add_argument("--clock-slack-us", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=3, help="launches of each length (1-5)")
    parser.add_argument("--keep", metavar="DIR", type=existing_directory,
                        help="keep the rank file and the program's timings here, gzipped")
    parser.add_argument("--self-test", action="store_true", help="check the comparison on hand-made inputs")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    rankscope = find_program(args.build_dir, "rankscope")
    program = find_program(args.build_dir, "cupti_timing")
    for path in (rankscope, program):
        if not os.path.exists(path):
            print(f"cupti_timing_check.py: {path} is missing (build the release preset with CUDA)", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        out = os.path.join(tmp, "launches.json")
        try:
            profile_ranks(rankscope, [program, out, "--repeats", str(args.repeats)], run_dir)
        except (RunFailed, BudgetExceeded) as error:
            print(getattr(error, "output", "").rstrip(), file=sys.stderr)
            print(f"cupti_timing_check.py: the profiled program failed ({error})", file=sys.stderr)
            return 2
        rank_file = os.path.join(run_dir, "rank-0.sqlite")
        if args.keep:
            gzip_copy(out, os.path.join(args.keep, "cupti-timing-launches.json.gz"))
            gzip_copy(rank_file, os.path.join(args.keep, "rankscope-cupti-timing-rank0.sqlite.gz"))
        with open(out) as f:
            launches = json.load(f)
        try:
            spins = recorded_spins(rank_file, launches["kernel"])
        except RuntimeError as error:
            print(f"cupti_timing_check.py: {error}", file=sys.stderr)
            return 1
    lines, ok = compare(launches, spins, int(args.clock_slack_us * 1000))
    print("\n".join(lines[:-1]))
    print(f"{lines[-1]}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
