"""The compose test's image digest (tests/composestack.py): the same files give the same
digest, so a second run reuses the images; any change to what the build sends gives another,
so the images are rebuilt."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.composestack import source_digest


def _repo(root: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    (root / ".gitignore").write_text("ignored/\n")
    (root / "app.py").write_text("print('one')\n")
    subprocess.run(["git", "-C", str(root), "add", "."], check=True, timeout=30)
    return root


def test_the_same_tree_and_base_give_the_same_digest(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    assert source_digest(root, "sha256:base") == source_digest(root, "sha256:base")


def test_an_ignored_file_leaves_the_digest_alone(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    before = source_digest(root, "sha256:base")
    (root / "ignored").mkdir()
    (root / "ignored" / "log.txt").write_text("a test's artifact\n")
    assert source_digest(root, "sha256:base") == before


def test_what_the_build_sends_changes_the_digest(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    seen = {source_digest(root, "sha256:base"), source_digest(root, "sha256:other-base")}
    (root / "app.py").write_text("print('two')\n")  # a tracked file edited
    seen.add(source_digest(root, "sha256:base"))
    (root / "new.py").write_text("")  # an untracked file, sent by the build too
    seen.add(source_digest(root, "sha256:base"))
    (root / "app.py").unlink()  # a tracked file deleted
    seen.add(source_digest(root, "sha256:base"))
    assert len(seen) == 5
