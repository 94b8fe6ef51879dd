"""The README and docs/ say what the CLI is: commands, options, exit codes and links are read back here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main

from placement_cli.cli import app

try:
    from placement_cli.cli import ExitCode
except ImportError:  # the CLI as a package keeps it in its app module
    from placement_cli.cli.outcome import ExitCode

ROOT_DIR = Path(__file__).parent.parent
README = (ROOT_DIR / "README.md").read_text()
DOCS = ROOT_DIR / "docs"
PAGES = [ROOT_DIR / "README.md", *sorted(DOCS.glob("*.md"))]
ROOT = typer.main.get_command(app)
OPTION = re.compile(r"--[a-z][a-z-]*")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def table_after(text: str, heading: str) -> list[list[str]]:
    """The rows (header and rule left out) of the first table under HEADING."""
    section = text.split(f"\n{heading}\n", 1)[1]
    lines = section[section.index("\n|"):].strip("\n").splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append(cells(line))
    return rows


def page(name: str) -> str:
    return (DOCS / f"{name}.md").read_text()


def documented(text: str, heading: str = "## Options") -> str:
    """The first column of the options table under HEADING: the options and arguments it names."""
    return "\n".join(row[0] for row in table_after(text, heading))


def options(command) -> set[str]:
    found = set()
    for param in command.params:
        if param.param_type_name == "option":
            found.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
    return found


def arguments(command) -> set[str]:
    return {p.metavar for p in command.params if p.param_type_name == "argument"}


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_the_readme_is_an_entry_page() -> None:
    assert len(README.splitlines()) <= 400


def test_the_readmes_two_commands_are_there_and_ci_runs_the_test_command() -> None:
    blocks = [b.splitlines()[1:-1] for b in FENCE.findall(README)]
    assert ["pip install . && placement show"] in blocks
    assert ["pip install -e '.[test]' && pytest"] in blocks
    ci = (ROOT_DIR / ".ci" / "run").read_text().splitlines()
    assert "pip install -e '.[test]' && pytest" in ci


def test_every_command_is_in_the_readme_and_nothing_else() -> None:
    rows = table_after(README, "## Commands")
    assert {row[0] for row in rows} == {f"[`placement {name}`](docs/{name}.md)" for name in ROOT.commands}


@pytest.mark.parametrize("name", sorted(ROOT.commands))
def test_each_command_has_its_own_page(name: str) -> None:
    assert re.match(rf"# `placement {name}\b", page(name)), name
    assert f"](docs/{name}.md)" in README
    assert f"]({name}.md)" in page("README")


@pytest.mark.parametrize("name", sorted(ROOT.commands))
def test_each_commands_options_and_arguments_match(name: str) -> None:
    command = ROOT.commands[name]
    column = documented(page(name))
    assert set(OPTION.findall(column)) == options(command), column
    for argument in arguments(command):
        assert f"`{argument}`" in column, (argument, column)
    for metavar in {p.metavar for p in command.params if p.param_type_name == "option" and p.metavar}:
        assert metavar.replace("|", "\\|") in column, (metavar, column)


def test_root_options_match() -> None:
    column = documented(page("README"), "## Options of `placement` itself")
    assert set(OPTION.findall(column)) == options(ROOT) - {"--help"}


def test_the_exit_code_table_is_the_clis() -> None:
    codes = {int(row[0]) for row in table_after(README, "## Exit codes")}
    assert codes == {int(code) for code in ExitCode}


def test_every_page_of_docs_is_linked_from_its_index() -> None:
    index = page("README")
    for path in DOCS.glob("*.md"):
        if path.name != "README.md":
            assert f"]({path.name})" in index, path.name


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.relative_to(ROOT_DIR).as_posix())
def test_every_relative_link_resolves(path: Path) -> None:
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", path.read_text()))
    links = LINK.findall(text)
    assert links or path.name != "README.md", "no links found: the pattern is wrong"
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        assert file.is_file(), (path.name, link)
        if anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", FENCE.sub("", file.read_text()), re.MULTILINE)
            assert anchor in {slug(h) for h in headings}, (path.name, link)
