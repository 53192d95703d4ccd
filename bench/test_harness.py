#!/usr/bin/env python3
"""bench/harness.py against figures worked by hand (run by ctest as BenchHarness, or: python3 bench/test_harness.py)."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def run(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert harness.main(list(argv)) == 0
    return out.getvalue()


class Paired(unittest.TestCase):
    # Rounds A = 100, 110, 90 and B = 50, 100, 60: ratios 2.0, 1.1, 1.5, so the median ratio is 1.5 (range
    # 1.1-2.0), while the ratio of the medians would be 100 / 60 = 1.667: pairing is not dividing medians.
    def test_median_of_per_round_ratios_by_hand(self):
        r = harness.paired([100, 110, 90], [50, 100, 60])
        self.assertEqual(r["rounds"], 3)
        self.assertAlmostEqual(r["median_ratio"], 1.5)
        self.assertAlmostEqual(r["min_ratio"], 1.1)
        self.assertAlmostEqual(r["max_ratio"], 2.0)
        self.assertEqual((r["a_median"], r["b_median"]), (100, 60))

    def test_times_divide_the_other_way(self):
        # Seconds: B / A, so 2 s against 1 s is 0.5x and 1 s against 3 s is 3x; median of (0.5, 3) is 1.75.
        r = harness.paired([2, 1], [1, 3], lower_is_better=True)
        self.assertAlmostEqual(r["median_ratio"], 1.75)
        self.assertEqual((r["min_ratio"], r["max_ratio"]), (0.5, 3.0))

    def test_unequal_rounds_are_refused(self):
        with self.assertRaises(ValueError):
            harness.paired([1, 2], [1])

    def test_command_line_prints_and_appends_one_json_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "sub", "results.jsonl")
            out = run("paired", "--bench", "toy", "--a-label", "new", "--b-label", "base", "--a", "100 110", "90",
                      "--b", "50", "100", "60", "--results", path, "--set", "shape=B", "--set", "steps=40")
            self.assertIn("toy: new / base median 1.500x over 3 paired round(s) (range 1.100-2.000)", out)
            self.assertEqual(len(out.splitlines()), 5)  # header, 3 rounds, summary
            run("paired", "--bench", "toy", "--a", "1", "--b", "2", "--results", path, "--no-table")
            with open(path) as f:
                lines = [json.loads(l) for l in f]
        self.assertEqual(len(lines), 2)
        first = lines[0]
        self.assertEqual((first["bench"], first["a"], first["b"], first["shape"], first["steps"]),
                         ("toy", "new", "base", "B", 40))
        self.assertEqual(first["a_values"], [100, 110, 90])
        self.assertAlmostEqual(first["median_ratio"], 1.5)
        for key in ("time", "commit", "load", "cpu", "cpus"):
            self.assertIn(key, first)
        self.assertAlmostEqual(lines[1]["median_ratio"], 0.5)


class Small(unittest.TestCase):
    def test_median_ratio_field_record(self):
        self.assertEqual(run("median", "3", "1 4", "2"), "2.5\n")  # even count: the mean of the middle two
        self.assertEqual(run("median", "--digits", "2", "1", "2", "4"), "2.00\n")
        self.assertEqual(run("ratio", "--digits", "3", "2", "3"), "0.667\n")
        self.assertEqual(run("field", 'progress\n{"a": 1}\n{"a": 2, "b": "x"}\n', "a"), "2\n")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.jsonl")
            run("record", "--results", path, '{"bench": "t", "round": 1}', '{"round": 2, "tokens": 5}')
            with open(path) as f:
                self.assertEqual(json.loads(f.read()), {"bench": "t", "round": 2, "tokens": 5})
            with open(os.path.join(d, "run.json"), "w") as f:
                json.dump({"parameters": 123}, f)
            self.assertEqual(run("field", "--file", os.path.join(d, "run.json"), "parameters"), "123\n")


if __name__ == "__main__":
    unittest.main()
