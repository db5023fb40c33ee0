"""Every numbered rule of RULES.md has at least one test marked ``@pytest.mark.rule("Rn")``."""

from __future__ import annotations

import re
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
RULES_MD = TESTS_DIR.parent / "RULES.md"
HEADING = re.compile(r"\*\*(R\d+)\s+—")
MARKER = re.compile(r"""(?:pytest\.mark\.)?\brule\(\s*["'](R\d+)["']\s*\)""")


def rules_in_rules_md() -> list[str]:
    text = RULES_MD.read_text(encoding="utf-8")
    return HEADING.findall(text)


def rules_marked_in_tests() -> set[str]:
    found: set[str] = set()
    for path in sorted(TESTS_DIR.glob("*.py")):
        if path.name == Path(__file__).name:
            continue
        found.update(MARKER.findall(path.read_text(encoding="utf-8")))
    return found


def test_rules_md_lists_numbered_rules() -> None:
    rules = rules_in_rules_md()
    assert rules, f"no '**Rn —' heading found in {RULES_MD}"
    numbers = [int(r[1:]) for r in rules]
    assert numbers == list(range(1, len(numbers) + 1)), f"rules not numbered R1..Rn: {rules}"
    assert len(set(rules)) == len(rules), f"a rule number repeats: {rules}"


def test_every_rule_has_a_marked_test() -> None:
    missing = [r for r in rules_in_rules_md() if r not in rules_marked_in_tests()]
    assert not missing, (
        f"rules of {RULES_MD.name} with no test marked @pytest.mark.rule(...) in "
        f"{TESTS_DIR}: {', '.join(missing)}"
    )


def test_no_marker_names_an_unknown_rule() -> None:
    unknown = sorted(rules_marked_in_tests() - set(rules_in_rules_md()))
    assert not unknown, f"tests are marked with rules absent from {RULES_MD.name}: {unknown}"
