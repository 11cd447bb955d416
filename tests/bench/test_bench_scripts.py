#!/usr/bin/python3
"""The benchmarks survive a CPU without bf16 and record the ISA they measured, without running a
benchmark: bench/gpt2_small.py's wte side on a CPU whose bf16 mode falls back to float32 (a fake
`wte` that answers as wte does there) and its table with a bf16 side not run and a PyTorch side
that failed; bench/torch_bench.py's --isa caps and the ISA facts of a results file; and
bench/headline.py's row groups, one per ISA class. Needs no PyTorch (the scripts import it only in
their workers). Run by ctest with /usr/bin/python3 (WTE_SOURCE_DIR set)."""
import json
import os
import sys
import tempfile
import unittest

SRC = os.environ.get("WTE_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "bench"))

import gpt2_small  # noqa: E402
import headline  # noqa: E402
import torch_bench  # noqa: E402

ISA_ENV = torch_bench.ISA_VARIABLES + ("WTE_BENCH_ISA",)


def step(precision_ran, ms):
    """One step profile of `wte profile step --json` (the fields the benchmark reads)."""
    return {"matmul_precision": precision_ran, "step_ms": ms, "parameters": 124439808,
            "gemm_peak_gflops": 100.0, "model_flops": 1e12, "model_flops_causal": 0.8e12,
            "parts": [{"part": "attn_tiled_fwd", "ms": 10.0}, {"part": "lm_head", "ms": 50.0}]}


class Gpt2SmallWithoutBf16(unittest.TestCase):
    def test_a_bf16_request_that_ran_float32_is_keyed_by_what_was_asked(self):
        # wte profile step --matmul-precision f32,bf16 on an AVX2 CPU: both profiles say "f32".
        with tempfile.TemporaryDirectory() as tmp:
            fake = os.path.join(tmp, "wte")
            with open(fake, "w") as f:
                f.write("#!/usr/bin/python3\nimport json, sys\na = sys.argv\n"
                        "json.dump({'step': [%r, %r]}, open(a[a.index('--json') + 1], 'w'))\n"
                        % (step("f32", 900.0), step("f32", 910.0)))
            os.chmod(fake, 0o755)

            class Args:
                wte, config, steps = fake, "gpt2_small.ini", 1
            got = gpt2_small.run_wte(Args, 2, tmp, ["f32", "bf16"])
        self.assertEqual(sorted(got), ["bf16", "f32"])
        self.assertEqual(got["f32"]["step_ms"], 900.0)

    def test_the_table_says_which_side_did_not_run_and_why(self):
        class Args:
            pass
        wte = {1: [{"f32": step("f32", 1000.0)}], 2: [{"f32": step("f32", 600.0)}]}
        pt = {1: [{"step_ms": 1200.0, "parameters": 124439808}], 2: []}
        failed = {("torch", 2): "PyTorch worker failed: killed"}
        lines, head = gpt2_small.time_table(Args, {}, [1, 2], wte, pt, failed,
                                            "oneDNN's ISA here is avx2")
        text = "\n".join(lines)
        self.assertIn("| 1 | 1000 | 1200 | 1.20x", text)
        self.assertIn("not run | not run", text)
        self.assertIn("| 2 | 600 | failed |", text)
        self.assertIn("PyTorch at 2 thread(s) failed", text)
        self.assertIn("wte bf16: not run: oneDNN's ISA here is avx2", text)
        self.assertEqual(head, [], "no headline ratio from a side that failed")


class IsaCaps(unittest.TestCase):
    def setUp(self):
        self.saved = {k: os.environ.get(k) for k in ISA_ENV}

    def tearDown(self):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def test_isa_avx2_caps_onednn_highway_and_openblas_and_is_recorded(self):
        for k in ISA_ENV:
            os.environ.pop(k, None)
        p = torch_bench.argument_parser("doc")
        p.parse_args(["--isa", "avx2"])
        self.assertEqual(os.environ["ONEDNN_MAX_CPU_ISA"], "AVX2")
        self.assertEqual(os.environ["WTE_MAX_SIMD"], "AVX2")
        self.assertEqual(os.environ["OPENBLAS_CORETYPE"], "Haswell")
        facts = torch_bench.run_isa({"onednn_isa": "avx2", "highway_target": "AVX2"})
        self.assertEqual(facts["requested"], "avx2")
        self.assertEqual(facts["class"], "AVX2")
        self.assertEqual(facts["caps"]["WTE_MAX_SIMD"], "AVX2")

    def test_isa_classes(self):
        self.assertEqual(torch_bench.isa_class("avx512_core_amx"), "AMX")
        self.assertEqual(torch_bench.isa_class("avx512_core_bf16"), "AVX-512")
        self.assertEqual(torch_bench.isa_class("avx2"), "AVX2")

    def test_the_version_line_is_parsed(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake = os.path.join(tmp, "wte")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho 'wte 0.1.0 (git abc123)'\n"
                        "echo 'oneDNN 2.6.3 (runtime library; CPU ISA avx2)'\n"
                        "echo 'Highway 1.0.3 (SIMD target in force: SSE4; WTE_MAX_SIMD cap: SSE4)'\n")
            os.chmod(fake, 0o755)
            v = torch_bench.wte_versions(fake)
            self.assertFalse(torch_bench.wte_has_bf16_gemms(fake))
        self.assertEqual((v["onednn_isa"], v["highway_target"], v["highway_cap"]), ("avx2", "SSE4", "SSE4"))


class HeadlineGroups(unittest.TestCase):
    def write(self, d, name, kind, onednn_isa, started, value, isa=None):
        doc = {"kind": kind, "headline": [{"what": kind + " ratio", "value": value, "unit": "x"}],
               "cpu": {"model": "AMD EPYC", "family": "25", "model_number": "1", "cores": 2},
               "load_average_before": [1.0, 1.0, 1.0], "versions": {"onednn_isa": onednn_isa,
                                                                     "git_commit": "abc"},
               "started_utc": started}
        if isa:
            doc["isa"] = isa
        with open(os.path.join(d, name), "w") as f:
            json.dump(doc, f)

    def test_one_row_group_per_isa_class_avx2_first(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "loss-1.json", "loss", "avx512_core_bf16", "2026-01-01T00:00:00Z", 1.5)
            self.write(d, "loss-2.json", "loss", "avx2", "2026-01-02T00:00:00Z", 1.1,
                       {"requested": "avx2", "class": "AVX2"})
            self.write(d, "loss-3.json", "loss", "avx512_core_amx", "2026-01-03T00:00:00Z", 3.0)
            rows = headline.table(d, "bench/results").splitlines()
        groups = [r for r in rows if r.startswith("| **")]
        self.assertEqual(groups, ["| **AVX2** | | | | | | |", "| **AVX-512** | | | | | | |",
                                  "| **AMX** | | | | | | |"])
        avx2 = rows[rows.index(groups[0]) + 1]
        self.assertIn("1.1x", avx2)
        self.assertIn("capped with --isa avx2", avx2)


if __name__ == "__main__":
    unittest.main()
