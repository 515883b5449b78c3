"""Binder/Colab buttons: off in _config.yml, on from ONE setting (REPOSITORY_URL), refused when the
URL is not a repository (a dead button is worse than none)."""

from __future__ import annotations

import pytest
import yaml

from crossprofile_lib.book import build as L


def test_buttons_are_off_unless_repository_url_is_set(root, tmp_path):
    cfg = yaml.safe_load((root / "_config.yml").read_text())
    assert not cfg["launch_buttons"]["binderhub_url"] and not cfg["launch_buttons"]["colab_url"]
    assert not cfg["repository"]["url"]
    assert L.config_args(tmp_path, {}) == []


def test_repository_url_turns_them_on(root, tmp_path):
    (tmp_path / "_config.yml").write_text((root / "_config.yml").read_text())
    args = L.config_args(tmp_path, {"REPOSITORY_URL": "https://github.com/someone/crossprofile"})
    assert args[0] == "--config"
    cfg = yaml.safe_load(open(args[1]).read())
    assert cfg["repository"]["url"] == "https://github.com/someone/crossprofile"
    assert cfg["launch_buttons"]["binderhub_url"] == L.BINDER and cfg["launch_buttons"]["colab_url"] == L.COLAB
    assert cfg["sphinx"] == yaml.safe_load((root / "_config.yml").read_text())["sphinx"]


@pytest.mark.parametrize("url", ["https://github.com/OWNER/crossprofile", "github.com/a/b", "https://x/y",
                                 "javascript:alert(1)"])
def test_a_url_that_is_not_a_repository_is_refused(tmp_path, root, url):
    (tmp_path / "_config.yml").write_text((root / "_config.yml").read_text())
    with pytest.raises(L.LaunchConfigError, match="REPOSITORY_URL"):
        L.config_args(tmp_path, {"REPOSITORY_URL": url})
