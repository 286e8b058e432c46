"""The README is the front door: what it promises must exist."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def test_every_test_the_readme_names_exists():
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", README)
    assert named, "the README's guarantees name their tests"
    missing = []
    for path, function in named:
        source = REPO / path
        if not source.is_file():
            missing.append(path)
        elif function and not re.search(rf"^def {function}\(", source.read_text(encoding="utf-8"), re.M):
            missing.append(f"{path}::{function}")
    assert not missing, f"the README names tests that do not exist: {missing}"


def test_every_file_the_readme_links_exists():
    links = re.findall(r"\]\(((?!https?:)[^)#]+)\)", README)
    assert [link for link in links if not (REPO / link).exists()] == []
