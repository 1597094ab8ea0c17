#!/usr/bin/env python3
"""Unit tests of the PyTorch hook's own arithmetic (collector/pytorch/rankscope_pytorch_hook.py),
without torch: Gloo's queue model (when a collective really started) and how a phase of the
training thread becomes compute less its waits for communication. The hook's recording runs
against a stand-in for the collector's rankscope_hook_* functions.

    pytorch_hook_test.py HOOK_DIR
"""
import os
import sys
import unittest

sys.path.insert(0, sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..",
                                                                           "collector", "pytorch"))
import rankscope_pytorch_hook as hook  # noqa: E402


class FakeCollector:
    def __init__(self):
        self.ranges = []

    def rankscope_hook_range(self, name, start, end, role, args):
        self.ranges.append((name.decode(), start, end, role))
        return 1

    def rankscope_hook_meta(self, key, value):
        return 1


def collective(sequence, issue, done=None, start=None):
    c = hook._Collective()
    c.sequence, c.issue, c.done, c.start = sequence, issue, done, start
    return c


class GlooQueueModel(unittest.TestCase):
    def group(self, recent):
        group = hook._Group.__new__(hook._Group)
        group.recent = recent
        return group

    def test_an_idle_group_starts_work_when_it_is_issued(self):
        work = collective(1, issue=100, done=150)
        self.assertEqual(self.group([work]).started(work), 100)

    def test_work_waits_for_one_of_the_two_threads(self):
        # Two earlier collectives occupy both threads until 300 and 400: the third, issued
        # at 120, starts when the first of them ends.
        first = collective(1, issue=100, done=300, start=100)
        second = collective(2, issue=110, done=400, start=110)
        third = collective(3, issue=120, done=500)
        self.assertEqual(self.group([first, second, third]).started(third), 300)

    def test_work_never_starts_before_the_one_issued_before_it(self):
        first = collective(1, issue=100, done=130, start=100)
        second = collective(2, issue=90, done=140)  # clocks of two threads: issue a hair earlier
        self.assertEqual(self.group([first, second]).started(second), 100)

    def test_an_unfinished_earlier_collective_does_not_push_the_start_past_the_end(self):
        first = collective(1, issue=100, start=100)  # its completion not seen yet
        second = collective(2, issue=110)
        third = collective(3, issue=120, done=200)
        self.assertLessEqual(self.group([first, second, third]).started(third), 200)


class PhasesLessWaits(unittest.TestCase):
    def setUp(self):
        self.collector = FakeCollector()
        hook._lib = self.collector
        hook._on_cuda = False
        hook._local.__dict__.clear()

    def tearDown(self):
        hook._lib = None

    def test_a_phase_without_waits_is_one_compute_range(self):
        hook._emit_phase("backward", 1000, 2000)
        self.assertEqual(self.collector.ranges, [("backward", 1000, 2000, hook.ROLE_COMPUTE)])

    def test_a_blocking_collective_is_cut_out_of_the_phase(self):
        hook._thread().waits.append((1200, 1500))
        hook._emit_phase("forward", 1000, 2000)
        self.assertEqual(self.collector.ranges, [("forward", 1000, 1200, hook.ROLE_COMPUTE),
                                                 ("forward", 1500, 2000, hook.ROLE_COMPUTE)])

    def test_ddp_waiting_for_its_last_all_reduce_is_not_compute(self):
        # Backward issued two all-reduces (the last at 1700) and then waited in DDP's
        # finalization until the last one completed at 1900.
        state = hook._thread()
        state.issued = [collective(1, issue=1300, done=1600), collective(2, issue=1700, done=1900)]
        hook._emit_phase("backward", 1000, 2000, issued_from=0)
        self.assertEqual(self.collector.ranges, [("backward", 1000, 1700, hook.ROLE_COMPUTE),
                                                 ("backward", 1900, 2000, hook.ROLE_COMPUTE)])

    def test_on_cuda_phases_are_annotations(self):
        hook._on_cuda = True
        hook._emit_phase("backward", 1000, 2000)
        self.assertEqual(self.collector.ranges, [("backward", 1000, 2000, hook.ROLE_ANNOTATION)])


if __name__ == "__main__":
    unittest.main()
