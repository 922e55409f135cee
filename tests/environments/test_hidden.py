"""Which paths the sandbox hides (the sandbox tests check that they are hidden)."""

from __future__ import annotations

import pwd
from pathlib import Path

from whiz.environments.hidden import homes, secret_stores


def test_root_home_is_covered_even_when_home_points_elsewhere(tmp_path: Path):
    found = homes({"HOME": str(tmp_path)}, 0)
    assert tmp_path.resolve() in found
    assert Path(pwd.getpwuid(0).pw_dir).resolve() in found


def test_only_stores_that_exist_are_listed_and_a_folder_covers_what_is_inside(tmp_path: Path):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_rsa").write_text("k")
    (tmp_path / ".netrc").write_text("machine x")
    stores = [s for s in secret_stores([tmp_path]) if s.is_relative_to(tmp_path)]
    assert sorted(stores) == [tmp_path / ".netrc", tmp_path / ".ssh"]
