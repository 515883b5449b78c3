"""The embedded model's default thread count follows the machine's load now (issue 17.3), not a lagging average."""

from crossprofile_lib.backends import llamacpp


def test_all_cores_when_idle_one_when_heavily_loaded(monkeypatch):
    monkeypatch.setattr(llamacpp.os, "cpu_count", lambda: 2)
    for busy, threads in ((0.0, 2), (3.0, 2), (3.9, 2), (4.0, 1), (9.0, 1)):
        monkeypatch.setattr(llamacpp, "busy_now", lambda busy=busy: busy)
        assert llamacpp.auto_threads() == threads, busy


def _loadavg(monkeypatch, texts):
    """/proc/loadavg reads ``texts`` one after another (the runnable count is the 4th field's numerator)."""
    import builtins
    import io
    it = iter(texts)
    real = builtins.open
    monkeypatch.setattr(builtins, "open", lambda p, *a, **k: io.StringIO(next(it)) if p == "/proc/loadavg"
                        else real(p, *a, **k))


def test_busy_now_is_the_median_runnable_count_less_this_process_not_the_minute_average(monkeypatch):
    # a 1-minute average of 7.5 left by work that just ended; one task runnable now (this process): nothing else busy
    _loadavg(monkeypatch, ["7.50 3.0 1.0 1/300 99\n"] * 5)
    monkeypatch.setattr(llamacpp.time, "sleep", lambda s: None)
    assert llamacpp.busy_now() == 0
    # a passing spike in one read out of five does not count: the median (the mean would be 2.0, the max 8)
    _loadavg(monkeypatch, [f"0.1 0.1 0.1 {r}/300 99\n" for r in (2, 9, 2, 3, 3)])
    assert llamacpp.busy_now() == 2
    monkeypatch.setattr(llamacpp.os, "cpu_count", lambda: 2)
    _loadavg(monkeypatch, [f"0.1 0.1 0.1 {r}/300 99\n" for r in (6, 5, 7, 5, 6)])
    assert llamacpp.auto_threads() == 1


def test_busy_now_falls_back_to_the_load_average_without_proc(monkeypatch):
    import builtins
    real = builtins.open

    def no_proc(p, *a, **k):
        if p == "/proc/loadavg":
            raise FileNotFoundError(p)
        return real(p, *a, **k)
    monkeypatch.setattr(builtins, "open", no_proc)
    monkeypatch.setattr(llamacpp.os, "getloadavg", lambda: (4.5, 1.0, 1.0))
    assert llamacpp.busy_now() == 4.5
