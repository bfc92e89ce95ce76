"""The commands the docs show name configs that exist (docs/results keep the history of removed ones)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"python -m bertlab [^\n`]*")
GROUP_CHOICE = re.compile(r"(?<![.\w])(task|trainer|model|data)=([a-z0-9_]+)\b")


def test_every_config_group_choice_in_a_documented_command_exists():
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    missing = [f"{page.name}: {group}={choice}" for page in pages
               for command in COMMAND.findall(page.read_text(encoding="utf-8"))
               for group, choice in GROUP_CHOICE.findall(command)
               if not (ROOT / "conf" / group / f"{choice}.yaml").is_file()]
    assert missing == []
