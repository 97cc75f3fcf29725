"""A hostile user's bad invocations, replayed: each is refused up front with exit 2, exactly
one line on stderr, no traceback, and the store byte-for-byte unchanged.

Every invocation runs as a real ``accelbench`` subprocess against its own copy of a store
holding a few results, so one that wrongly writes is caught by its own file hash. They run
in parallel (a thread pool over subprocesses) and each is reported as its own test.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import cli_env, cli_process, seed_store

TESTS = Path(__file__).resolve().parent
EXIT_PLUGIN = str(TESTS / "plugins" / "exits_at_import.py")
RAISE_PLUGIN = str(TESTS / "plugins" / "raises_at_import.py")
#: A workload with neither a dataset layout nor a dataset of its own.
NO_LAYOUT_PLUGIN = str(TESTS.parent / "examples" / "custom_workload.py")
EVIL_PLUGIN = str(TESTS / "plugins" / "evil_name.py")
HARD_EXIT_PLUGIN = str(TESTS / "plugins" / "hard_exit_at_import.py")
HANG_PLUGIN = str(TESTS / "plugins" / "hangs_at_import.py")

NAN, INF = "nan", "inf"
BIG = str(10**23)

# (id, argv). {file} is a regular file, {dir} a directory, both inside the case's own tmp dir.
BAD: list[tuple[str, list[str]]] = [
    # ---- top level
    ("no-command", []),
    ("unknown-command", ["bogus"]),
    ("unknown-global-option", ["--nope", "list"]),
    ("db-empty", ["--db", "", "results"]),
    ("db-blank", ["--db", "  ", "results"]),
    ("db-parent-is-file", ["--db", "{file}/x.db", "results"]),
    ("db-under-proc", ["--db", "/proc/accelbench/x.db", "run", "lstm", "--size", "tiny"]),
    ("db-is-directory", ["--db", "{dir}", "results"]),
    ("db-missing-file-results", ["--db", "{dir}/missing.db", "results"]),
    ("db-not-a-database", ["--db", "{file}", "results"]),
    ("db-bad-url", ["--db", "nosuchdialect://x/y", "results"]),
    ("db-empty-after-subcommand", ["results", "--db", ""]),
    ("plugin-missing-file", ["--plugin", "/nonexistent/plugin.py", "list"]),
    ("plugin-missing-module", ["--plugin", "no_such_module_xyz", "list"]),
    ("plugin-empty", ["--plugin", "", "list"]),
    ("plugin-sys-exit", ["--plugin", EXIT_PLUGIN, "list"]),
    ("plugin-raises", ["--plugin", RAISE_PLUGIN, "list"]),
    ("plugin-sys-exit-after-subcommand", ["results", "--plugin", EXIT_PLUGIN]),
    ("plugin-raises-run", ["--plugin", RAISE_PLUGIN, "run", "lstm", "--size", "tiny"]),
    ("plugin-os-exit-0", ["--plugin", HARD_EXIT_PLUGIN, "list"]),
    ("plugin-os-exit-0-run", ["run", "lstm", "--size", "tiny", "--plugin", HARD_EXIT_PLUGIN]),
    # ---- list / devices
    ("list-extra-arg", ["list", "extra"]),
    ("list-unknown-option", ["list", "--wide-open"]),
    ("devices-extra-arg", ["devices", "cpu"]),
    ("devices-unknown-option", ["devices", "--all"]),
    # ---- run: names
    ("run-no-workload", ["run"]),
    ("run-empty-workload", ["run", ""]),
    ("run-unknown-workload", ["run", "resnet5"]),
    ("run-unknown-size", ["run", "lstm", "--size", "huge"]),
    ("run-unknown-precision", ["run", "lstm", "--size", "tiny", "--precision", "fp8"]),
    ("run-unknown-framework", ["run", "lstm", "--size", "tiny", "--framework", "tensorflow"]),
    ("run-missing-device", ["run", "lstm", "--size", "tiny", "--device", "cuda:0"]),
    ("run-bad-device", ["run", "lstm", "--size", "tiny", "--device", "gpu"]),
    ("run-bad-device-index", ["run", "lstm", "--size", "tiny", "--device", "cuda:-1"]),
    ("run-tpu-with-torch", ["run", "lstm", "--size", "tiny", "--device", "tpu:0"]),
    ("run-unknown-option", ["run", "lstm", "--epochs", "3"]),
    ("run-extra-positional", ["run", "lstm", "vgg16"]),
    # ---- run: batch size
    ("run-batch-zero", ["run", "lstm", "--size", "tiny", "--batch-size", "0"]),
    ("run-batch-negative", ["run", "lstm", "--size", "tiny", "--batch-size", "-4"]),
    ("run-batch-float", ["run", "lstm", "--size", "tiny", "--batch-size", "2.5"]),
    ("run-batch-text", ["run", "lstm", "--size", "tiny", "--batch-size", "four"]),
    ("run-batch-huge", ["run", "lstm", "--size", "tiny", "--batch-size", BIG]),
    ("run-batch-int32-overflow", ["run", "lstm", "--size", "tiny", "--batch-size", str(2**31)]),
    ("run-batch-nan", ["run", "lstm", "--size", "tiny", "--batch-size", NAN]),
    # ---- run: measurement policy
    ("run-iterations-zero", ["run", "lstm", "--size", "tiny", "--iterations", "0"]),
    ("run-iterations-negative", ["run", "lstm", "--size", "tiny", "--iterations", "-1"]),
    ("run-iterations-huge", ["run", "lstm", "--size", "tiny", "--iterations", BIG]),
    ("run-iterations-float", ["run", "lstm", "--size", "tiny", "--iterations", "1.5"]),
    ("run-target-ci-zero", ["run", "lstm", "--size", "tiny", "--target-ci", "0"]),
    ("run-target-ci-one", ["run", "lstm", "--size", "tiny", "--target-ci", "1"]),
    ("run-target-ci-negative", ["run", "lstm", "--size", "tiny", "--target-ci", "-0.1"]),
    ("run-target-ci-nan", ["run", "lstm", "--size", "tiny", "--target-ci", NAN]),
    ("run-target-ci-inf", ["run", "lstm", "--size", "tiny", "--target-ci", INF]),
    ("run-target-ci-text", ["run", "lstm", "--size", "tiny", "--target-ci", "tight"]),
    ("run-max-time-zero", ["run", "lstm", "--size", "tiny", "--max-time", "0"]),
    ("run-max-time-negative", ["run", "lstm", "--size", "tiny", "--max-time", "-5"]),
    ("run-max-time-nan", ["run", "lstm", "--size", "tiny", "--max-time", NAN]),
    ("run-max-time-inf", ["run", "lstm", "--size", "tiny", "--max-time", INF]),
    ("run-max-time-huge", ["run", "lstm", "--size", "tiny", "--max-time", "1e30"]),
    ("run-timeout-zero", ["run", "lstm", "--size", "tiny", "--timeout", "0"]),
    ("run-timeout-negative", ["run", "lstm", "--size", "tiny", "--timeout", "-1"]),
    ("run-timeout-nan", ["run", "lstm", "--size", "tiny", "--timeout", NAN]),
    ("run-timeout-inf", ["run", "lstm", "--size", "tiny", "--timeout", INF]),
    ("run-timeout-minus-inf", ["run", "lstm", "--size", "tiny", "--timeout", "-inf"]),
    ("run-timeout-text", ["run", "lstm", "--size", "tiny", "--timeout", "soon"]),
    ("run-min-iterations-one", ["run", "lstm", "--size", "tiny", "--min-iterations", "1"]),
    ("run-min-iterations-huge", ["run", "lstm", "--size", "tiny", "--min-iterations", BIG]),
    ("run-max-iterations-zero", ["run", "lstm", "--size", "tiny", "--max-iterations", "0"]),
    ("run-max-below-min", ["run", "lstm", "--size", "tiny", "--min-iterations", "20",
                           "--max-iterations", "5"]),
    ("run-iterations-with-min", ["run", "lstm", "--size", "tiny", "--iterations", "5",
                                 "--min-iterations", "10"]),
    ("run-iterations-with-target-ci", ["run", "lstm", "--size", "tiny", "--iterations", "5",
                                       "--target-ci", "0.05"]),
    ("run-strict-without-max-time", ["run", "lstm", "--size", "tiny", "--strict-max-time"]),
    ("run-threads-zero", ["run", "lstm", "--size", "tiny", "--threads", "0"]),
    ("run-threads-negative", ["run", "lstm", "--size", "tiny", "--threads", "-2"]),
    ("run-threads-100000", ["run", "lstm", "--size", "tiny", "--threads", "100000"]),
    ("run-threads-above-cpus", ["run", "lstm", "--size", "tiny", "--threads",
                                str((os.cpu_count() or 1) * 64 + 1)]),
    ("run-threads-nan", ["run", "lstm", "--size", "tiny", "--threads", NAN]),
    # ---- run: energy options
    ("run-no-energy-with-tdp", ["run", "lstm", "--size", "tiny", "--no-energy",
                                "--cpu-tdp-w", "65"]),
    ("run-no-energy-with-interval", ["run", "lstm", "--size", "tiny", "--no-energy",
                                     "--meter-interval-ms", "5"]),
    ("run-no-energy-with-idle", ["run", "lstm", "--size", "tiny", "--no-energy",
                                 "--idle-s", "2"]),
    ("run-no-idle-with-idle-s", ["run", "lstm", "--size", "tiny", "--no-idle",
                                 "--idle-s", "2"]),
    ("run-tdp-zero", ["run", "lstm", "--size", "tiny", "--cpu-tdp-w", "0"]),
    ("run-tdp-negative", ["run", "lstm", "--size", "tiny", "--cpu-tdp-w", "-65"]),
    ("run-tdp-nan", ["run", "lstm", "--size", "tiny", "--cpu-tdp-w", NAN]),
    ("run-tdp-inf", ["run", "lstm", "--size", "tiny", "--cpu-tdp-w", INF]),
    ("run-tdp-huge", ["run", "lstm", "--size", "tiny", "--cpu-tdp-w", "100000"]),
    ("run-interval-tiny", ["run", "lstm", "--size", "tiny", "--meter-interval-ms", "0.01"]),
    ("run-interval-nan", ["run", "lstm", "--size", "tiny", "--meter-interval-ms", NAN]),
    ("run-interval-huge", ["run", "lstm", "--size", "tiny", "--meter-interval-ms", "1e9"]),
    ("run-counter-poll-zero", ["run", "lstm", "--size", "tiny", "--counter-poll-ms", "0"]),
    ("run-counter-poll-inf", ["run", "lstm", "--size", "tiny", "--counter-poll-ms", INF]),
    ("run-idle-negative", ["run", "lstm", "--size", "tiny", "--idle-s", "-1"]),
    ("run-idle-nan", ["run", "lstm", "--size", "tiny", "--idle-s", NAN]),
    ("run-idle-inf", ["run", "lstm", "--size", "tiny", "--idle-s", INF]),
    # ---- run: store
    ("run-readonly-json-conflict", ["run", "lstm", "--size", "tiny", "--json", "--json2"]),
    # ---- suite
    ("suite-no-name", ["suite"]),
    ("suite-unknown", ["suite", "quik"]),
    ("suite-empty-id", ["suite", "quick", "--suite-id", ""]),
    ("suite-blank-id", ["suite", "quick", "--suite-id", "   "]),
    ("suite-unknown-workload", ["suite", "quick", "--workload", "resnet5"]),
    ("suite-empty-workload", ["suite", "quick", "--workload", ""]),
    ("suite-unknown-precision", ["suite", "quick", "--precision", "int8"]),
    ("suite-size-fixed", ["suite", "quick", "--size", "paper"]),
    ("suite-bad-size", ["suite", "frameworks", "--size", "huge"]),
    ("suite-missing-device", ["suite", "quick", "--device", "cuda:3"]),
    ("suite-unknown-framework", ["suite", "quick", "--framework", "mxnet"]),
    ("suite-timeout-nan", ["suite", "quick", "--timeout", NAN]),
    ("suite-timeout-inf", ["suite", "quick", "--timeout", INF]),
    ("suite-max-time-nan", ["suite", "quick", "--max-time", NAN]),
    ("suite-iterations-zero", ["suite", "quick", "--iterations", "0"]),
    ("suite-threads-huge", ["suite", "quick", "--threads", "100000"]),
    ("suite-idle-nan", ["suite", "quick", "--idle-s", NAN]),
    ("suite-no-energy-tdp", ["suite", "quick", "--no-energy", "--cpu-tdp-w", "65"]),
    ("suite-json-wide", ["suite", "quick", "--json", "--wide"]),
    ("suite-dry-run-bad-workload", ["suite", "quick", "--dry-run", "--workload", "nosuch"]),
    ("suite-dry-run-timeout-nan", ["suite", "quick", "--dry-run", "--timeout", NAN]),
    # ---- power
    ("doctor-probe-negative", ["doctor", "--probe-s", "-1"]),
    ("doctor-probe-nan", ["doctor", "--probe-s", NAN]),
    ("doctor-unknown-meter", ["doctor", "--node-meter", "ipmx"]),
    ("doctor-empty-cmd", ["doctor", "--node-meter-cmd", ""]),
    ("run-energy-trials-zero", ["run", "lstm", "--size", "tiny", "--energy-trials", "0"]),
    ("run-settle-nan", ["run", "lstm", "--size", "tiny", "--settle-s", NAN]),
    ("run-boundary-unknown", ["run", "lstm", "--size", "tiny", "--boundary", "rack"]),
    ("run-boundary-node-no-meter", ["run", "lstm", "--size", "tiny", "--boundary", "node"]),
    ("run-node-meter-unknown", ["run", "lstm", "--size", "tiny", "--node-meter", "pdu9"]),
    ("run-repeats-zero", ["run", "lstm", "--size", "tiny", "--repeats", "0"]),
    ("suite-repeats-huge", ["suite", "quick", "--repeats", "1000000"]),
    ("power-interval-zero", ["power", "--interval-ms", "0"]),
    ("power-interval-negative", ["power", "--interval-ms", "-5"]),
    ("power-interval-float", ["power", "--interval-ms", "1.5"]),
    ("power-duration-zero", ["power", "--duration", "0"]),
    ("power-duration-negative", ["power", "--duration", "-1"]),
    ("power-duration-nan", ["power", "--duration", NAN]),
    ("power-duration-inf", ["power", "--duration", INF]),
    ("power-tdp-nan", ["power", "--cpu-tdp-w", NAN, "--duration", "1"]),
    ("power-tdp-zero", ["power", "--cpu-tdp-w", "0", "--duration", "1"]),
    # ---- results
    ("results-limit-zero", ["results", "--limit", "0"]),
    ("results-limit-negative", ["results", "--limit", "-3"]),
    ("results-limit-huge", ["results", "--limit", BIG]),
    ("results-limit-text", ["results", "--limit", "all"]),
    ("results-bad-status", ["results", "--status", "great"]),
    ("results-bad-precision", ["results", "--precision", "fp7"]),
    ("results-bad-framework", ["results", "--framework", "caffe"]),
    ("results-empty-suite-id", ["results", "--suite-id", ""]),
    ("results-json-csv", ["results", "--json", "--csv"]),
    ("results-extra-arg", ["results", "lstm"]),
    # ---- report
    ("report-no-out", ["report"]),
    ("report-out-is-file", ["report", "--out", "{file}"]),
    ("report-out-empty", ["report", "--out", ""]),
    ("report-limit-zero", ["report", "--out", "{dir}/r", "--limit", "0"]),
    ("report-bad-precision", ["report", "--out", "{dir}/r", "--precision", "fp9"]),
    ("report-price-nan", ["report", "--out", "{dir}/r", "--price-per-hour", NAN]),
    ("report-price-negative", ["report", "--out", "{dir}/r", "--price-per-hour", "-1"]),
    ("report-electricity-inf", ["report", "--out", "{dir}/r", "--electricity-price", INF]),
    ("report-carbon-nan", ["report", "--out", "{dir}/r", "--carbon-intensity", NAN]),
    ("report-config-missing", ["report", "--out", "{dir}/r", "--config", "/nonexistent.toml"]),
    ("report-config-not-toml", ["report", "--out", "{dir}/r", "--config", "{file}"]),
    ("report-misspelled-workload", ["report", "--out", "{dir}/r", "--workload", "lstmm"]),
    # ---- compare
    ("compare-no-args", ["compare"]),
    ("compare-one-arg", ["compare", "device=cpu"]),
    ("compare-bad-key", ["compare", "colour=red", "device=cpu"]),
    ("compare-empty-selector", ["compare", "", "device=cpu"]),
    ("compare-bad-precision", ["compare", "precision=fp32", "precision=fp7"]),
    ("compare-limit-zero", ["compare", "device=cpu", "device=cpu", "--limit", "0"]),
    ("compare-json-csv", ["compare", "device=cpu", "device=cpu", "--json", "--csv"]),
    ("compare-bad-framework", ["compare", "framework=torch", "framework=caffe"]),
    # ---- recommend
    ("recommend-no-workload", ["recommend"]),
    ("recommend-misspelled", ["recommend", "lstmm"]),
    ("recommend-top-zero", ["recommend", "lstm", "--top", "0"]),
    ("recommend-top-negative", ["recommend", "lstm", "--top", "-1"]),
    ("recommend-top-huge", ["recommend", "lstm", "--top", BIG]),
    ("recommend-min-throughput-nan", ["recommend", "lstm", "--min-throughput", NAN]),
    ("recommend-min-throughput-negative", ["recommend", "lstm", "--min-throughput", "-1"]),
    ("recommend-max-cost-inf", ["recommend", "lstm", "--max-cost-per-msample", INF]),
    ("recommend-bad-size", ["recommend", "lstm", "--size", "huge"]),
    ("recommend-bad-precision", ["recommend", "lstm", "--precision", "fp9"]),
    ("recommend-price-nan", ["recommend", "lstm", "--price-per-hour", NAN]),
    # ---- export
    ("export-no-format", ["export"]),
    ("export-bad-format", ["export", "--format", "xlsx"]),
    ("export-parquet-no-out", ["export", "--format", "parquet"]),
    ("export-out-is-dir", ["export", "--format", "csv", "--out", "{dir}"]),
    ("export-out-parent-is-file", ["export", "--format", "json", "--out", "{file}/x.json"]),
    ("export-out-empty", ["export", "--format", "csv", "--out", ""]),
    ("export-limit-zero", ["export", "--format", "csv", "--limit", "0"]),
    # ---- reference
    ("reference-unknown-workload", ["reference", "--workload", "nosuch"]),
    ("reference-bad-precision", ["reference", "--precision", "fp9"]),
    ("reference-batch-zero", ["reference", "--batch-size", "0"]),
    ("reference-batch-huge", ["reference", "--batch-size", BIG]),
    ("reference-json-csv", ["reference", "--json", "--csv"]),
    # ---- ops
    ("ops-bad-op", ["ops", "--op", "fft"]),
    ("ops-bad-size", ["ops", "--size", "huge"]),
    ("ops-bad-precision", ["ops", "--size", "tiny", "--precision", "int4"]),
    ("ops-bad-pass", ["ops", "--pass", "backward"]),
    ("ops-mnk-two", ["ops", "--size", "tiny", "--mnk", "8,8"]),
    ("ops-mnk-zero", ["ops", "--size", "tiny", "--mnk", "8,0,8"]),
    ("ops-mnk-text", ["ops", "--size", "tiny", "--mnk", "a,b,c"]),
    ("ops-matmul-sizes-negative", ["ops", "--size", "tiny", "--matmul-sizes", "-8"]),
    ("ops-iterations-zero", ["ops", "--size", "tiny", "--iterations", "0"]),
    ("ops-target-ci-nan", ["ops", "--size", "tiny", "--target-ci", NAN]),
    ("ops-max-time-inf", ["ops", "--size", "tiny", "--max-time", INF]),
    ("ops-threads-huge", ["ops", "--size", "tiny", "--threads", "100000"]),
    ("ops-missing-device", ["ops", "--size", "tiny", "--device", "cuda:0"]),
    ("ops-list-limit-zero", ["ops", "--list", "--limit", "0"]),
    ("ops-bad-framework", ["ops", "--framework", "tensorflow"]),
    # ---- peaks
    ("peaks-measure-and-no-measure", ["peaks", "--measure", "--no-measure"]),
    ("peaks-copy-mib-zero", ["peaks", "--no-measure", "--copy-mib", "0"]),
    ("peaks-copy-mib-huge", ["peaks", "--no-measure", "--copy-mib", BIG]),
    ("peaks-gemm-sizes-zero", ["peaks", "--no-measure", "--gemm-sizes", "0"]),
    ("peaks-bad-precision", ["peaks", "--no-measure", "--precision", "fp4"]),
    ("peaks-missing-device", ["peaks", "--no-measure", "--device", "cuda:1"]),
    ("peaks-max-time-nan", ["peaks", "--max-time", NAN]),
    # ---- roofline
    ("roofline-batch-zero", ["roofline", "--model", "lstm", "--batch-size", "0"]),
    ("roofline-batch-negative", ["roofline", "--model", "lstm", "--batch-size", "-1"]),
    ("roofline-repeats-zero", ["roofline", "--model", "lstm", "--repeats", "0"]),
    ("roofline-repeats-negative", ["roofline", "--model", "lstm", "--repeats", "-3"]),
    ("roofline-out-is-file", ["roofline", "--out", "{file}"]),
    ("roofline-out-empty", ["roofline", "--out", ""]),
    ("roofline-unknown-model", ["roofline", "--model", "resnet5", "--out", "{dir}/rf"]),
    ("roofline-bad-size", ["roofline", "--model", "lstm", "--size", "huge",
                           "--out", "{dir}/rf"]),
    ("roofline-bad-precision", ["roofline", "--model", "lstm", "--precision", "fp7",
                                "--out", "{dir}/rf"]),
    ("roofline-threads-zero", ["roofline", "--model", "lstm", "--threads", "0"]),
    ("roofline-missing-device", ["roofline", "--device", "cuda:0", "--out", "{dir}/rf"]),
    # ---- data parallel, fast paths, fleet (issues 12, 13)
    ("run-nproc-zero", ["run", "lstm", "--size", "tiny", "--nproc-per-node", "0"]),
    ("run-nnodes-without-endpoint", ["run", "lstm", "--size", "tiny", "--nnodes", "2"]),
    ("run-bad-endpoint", ["run", "lstm", "--size", "tiny", "--rdzv-endpoint", "nohost"]),
    ("run-node-rank-too-big", ["run", "lstm", "--size", "tiny", "--nnodes", "2",
                               "--node-rank", "2", "--rdzv-endpoint", "127.0.0.1:29999"]),
    ("run-bad-dist-backend", ["run", "lstm", "--size", "tiny", "--dist-backend", "mpi"]),
    ("run-channels-last-rnn", ["run", "lstm", "--size", "tiny", "--channels-last"]),
    ("run-compile-jax", ["run", "lstm", "--size", "tiny", "--framework", "jax", "--compile"]),
    ("run-devices-torch", ["run", "lstm", "--size", "tiny", "--devices", "2"]),
    ("run-tp-splits-no-heads", ["run", "llm", "--size", "tiny", "--nproc-per-node", "3",
                                "--parallel", "tp"]),
    ("run-size-of-another", ["run", "resnet50", "--size", "seq512"]),
    ("suite-status-no-id", ["suite", "status"]),
    ("suite-status-unknown", ["suite", "status", "no-such-suite-id"]),
    ("suite-slurm-flag-local", ["suite", "quick", "--partition", "gpu"]),
    ("suite-scaling-no-workload", ["suite", "scaling"]),
    # issue 23: suite plans, resume, Slurm limits, options the suite would ignore
    ("suite-max-ranks-not-scaling", ["suite", "quick", "--max-ranks", "2"]),
    ("suite-slurm-time-out-of-range", ["suite", "quick", "--launcher", "slurm", "--time",
                                       "99:99:99"]),
    ("suite-slurm-dry-run-relative-db", ["--db", "rel.db", "suite", "quick", "--launcher",
                                         "slurm", "--dry-run"]),
    ("suite-resume-no-id", ["suite", "resume"]),
    ("suite-resume-unknown", ["suite", "resume", "no-such-suite-id"]),
    ("suite-resume-no-plan", ["suite", "resume", "seeded"]),
    ("suite-resume-two-ids", ["suite", "resume", "seeded", "--suite-id", "other"]),
    ("suite-id-control-char", ["suite", "quick", "--suite-id", "a\nb"]),
    ("suite-id-too-long", ["suite", "quick", "--suite-id", "x" * 129]),
    ("suite-modern-jax-compile", ["suite", "modern", "--framework", "jax", "--compile",
                                  "--dry-run"]),
    # ---- sweep (issue 14)
    ("sweep-no-knob", ["sweep", "lstm", "--size", "tiny"]),
    ("sweep-bad-limit", ["sweep", "lstm", "--size", "tiny", "--power-limits", "abc"]),
    ("sweep-negative-limit", ["sweep", "lstm", "--size", "tiny", "--power-limits", "-5"]),
    ("sweep-no-gpu", ["sweep", "lstm", "--size", "tiny", "--power-limits", "200"]),
    ("sweep-bad-slowdown", ["sweep", "lstm", "--size", "tiny", "--power-limits", "200",
                            "--max-slowdown", "2"]),
    ("sweep-unknown-workload", ["sweep", "lstmm", "--power-limits", "200"]),
    ("sweep-report-unknown", ["sweep-report", "no-such-suite"]),
    # ---- issue 23: options accepted and ignored before, now refused (item 7)
    ("sweep-report-not-a-sweep", ["sweep-report", "seeded"]),
    ("sweep-gpu-without-gpu-knob", ["sweep", "lstm", "--size", "tiny", "--cpu-power-limits",
                                    "50", "--gpu", "0"]),
    ("roofline-unknown-framework", ["roofline", "--framework", "tensorflow",
                                    "--out", "{dir}/rf"]),
    ("roofline-framework-without-model", ["roofline", "--framework", "jax",
                                          "--out", "{dir}/rf"]),
    ("roofline-size-without-model", ["roofline", "--size", "small", "--out", "{dir}/rf"]),
    ("roofline-precision-without-model", ["roofline", "--precision", "fp32",
                                          "--out", "{dir}/rf"]),
    ("roofline-batch-without-model", ["roofline", "--batch-size", "4", "--out", "{dir}/rf"]),
    ("roofline-repeats-without-model", ["roofline", "--repeats", "2", "--out", "{dir}/rf"]),
    ("roofline-timeout-without-model", ["roofline", "--timeout", "5", "--out", "{dir}/rf"]),
    ("roofline-tag-without-model", ["roofline", "--tag", "x", "--out", "{dir}/rf"]),
    ("run-rdzv-one-node", ["run", "lstm", "--size", "tiny", "--rdzv-endpoint",
                           "127.0.0.1:29500"]),
    ("run-rdzv-nnodes-one", ["run", "lstm", "--size", "tiny", "--nnodes", "1",
                             "--rdzv-endpoint", "127.0.0.1:29500"]),
    ("run-node-rank-one-node", ["run", "lstm", "--size", "tiny", "--node-rank", "0"]),
    ("suite-rdzv-one-node", ["suite", "quick", "--rdzv-endpoint", "127.0.0.1:29500"]),
    ("peaks-no-measure-gemm-sizes", ["peaks", "--no-measure", "--gemm-sizes", "64"]),
    ("peaks-no-measure-iterations", ["peaks", "--no-measure", "--iterations", "3"]),
    # ---- filters checked like run checks them (item 8)
    ("results-unknown-size", ["results", "--size", "enormous"]),
    ("results-unknown-device", ["results", "--device", "quantum"]),
    ("results-unknown-workload", ["results", "--workload", "nosuch"]),
    ("results-empty-workload", ["results", "--workload", ""]),
    ("results-unknown-framework-any-case", ["results", "--framework", "TensorFlow"]),
    ("export-unknown-device", ["export", "--format", "csv", "--device", "quantum"]),
    ("export-unknown-size", ["export", "--format", "json", "--size", "huge"]),
    ("report-unknown-size", ["report", "--out", "{dir}/r", "--size", "huge"]),
    ("report-unknown-device", ["report", "--out", "{dir}/r", "--device", "gpu9"]),
    ("compare-unknown-device-filter", ["compare", "device=cpu", "device=cpu",
                                       "--device", "quantum"]),
    ("compare-unknown-size-filter", ["compare", "device=cpu", "device=cpu", "--size", "xl"]),
    # ---- names and tags (item 9)
    ("plugin-markup-workload-name", ["--plugin", EVIL_PLUGIN, "list"]),
    ("run-tag-newline", ["run", "lstm", "--size", "tiny", "--tag", "a\nb"]),
    ("run-tag-escape", ["run", "lstm", "--size", "tiny", "--tag", "\x1b[31mred"]),
    ("run-tag-too-long", ["run", "lstm", "--size", "tiny", "--tag", "x" * 201]),
    ("run-tag-100000", ["run", "lstm", "--size", "tiny", "--tag", "x" * 100_000]),
    ("suite-tag-tab", ["suite", "quick", "--tag", "a\tb"]),
    ("roofline-tag-control", ["roofline", "--model", "lstm", "--tag", "a\rb",
                              "--out", "{dir}/rf"]),
    ("ops-tag-control", ["ops", "--size", "tiny", "--tag", "a\x07b"]),
    ("store-no-action", ["store"]),
    ("store-unknown-action", ["store", "repair"]),
    ("store-check-missing", ["--db", "{dir}/nowhere.db", "store", "check"]),
    ("store-check-not-a-db", ["--db", "{file}", "store", "check"]),
    # ---- data (issue 41): refused before anything is written
    ("data-no-action", ["data"]),
    ("data-unknown-action", ["data", "erase", "lstm"]),
    ("data-generate-unknown-workload", ["data", "generate", "bogus", "--size", "tiny"]),
    ("data-generate-no-layout", ["--plugin", NO_LAYOUT_PLUGIN, "data", "generate",
                                 "mlp_regressor", "--size", "tiny", "--out", "{dir}/d"]),
    ("data-generate-out-under-file", ["data", "generate", "lstm", "--size", "tiny", "--out",
                                      "{file}/d"]),
    ("train-no-recipe", ["train", "resnet50", "--size", "large"]),
    ("train-target-text", ["train", "transformer", "--target", "abc"]),
    ("train-accuracy-over-1", ["train", "resnet50", "--target", "1.5"]),
    ("train-framework-unknown", ["train", "transformer", "--framework", "tensorflow"]),
    ("train-zero-seeds", ["train", "transformer", "--seeds", "0"]),
    ("train-negative-max-time", ["train", "transformer", "--max-time", "-1"]),
    ("train-negative-idle", ["train", "transformer", "--idle-s", "-1"]),
    ("train-node-meter-cmd-missing", ["train", "transformer", "--node-meter", "cmd"]),
    ("train-unknown-node-meter", ["train", "transformer", "--node-meter", "pduu"]),
    ("sweep-to-target-batch", ["sweep", "transformer", "--to-target", "--batch-size", "64",
                               "--cpu-power-limits", "20"]),
    ("sweep-eta-without-to-target", ["sweep", "transformer", "--eta", "0.3",
                                     "--cpu-power-limits", "20"]),
    ("run-data-missing", ["run", "lstm", "--size", "tiny", "--data", "{dir}/none"]),
    ("run-data-is-file", ["run", "resnet50", "--size", "tiny", "--data", "{file}"]),
    ("run-data-empty", ["run", "resnet50", "--size", "tiny", "--data", "{dir}"]),
    ("run-loader-workers-synthetic", ["run", "lstm", "--size", "tiny", "--loader-workers",
                                      "1"]),
    ("run-data-jax-ranks", ["run", "lstm", "--size", "tiny", "--data", "generated",
                            "--framework", "jax", "--nproc-per-node", "2"]),
    ("run-analysis-ranks", ["run", "lstm", "--size", "tiny", "--data", "generated",
                            "--input-analysis", "--nproc-per-node", "2"]),
    ("sweep-data", ["sweep", "lstm", "--data", "generated", "--power-limits", "200"]),
    ("report-out-is-store-forced", ["report", "--out", "results.db", "--force"]),
    ("report-out-nonempty", ["report", "--out", ".", "--no-reference"]),
    ("roofline-out-is-store-forced", ["roofline", "--out", "results.db", "--force"]),
    ("roofline-out-nonempty", ["roofline", "--out", "."]),
    # ---- sinks (issue 27): refused before the store is opened or anything runs
    ("sink-mllog-empty", ["run", "lstm", "--size", "tiny", "--mllog", ""]),
    ("sink-mllog-parent-is-file", ["run", "lstm", "--size", "tiny", "--mllog", "{file}/x.log"]),
    ("sink-mllog-is-directory", ["suite", "quick", "--mllog", "{dir}"]),
    ("sink-pushgateway-no-scheme", ["run", "lstm", "--size", "tiny", "--pushgateway",
                                    "localhost:9091"]),
    ("sink-pushgateway-bad-port", ["suite", "quick", "--pushgateway", "http://h:99999"]),
    ("sink-wandb-project-alone", ["run", "lstm", "--size", "tiny", "--wandb-project", "x"]),
    ("sink-mlflow-empty", ["run", "lstm", "--size", "tiny", "--mlflow", ""]),
    ("sink-with-slurm", ["suite", "quick", "--launcher", "slurm", "--mllog", "x.log"]),
    ("power-prometheus-no-port", ["power", "--duration", "1", "--prometheus", "nohost"]),
    ("power-prometheus-port-0", ["power", "--duration", "1", "--prometheus", "127.0.0.1:0"]),
    # ---- issue 47: text no command takes (checked once, before any command parses)
    ("not-utf8-workload", ["run", "\udcff"]),
    ("not-utf8-tag-filter", ["results", "--tag", "a\udcffb"]),
    ("not-utf8-db", ["--db", "x\udcff.db", "results"]),
    ("long-component-db", ["--db", "/tmp/" + "a" * 300 + ".db", "results"]),
    ("long-component-out-report", ["report", "--out", "{dir}/" + "a" * 300]),
    ("long-component-out-roofline", ["roofline", "--out", "{dir}/" + "b" * 300]),
    ("long-component-out-export", ["export", "--format", "csv", "--out", "x" * 256 + ".csv"]),
    ("long-component-mllog", ["run", "lstm", "--size", "tiny", "--mllog", "m" * 300]),
    ("long-component-plugin", ["--plugin", "p" * 300 + ".py", "list"]),
    ("long-component-db-equals", ["results", "--db=" + "d" * 256]),
    ("cc-newline-suite-id", ["results", "--suite-id", "a\nb"]),
    ("cc-tab-suite-status", ["suite", "status", "a\tb"]),
    ("cc-nul-free-text", ["report", "--title", "a\x01b"]),
    ("cc-del-tag", ["run", "lstm", "--size", "tiny", "--tag", "a\x7fb"]),
    ("cc-c1-title", ["report", "--title", "a\x85b"]),
    ("cf-zero-width-space-suite-id", ["suite", "status", "a\u200bb"]),
    ("cf-rtl-override-title", ["report", "--title", "\u202egnp.exe"]),
    ("cf-bom-workload", ["results", "--workload", "\ufefflstm"]),
    ("zl-line-separator-suite-id", ["export", "--format", "csv", "--suite-id", "a\u2028b"]),
    ("zp-paragraph-separator-title", ["report", "--title", "a\u2029b"]),
    ("escape-title", ["report", "--title", "\x1b[2J\x1b[31mred"]),
    ("escape-currency", ["recommend", "--currency", "\x1b]0;pwned\x07"]),
    ("escape-equals-form", ["report", "--title=\x1b[31mred"]),
    ("digits-arabic-batch", ["run", "lstm", "--size", "tiny", "--batch-size", "\u0663\u0662"]),
    ("digits-fullwidth-repeats", ["run", "lstm", "--size", "tiny", "--repeats", "\uff13"]),
    ("digits-devanagari-iterations", ["suite", "quick", "--iterations", "\u0969"]),
    ("digits-fullwidth-limit", ["results", "--limit", "\uff15"]),
    ("digits-arabic-float", ["run", "lstm", "--size", "tiny", "--max-time", "\u0661.5"]),
    ("digits-fullwidth-sizes", ["ops", "--matmul-sizes", "\uff16\uff14"]),
    ("digits-fullwidth-power-limits", ["sweep", "lstm", "--power-limits", "\uff12\uff10\uff10"]),
    ("digits-superscript-price", ["report", "--price-per-hour", "\u00b2"]),
    # ---- issue 47: options given where they would do nothing
    ("ops-limit-without-list", ["ops", "--limit", "3"]),
    ("ops-list-with-two-ops", ["ops", "--list", "--op", "matmul", "--op", "lstm"]),
    ("ops-list-with-pass", ["ops", "--list", "--pass", "forward"]),
    ("ops-list-with-iterations", ["ops", "--list", "--iterations", "3"]),
    ("ops-list-with-no-store", ["ops", "--list", "--no-store"]),
    ("ops-list-with-size", ["ops", "--list", "--size", "tiny"]),
    ("ops-list-with-measure-peaks", ["ops", "--list", "--measure-peaks"]),
    ("reference-match-with-csv", ["reference", "--match", "--csv"]),
    ("run-dist-backend-one-rank", ["run", "lstm", "--size", "tiny", "--dist-backend", "nccl"]),
    ("suite-dist-backend-one-rank", ["suite", "quick", "--dist-backend", "gloo"]),
    ("suite-status-with-workload", ["suite", "status", "seeded", "--workload", "lstm"]),
    ("suite-status-with-iterations", ["suite", "status", "seeded", "--iterations", "3"]),
    ("suite-status-with-force", ["suite", "status", "seeded", "--force"]),
    ("suite-time-without-slurm", ["suite", "quick", "--time", "10"]),
    ("suite-slurm-folder-without-slurm", ["suite", "quick", "--slurm-folder", "{dir}/s"]),
    ("suite-cases-per-job-without-slurm", ["suite", "quick", "--cases-per-job", "2"]),
    ("compare-limit-ignored", ["compare", "precision=fp32", "precision=amp_bf16",
                               "--limit", "1"]),
    ("suite-dry-run-with-wide", ["suite", "quick", "--dry-run", "--wide"]),
    ("suite-dry-run-with-verbose", ["suite", "quick", "--dry-run", "-v"]),
    ("ops-matmul-backward", ["ops", "--size", "tiny", "--op", "matmul", "--pass",
                             "forward_backward"]),
    ("ops-mnk-without-matmul", ["ops", "--size", "tiny", "--op", "conv2d", "--mnk", "4,4,4"]),
    ("ops-sizes-without-matmul", ["ops", "--size", "tiny", "--op", "lstm", "--matmul-sizes",
                                  "64"]),
    ("ops-measure-peaks-no-store", ["ops", "--size", "tiny", "--measure-peaks", "--no-store"]),
    ("export-force-without-out", ["export", "--format", "csv", "--force"]),
    ("run-iterations-with-min-time", ["run", "lstm", "--size", "tiny", "--iterations", "3",
                                      "--min-time", "2"]),
    ("tag-filter-too-long", ["results", "--tag", "t" * 201]),
    ("tag-filter-too-long-export", ["export", "--format", "json", "--tag", "t" * 201]),
]

# (id, environment, argv): environment variables are checked like options (item 7).
BAD_ENV: list[tuple[str, dict[str, str], list[str]]] = [
    ("env-plugin-os-exit-0", {"ACCELBENCH_PLUGINS": HARD_EXIT_PLUGIN}, ["results"]),
    ("plugin-hangs-at-import", {"ACCELBENCH_PLUGIN_TIMEOUT_S": "0.5"},
     ["--plugin", HANG_PLUGIN, "run", "lstm", "--size", "tiny"]),
    ("env-plugin-hangs-at-import", {"ACCELBENCH_PLUGIN_TIMEOUT_S": "0.5",
                                    "ACCELBENCH_PLUGINS": HANG_PLUGIN}, ["suite", "quick"]),
    ("env-plugin-timeout-text", {"ACCELBENCH_PLUGIN_TIMEOUT_S": "soon"}, ["list"]),
    ("env-plugin-timeout-zero", {"ACCELBENCH_PLUGIN_TIMEOUT_S": "0"}, ["results"]),
    ("env-plugin-timeout-digits", {"ACCELBENCH_PLUGIN_TIMEOUT_S": "\uff15"}, ["results"]),
    ("env-db-escape", {"ACCELBENCH_DB": "\x1b[31m.db"}, ["results"]),
    ("env-db-long-component", {"ACCELBENCH_DB": "/tmp/" + "e" * 256}, ["results"]),
    ("env-count-timeout-text", {"ACCELBENCH_COUNT_TIMEOUT_S": "abc"}, ["list"]),
    ("env-count-timeout-negative", {"ACCELBENCH_COUNT_TIMEOUT_S": "-1"},
     ["run", "lstm", "--size", "tiny"]),
    ("env-count-timeout-zero", {"ACCELBENCH_COUNT_TIMEOUT_S": "0"}, ["results"]),
    ("env-count-timeout-nan", {"ACCELBENCH_COUNT_TIMEOUT_S": "nan"}, ["list"]),
    ("env-count-timeout-inf", {"ACCELBENCH_COUNT_TIMEOUT_S": "inf"}, ["list"]),
    ("env-db-blank", {"ACCELBENCH_DB": "   "}, ["run", "lstm", "--size", "tiny"]),
    ("env-plugins-blank", {"ACCELBENCH_PLUGINS": " "}, ["list"]),
    ("env-cache-dir-is-file", {"ACCELBENCH_CACHE_DIR": "{file}"}, ["list"]),
    ("env-cache-dir-blank", {"ACCELBENCH_CACHE_DIR": "  "}, ["results"]),
    ("env-powercap-root-is-file", {"ACCELBENCH_POWERCAP_ROOT": "{file}"},
     ["run", "lstm", "--size", "tiny"]),
    ("env-cpufreq-root-is-file", {"ACCELBENCH_CPUFREQ_ROOT": "{file}"}, ["results"]),
    ("env-warm-dir-is-file", {"ACCELBENCH_WARM_DIR": "{file}"},
     ["run", "lstm", "--size", "tiny"]),
    ("env-warm-dir-missing", {"ACCELBENCH_WARM_DIR": "/nonexistent/accelbench-warm"},
     ["suite", "quick"]),
    ("env-warm-idle-zero", {"ACCELBENCH_WARM_IDLE_S": "0"}, ["run", "lstm", "--size", "tiny"]),
    ("env-warm-idle-text", {"ACCELBENCH_WARM_IDLE_S": "soon"}, ["list"]),
]


def _preload(argv: list[str]) -> tuple[str, ...]:
    """What the invocation imports before it answers, for its CLI server to have imported
    already (tests/cliserver.py; each invocation is still a process of its own): ``train``
    plans its trainer (torch's) before it checks the rest of its options, and the example
    plugin defines a torch model; 2.4 s of CPU each, some 14 s of this file's 36."""
    return ("torch",) if argv[:1] == ["train"] or NO_LAYOUT_PLUGIN in argv else ()


@dataclass
class Outcome:
    returncode: int
    stderr: str
    stdout: str
    db_hash_before: str
    db_hash_after: str
    rows_before: int
    rows_after: int


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]  # noqa: S608
                   for (t,) in conn.execute(
                       "SELECT name FROM sqlite_master WHERE type='table'").fetchall())


def _invoke(root: Path, seed: Path, case_id: str, argv: list[str],
            env: dict[str, str] | None = None) -> Outcome:
    here = root / case_id
    (here / "dir").mkdir(parents=True)
    regular = here / "file"
    regular.write_text("not a database\n")
    db = here / "results.db"
    shutil.copy(seed, db)
    before, rows_before = _digest(db), _rows(db)

    def fill(a: str) -> str:
        return a.replace("{file}", str(regular)).replace("{dir}", str(here / "dir"))

    args = [fill(a) for a in argv]
    extra = {k: fill(v) for k, v in (env or {}).items()}
    proc = cli_process(args, env=cli_env(db, **extra), timeout=240, cwd=here,
                       preload=_preload(argv))
    return Outcome(proc.returncode, proc.stderr, proc.stdout, before, _digest(db),
                   rows_before, _rows(db))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    root = tmp_path_factory.mktemp("bad-input")
    seed = root / "seed.db"
    seed_store(seed)
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {cid: pool.submit(_invoke, root, seed, cid, argv) for cid, argv in BAD}
        futures.update({cid: pool.submit(_invoke, root, seed, cid, argv, env)
                        for cid, env, argv in BAD_ENV})
        yield {cid: f.result() for cid, f in futures.items()}


def test_the_table_is_large_and_covers_every_subcommand() -> None:
    from accelbench.cli import build_parser

    assert len(BAD) >= 150
    ids = [cid for cid, _ in BAD] + [cid for cid, _e, _a in BAD_ENV]
    assert len(set(ids)) == len(ids), "duplicate ids"
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[arg-type]
    covered = {argv[i] for _, argv in BAD for i in range(len(argv)) if argv[i] in commands}
    assert covered == commands, f"no bad invocation of {sorted(commands - covered)}"


@pytest.mark.parametrize("case_id", [cid for cid, _ in BAD] + [cid for cid, _e, _a in BAD_ENV])
def test_bad_invocation_is_refused_cleanly(outcomes: dict[str, Outcome], case_id: str) -> None:
    o = outcomes[case_id]
    lines = o.stderr.splitlines()
    assert o.returncode == 2, f"exit {o.returncode}; stderr: {o.stderr[-600:]}"
    assert "Traceback" not in o.stderr, o.stderr[-1500:]
    assert len(lines) == 1, f"{len(lines)} stderr lines: {o.stderr[-800:]}"
    assert lines[0].startswith("accelbench: error: "), lines[0]
    assert o.db_hash_after == o.db_hash_before, "the store file changed"
    assert o.rows_after == o.rows_before
