"""Framework facts live on the backends: the rest of accelbench asks the registry.

The software stack a warm server holds, the versions the report shows, the sources behind
the shipped model facts and the calibrated step-time limits are attributes of each
backend; ``planning/shipped.py``, ``execution/shape.py`` and ``report/sections.py`` name
no framework, and a third framework's facts are read like the built-ins'.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.backends import get_backend
from accelbench.backends.registry import DEFAULT_FRAMEWORK, stack_packages
from accelbench.execution import shape
from accelbench.planning import shipped
from accelbench.spec import RunSpec
from accelbench.store import open_store
from tests.conftest import cli_env, run_cli
from tests.test_compare import make_result

SRC = Path(__file__).resolve().parents[1] / "src" / "accelbench"
TOYFW = str(Path(__file__).with_name("plugins") / "toyfw.py")

#: ``machine["software"]`` as ``devices.discovery.software_info`` writes it for each framework.
TORCH_SOFTWARE = {"accelbench": "0.4.0", "python": "3.11.9", "framework": "torch",
                  "torch": "2.4.0", "cuda": "12.4", "hip": None, "cudnn": 90100,
                  "mkldnn": True, "torch_threads": 2}
JAX_SOFTWARE = {"accelbench": "0.4.0", "python": "3.11.9", "framework": "jax",
                "jax": "0.4.35", "jaxlib": "0.4.36", "flax": "0.10.2", "optax": "0.2.4",
                "jax_backend": "cpu", "jax_platform_version": "<unknown>"}


def test_the_report_shows_the_versions_of_every_framework_in_its_records(
        tmp_path: Path) -> None:
    """A real store with a torch and a jax record: the report's machine section shows
    PyTorch's versions for one and JAX's (jax, jaxlib, Flax, Optax) for the other, in the
    HTML page and the Markdown summary."""
    db = tmp_path / "two.db"
    with open_store(str(db)) as st:
        for rid, framework, software in (("torch1", "torch", TORCH_SOFTWARE),
                                         ("jax1", "jax", JAX_SOFTWARE)):
            r = make_result(rid, framework=framework, device="cpu")
            st.save(dataclasses.replace(
                r, machine={**r.machine, "hostname": f"{framework}-box",
                            "software": software}))
    out = tmp_path / "rep"
    proc = run_cli("report", "--out", str(out), db=db)
    assert proc.returncode == 0, proc.stderr
    html = (out / "index.html").read_text()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    for shown in ("PyTorch 2.4.0", "CUDA 12.4", "cuDNN 90100", "torch threads 2",
                  "JAX 0.4.35", "jaxlib 0.4.36", "Flax 0.10.2", "Optax 0.2.4",
                  "JAX backend cpu"):
        assert shown in text, shown
    markdown = next(out.glob("*.md")).read_text()
    assert "JAX 0.4.35" in markdown and "Flax 0.10.2" in markdown
    assert "PyTorch 2.4.0" in markdown


def test_the_built_in_backends_declare_their_facts() -> None:
    """The facts the rest of accelbench once named per framework, on each backend."""
    torch, jax = get_backend("torch"), get_backend("jax")
    assert torch.stack_packages == ("torch",)
    assert jax.stack_packages == ("jax", "jaxlib", "flax", "optax")
    # The warm hub's list: every registered framework's packages, each once.
    assert stack_packages() == ("torch", "jax", "jaxlib", "flax", "optax")
    assert ("torch", "PyTorch") in torch.version_facts
    assert [k for k, _ in jax.version_facts][:4] == ["jax", "jaxlib", "flax", "optax"]
    assert torch.device_libraries == ("cuda", "hip", "cudnn")
    assert jax.device_libraries == ("jaxlib",)
    assert shape.shape_limits("jax", "cpu") == ("jax/cpu", jax.quiet_shape["cpu"])
    assert shape.shape_limits("pytorch", "cpu")[1] is torch.quiet_shape["cpu"]
    assert RunSpec(workload="lstm", batch_size=1).framework == DEFAULT_FRAMEWORK


def test_the_shipped_fingerprint_covers_the_backends_model_sources(
        monkeypatch: pytest.MonkeyPatch) -> None:
    backend = type(get_backend("jax"))
    assert shipped.fingerprint("jax") == shipped.table()["fingerprints"]["jax"]
    monkeypatch.setattr(backend, "model_sources", ())
    shipped.fingerprint.cache_clear()
    try:
        assert shipped.fingerprint("jax") is None  # no sources named: not a shipped one
        assert shipped.lookup("lstm", "tiny", "jax") is None
    finally:
        monkeypatch.undo()
        shipped.fingerprint.cache_clear()
    assert shipped.lookup("lstm", "tiny", "jax") is not None


def test_a_third_frameworks_facts_are_read_like_the_built_ins() -> None:
    """In a fresh interpreter: the toy framework's packages join the warm hub's list, its
    versions the report's machine section, its limits the step-time checks."""
    code = f"""
from accelbench.backends.registry import stack_packages
from accelbench.execution.shape import shape_limits
from accelbench.planning.shipped import fingerprint
from accelbench.report.sections import framework_versions
from accelbench.workloads.registry import load_plugin
load_plugin({TOYFW!r})
assert stack_packages()[-1] == "numpy", stack_packages()
key, limits = shape_limits("toyfw", "cpu")
assert key == "toyfw/cpu" and limits.q3_q1 == 1.6, (key, limits)
assert shape_limits("toyfw", "cuda:0")[0] == "*/*"
assert ("numpy (toyfw)", "1.0") in framework_versions({{"numpy": "1.0"}})
assert fingerprint("toyfw") is None
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=cli_env(), check=False, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


#: Modules outside backends/ that may name a framework, and how many times at most: the
#: registry's one default (DEFAULT_FRAMEWORK) and the store's facts about old stores
#: (records before the framework column were torch's).
STILL_NAMED = {"frameworks.py": 1, "store/schema.py": 1, "store/opbench.py": 2}
FRAMEWORK_NAMES = {"torch", "pytorch", "jax", "jaxlib", "flax", "optax", "PyTorch", "JAX"}


def test_no_module_outside_backends_names_a_framework() -> None:
    """A framework's name or package as a string constant (docstrings and comments aside)
    appears only in backends/: planning/shipped.py, execution/shape.py, report/sections.py
    and the framework defaults ask the registry."""
    found = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("backends/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lines = [n.lineno for n in ast.walk(tree)
                 if isinstance(n, ast.Constant) and n.value in FRAMEWORK_NAMES]
        if len(lines) > STILL_NAMED.get(rel, 0):
            found[rel] = sorted(lines)
    assert not found, f"framework names outside backends/ (ask the registry): {found}"


#: The places a framework name typed by a user (or written by a plugin) is normalised, and
#: how many calls each holds: the registry's own look-ups, the options' declarations (a
#: reference, not a call: ``RunChoices.framework``'s and ``ops``' ``canonical=``), a
#: ``RunSpec`` built through the API, the API's ``plan_suite``, the selectors of plans,
#: filters and ``compare``, and a plugin's ``@implements`` (the workload registry's own
#: look-ups take the key). Everything below them trusts the registry key
#: (``isolation/ask``, the planners, ``check_implemented``).
NORMALISED_AT = {"frameworks.py": 2, "spec.py": 1, "planning/plan.py": 1,
                 "planning/suites.py": 1, "workloads/registry.py": 1,
                 "report/compare/select.py": 1}


def _normalise_calls() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", getattr(n.func, "attr", None)) in
                 ("normalize_framework", "registered_framework")]
        if calls:
            found[path.relative_to(SRC).as_posix()] = len(calls)
    return found


def test_a_framework_name_is_normalised_only_where_it_enters() -> None:
    assert _normalise_calls() == NORMALISED_AT


@pytest.mark.parametrize("argv", [
    ["run", "lstm", "--framework", "PyTorch"],
    ["suite", "quick", "--framework", "pytorch"],
    ["ops", "--framework", "PYTORCH"],
    ["roofline", "--model", "lstm", "--framework", "pytorch"],
])
def test_an_alias_typed_on_the_command_line_arrives_as_the_registry_key(
        argv: list[str]) -> None:
    from accelbench.cli import build_parser
    from accelbench.cli.args import canonical_options

    args = build_parser().parse_args(argv)
    canonical_options(args)  # what the CLI does once the plugins are loaded
    assert args.framework == "torch"


def test_an_unknown_framework_is_refused_before_anything_runs() -> None:
    from accelbench.cli import build_parser
    from accelbench.cli.args import canonical_options
    from accelbench.errors import ConfigError

    args = build_parser().parse_args(["ops", "--framework", "mxnet"])
    with pytest.raises(ConfigError, match="unknown framework 'mxnet'"):
        canonical_options(args)


def test_an_alias_given_to_the_api_arrives_as_the_registry_key() -> None:
    from accelbench.spec import RunChoices
    from accelbench.workloads.registry import check_implemented

    choices = RunChoices(framework="PyTorch")
    assert choices.framework == "torch"
    spec = RunSpec(workload="lstm", size="tiny", batch_size=4, framework="pytorch")
    assert spec.framework == "torch"
    assert check_implemented("lstm", choices.framework) == "torch"
