"""The embedded model's default thread count follows the machine's load (issue 17.3)."""

from crossprofile_lib.backends import llamacpp


def test_all_cores_when_idle_one_when_heavily_loaded(monkeypatch):
    monkeypatch.setattr(llamacpp.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(llamacpp.os, "getloadavg", lambda: (0.3, 0.2, 0.1))
    assert llamacpp.auto_threads() == 2
    monkeypatch.setattr(llamacpp.os, "getloadavg", lambda: (3.9, 1.0, 1.0))
    assert llamacpp.auto_threads() == 2
    monkeypatch.setattr(llamacpp.os, "getloadavg", lambda: (4.0, 1.0, 1.0))
    assert llamacpp.auto_threads() == 1
