"""The README's command forms, taken literally: every `pptmc ...` form it shows names a real command, and
every option it writes is one that command accepts; every command the CLI has is in the README."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from pptmc import cli

README = Path(__file__).resolve().parents[1] / "README.md"
FORMS = re.findall(r"`(pptmc [^`]*)`", README.read_text())
MODEL_OPTIONS = ("--mode", "--interleave", "--seed", "--no-coherence", "--hit-rates", "--layout", "--cpu-form",
                 "--contention")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Command name -> its parser (one level: `machines` has its own sub-commands)."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string a parser (and its sub-commands) accepts."""
    found = {s for a in parser._actions for s in a.option_strings}
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                found |= _options(sub)
    return found


def _alternatives(form: str) -> list[str]:
    """`pptmc machines list\\|show NAME` -> the command words of each alternative after `pptmc`."""
    words = form.replace("\\|", "|").split()
    return words[1].split("|") if len(words) > 1 else []


@pytest.mark.parametrize("form", FORMS)
def test_every_readme_form_names_a_command_and_its_options(form):
    """The command exists, and each `-x` / `--xyz` the form writes is accepted by it."""
    commands = _subcommands(cli.build_parser())
    words = form.replace("\\|", "|").split()
    if words[1].startswith("-"):  # `pptmc --help`
        assert words[1] in {"--help", "--version"}
        return
    name = words[1].split("|")[0]
    assert name in commands, f"README names `pptmc {name}`, which the CLI does not have"
    accepted = _options(commands[name]) | {"-h", "--help"}
    if "[model options]" in form:
        assert set(MODEL_OPTIONS) <= accepted, f"pptmc {name} lacks some model options"
    written = {w.strip("[]()|").split("=")[0] for w in re.findall(r"(?<![\w.])--?[A-Za-z][\w-]*", form)}
    missing = sorted(w for w in written if w not in accepted and w != "--")
    assert not missing, f"`{form}`: pptmc {name} does not accept {missing}"


def test_every_command_is_in_the_readme():
    """No command hides from the README."""
    shown = {alt.split("|")[0] for form in FORMS for alt in _alternatives(form)[:1]}
    shown |= {w for form in FORMS for w in re.findall(r"`?pptmc ([a-z-]+)", form)}
    text = README.read_text()
    missing = [c for c in _subcommands(cli.build_parser()) if f"pptmc {c}" not in text and c not in shown]
    assert not missing, f"commands missing from the README: {missing}"
