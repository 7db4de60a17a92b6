"""The CLI reference page that the mkdocs hook generates from ppbn's own parser."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from ppbn.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "tools" / "mkdocs_hooks" / "cli_reference.py"


@pytest.fixture(scope="module")
def hook():
    spec = importlib.util.spec_from_file_location("cli_reference_hook", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def page(hook) -> str:
    return hook.render(build_parser())


def registered(parser: argparse.ArgumentParser) -> list[str]:
    """The prog of every command and subcommand, walking argparse's own structures."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.append(sub.prog)
                found.extend(registered(sub))
    return found


def test_every_registered_command_has_a_section(page):
    progs = registered(build_parser())
    assert {"ppbn learn", "ppbn party serve", "ppbn certs trust", "ppbn bench k2"} <= set(progs)
    headings = {line.lstrip("#").strip() for line in page.splitlines() if line.startswith("#")}
    missing = [prog for prog in progs if prog not in headings]
    assert not missing, missing


def test_usage_descriptions_and_option_help_appear(page):
    assert "usage: ppbn certs trust [-h] --tls-dir DIR --ca PEER_CA.crt" in page
    assert "pinned SHA-256 of the certificate (hex, colons allowed)" in page
    # a default the help text does not name is added; one it names is not repeated
    assert "- `--instances INSTANCES`: (default `1000`)" in page
    assert (
        "- `--peer-timeout PEER_TIMEOUT, --timeout PEER_TIMEOUT`: longest wait for the peer "
        "before a job fails (default 60 s)\n"
    ) in page


def test_the_site_build_renders_the_page(tmp_path):
    """The whole mkdocs build with the hook (not strict here: this test is about the
    generated page, not about links elsewhere in the site)."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(str(REPO / "mkdocs.yml"), site_dir=str(tmp_path), strict=False)
    build(config)
    html = (tmp_path / "cli" / "index.html").read_text(encoding="utf-8")
    assert 'id="ppbn-party-serve"' in html and "pinned SHA-256 of the certificate" in html
