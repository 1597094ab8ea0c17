#!/usr/bin/env python3
"""What the ci-dev round builds and runs after the asan round (scripts/test.sh).

  ci_dev_plan.py targets CI_DEV ASAN   the ninja outputs ci-dev builds: everything in `all`
                                       except the test programs the asan round already ran
  ci_dev_plan.py tests CI_DEV ASAN     ctest's -I list of the ci-dev tests the asan round
                                       did not run (by name)

A test that passed under the sanitizers is neither rebuilt nor run again: the libraries,
tools, viewer, benchmarks and CUDA host code are still built with warnings as errors.
"""
import json
import os
import re
import subprocess
import sys


def ran_test_programs(build):
    """Base names of the programs the tests of `build` run, where the build made them."""
    listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                             capture_output=True, text=True, check=True).stdout
    build = os.path.realpath(build)
    programs = set()
    for test in json.loads(listing)["tests"]:
        command = test.get("command") or []
        if command and os.path.realpath(command[0]).startswith(build + os.sep):
            programs.add(os.path.basename(command[0]))
    return programs


def outputs_of_all(build):
    """The outputs `all` builds, found through ninja's per-directory `dir/all` phonies."""
    leaves, pending, seen = [], ["all"], set()
    while pending:
        node = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        text = subprocess.run(["ninja", "-C", build, "-t", "query", node],
                              capture_output=True, text=True, check=True).stdout
        inputs = re.search(r"^  input: \S+\n((?:    .*\n)*)", text, re.M)
        for line in (inputs.group(1).splitlines() if inputs else []):
            name = line.strip()
            if name == "all" or name.endswith("/all"):
                pending.append(name)
            else:
                leaves.append(name)
    return leaves


def test_names(build):
    """ctest's number of each test, by name without gtest's " # GetParam() = ..." note,
    which prints addresses that differ from build to build."""
    listing = subprocess.run(["ctest", "--test-dir", build, "-N"],
                             capture_output=True, text=True, check=True).stdout
    return {re.sub(r"\s+#.*$", "", m.group(2)): int(m.group(1))
            for m in re.finditer(r"^\s*Test\s+#(\d+): (.*)$", listing, re.M)}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("targets", "tests"):
        sys.exit("usage: ci_dev_plan.py targets|tests CI_DEV_BUILD ASAN_BUILD")
    what, ci_dev, asan = sys.argv[1:]
    skipped = ran_test_programs(asan)
    if what == "targets":
        print("\n".join(leaf for leaf in outputs_of_all(ci_dev)
                        if os.path.basename(leaf) not in skipped))
        return
    theirs = test_names(asan)
    numbers = [number for name, number in sorted(test_names(ci_dev).items(), key=lambda kv: kv[1])
               if name not in theirs and name.removesuffix("_NOT_BUILT") not in skipped]
    # ctest -I START,END,STRIDE,N1,N2...: 0,0,0 selects only the numbers listed.
    print(",".join(str(n) for n in [0, 0, 0] + numbers))


if __name__ == "__main__":
    main()
