"""Which cases of a parametrized corpus this pytest session runs, so a module fixture that starts a process per case
starts one only for those (tests/test_cli_errors.py, tests/test_reliability_cli.py)."""


def selected_cids(request) -> set:
    """The case ids this session runs of the module's corpus tests (a selection that deselects some pays no
    process for them)."""
    wanted = set()
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(item, "module", None) is request.module and "cid" in params:
            wanted.add(params["cid"])
    return wanted
