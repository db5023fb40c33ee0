"""The docs as a newcomer reads them: every link leads somewhere, every Python block of the
environment page runs as it stands, the examples run."""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Final

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CODE = re.compile(r"```(\w*)\n(.*?)```", re.S)


def links(page: Path) -> list[str]:
    text = CODE.sub("", page.read_text(encoding="utf-8"))
    return [m for m in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in m]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_leads_to_a_file_and_every_anchor_to_a_heading(page: Path) -> None:
    for link in links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.exists(), f"{page.name}: {link} leads nowhere"
        if anchor and target.suffix == ".md":
            headings = re.findall(r"(?m)^#+ (.+)$", target.read_text(encoding="utf-8"))
            slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
            assert anchor in slugs, f"{page.name}: {link}: no heading #{anchor} in {target.name}"


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("see [x](missing.md) and [y](https://example.org)\n```\n[z](no.md)\n```\n")
    assert links(page) == ["missing.md"]


def python_blocks(page: Path) -> list[str]:
    return [body for lang, body in CODE.findall(page.read_text()) if lang == "python"]


RUNNABLE: Final = ("docs/environment.md", "docs/run_directory.md", "README.md")
"""Pages whose Python blocks run as pasted (README's ONNX block in a folder holding the
file its comment says to export first)."""
ONNX_FILE: Final = "trained.onnx"


@pytest.mark.parametrize(
    ("page", "index"),
    [(page, i) for page in RUNNABLE for i in range(len(python_blocks(ROOT / page)))],
)
def test_every_python_block_of_the_reference_pages_runs(
    page: str, index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each block is self-contained: it runs in a fresh namespace, as a reader pastes it."""
    code = python_blocks(ROOT / page)[index]
    if ONNX_FILE in code:  # exported first, as the block's comment says
        pytest.importorskip("onnxruntime")
        from agents.integrations.onnx_export import export_onnx

        export_onnx("trained", tmp_path / ONNX_FILE)
        monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{page} block {index}", "exec"), {"__name__": "__main__"})


def test_the_vector_env_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("gymnasium.wrappers.vector")
    runpy.run_path(str(ROOT / "docs" / "examples" / "vector_masked_sampling.py"))
    out = capsys.readouterr().out
    assert "wins in" in out and "normalized observations: (8, 48) float32" in out


def test_the_observation_tables_are_the_layout_of_each_configuration() -> None:
    from coldiron_env.observation import flat_size, layout, layout_table

    page = (ROOT / "docs" / "environment.md").read_text()
    found = re.findall(
        r"<!-- layout: recall=(\w+) counting=(\w+) -->\n(.*?)\n<!-- /layout -->", page, re.S
    )
    assert len(found) == 4
    for recall, counting, table in found:
        options = {"recall": recall == "True", "counting": counting == "True"}
        assert table == layout_table(**options)
        slices = layout(**options)
        assert max(s.stop for s in slices.values()) == flat_size(**options)


def test_the_layout_helper_reads_a_real_observation() -> None:
    import gymnasium as gym

    import coldiron_env  # noqa: F401
    from coldiron_env.observation import layout

    env = gym.make("coldiron/ColdIron-v0", counting=True)
    obs, info = env.reset(seed=3)
    where = layout(counting=True)
    assert obs.shape == (where["bonus_risk"].stop,)
    assert obs[where["hand"]].sum() == len(info["hand"])
    assert round(float(obs[where["turn"]][0]) * 24) == info["turn"]


STALE = (
    (re.compile(r"\b\d+(\.\d+)?\s*(minutes?|min|seconds?|s|hours?|h)\b(?! ?[=:])", re.I), "a time"),
    (re.compile(r"seeds? seed\s*\.\.", re.I), "the seeds a stream replaced"),
)
"""What a config's comments must not say: how long it takes (machines differ several-fold;
docs/training.md's table is measured, with its CPU named), or which seeds it deals (the deal
streams decide: docs/environment.md#seeding)."""


def stale_claims(text: str) -> list[str]:
    comments = [line.partition("#")[2] for line in text.splitlines() if "#" in line]
    return [f"{why}: {c.strip()}" for c in comments for pattern, why in STALE if pattern.search(c)]


@pytest.mark.parametrize("config", sorted((ROOT / "configs").rglob("*.y*ml")), ids=lambda p: p.name)
def test_no_config_comment_claims_a_time_or_a_seed_range(config: Path) -> None:
    assert stale_claims(config.read_text(encoding="utf-8")) == []


def test_the_stale_claims_are_seen() -> None:
    text = "total: 3  # about 10 minutes on 2 cores\nepisodes: 5  # seeds seed .. seed+episodes-1\n"
    assert len(stale_claims(text)) == 2
    assert stale_claims("n_steps: 16  # x 1,024 envs = 16,384 steps a rollout\n") == []


def test_the_runs_guard_sees_a_file_made_or_changed(tmp_path: Path) -> None:
    """tests/conftest.py fails the run when anything under the checkout changed: its two
    helpers see a new file, a changed one, and nothing in the caches they leave out."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("product_conftest", ROOT / "tests/conftest.py")
    assert spec is not None and spec.loader is not None
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)  # by path: lab/tests has a conftest of its own
    checkout_files, written_between = guard.checkout_files, guard.written_between

    (tmp_path / "kept.txt").write_text("a")
    before = checkout_files(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "new.json").write_text("{}")
    (tmp_path / "kept.txt").write_text("ab")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_text("")
    assert written_between(before, checkout_files(tmp_path)) == ["kept.txt", "runs/new.json"]
