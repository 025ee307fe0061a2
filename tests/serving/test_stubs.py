"""The supervisor's watch over a server's Python-backend stubs, over a process table written here:
a stub of a served model that exits fails its worker at the next pass; one of a model that is
unloading, another server's, or a pid reused by another process does not count as live."""

from __future__ import annotations

from pathlib import Path

from serving.stubs import STUB_NAME, Stub, StubWatch, is_live, live_stubs

SERVER = 100


def process(proc: Path, pid: int, name: str, state: str = "S", ppid: int = SERVER, model: str = "m") -> None:
    """A /proc entry: its stat line (the name in parentheses, then state and parent pid) and its
    command line (a stub's first argument is its model's code)."""
    entry = proc / str(pid)
    entry.mkdir(parents=True, exist_ok=True)
    (entry / "stat").write_text(f"{pid} ({name}) {state} {ppid} 1 1 0 -1\n")
    code = f"/repo/{model}/1/model.py"
    (entry / "cmdline").write_bytes(b"\0".join([b"/bin/stub", code.encode(), b"shm", b"1024", b""]))


def test_the_servers_live_stub_children_with_their_models(tmp_path: Path) -> None:
    process(tmp_path, SERVER, "tritonserver", ppid=1)
    process(tmp_path, 201, STUB_NAME, model="a")
    process(tmp_path, 202, STUB_NAME, model="b", state="T")  # stopped: alive, the canary's to judge
    process(tmp_path, 203, STUB_NAME, model="c", state="Z")  # exited, not reaped yet
    process(tmp_path, 204, STUB_NAME, model="d", ppid=999)  # another server's
    process(tmp_path, 205, "python3", model="e")
    (tmp_path / "self").mkdir()
    assert sorted(live_stubs(SERVER, tmp_path), key=lambda s: s.pid) == [Stub(201, "a"), Stub(202, "b")]
    assert live_stubs(SERVER, tmp_path / "none") == []


def test_a_served_models_stub_that_exits_fails_the_worker_once(tmp_path: Path) -> None:
    process(tmp_path, 201, STUB_NAME, model="a")
    process(tmp_path, 202, STUB_NAME, model="b")
    watch = StubWatch()
    watch.discover(SERVER, tmp_path)
    assert watch.gone(SERVER, ["a", "b"], tmp_path) is None
    process(tmp_path, 201, STUB_NAME, model="a", state="Z")
    assert watch.gone(SERVER, ["a", "b"], tmp_path) == "model a: its Python-backend stub (pid 201) exited"
    assert watch.gone(SERVER, ["a", "b"], tmp_path) is None  # told once; the restart starts afresh
    (tmp_path / "202" / "stat").unlink()  # reaped: gone from the table, and b no longer served
    assert watch.gone(SERVER, ["a"], tmp_path) is None
    assert watch.known == {}


def test_a_reused_pid_is_not_the_stub_and_a_new_server_forgets_the_old_stubs(tmp_path: Path) -> None:
    process(tmp_path, 201, STUB_NAME, model="a")
    watch = StubWatch()
    watch.discover(SERVER, tmp_path)
    process(tmp_path, 201, "bash", model="a")  # the stub died and its pid was reused
    assert not is_live(Stub(201, "a"), SERVER, tmp_path)
    assert watch.gone(SERVER, ["a"], tmp_path) is not None
    process(tmp_path, 301, STUB_NAME, model="a", ppid=300)
    watch.discover(300, tmp_path)  # the restarted server's stubs
    assert watch.known == {301: Stub(301, "a")} and watch.server_pid == 300


def test_a_stub_that_exits_as_triton_reloads_its_model_is_no_failure(tmp_path: Path) -> None:
    """A reload starts the model's new instance (a new stub) before it ends the old one."""
    process(tmp_path, 201, STUB_NAME, model="a")
    watch = StubWatch()
    watch.discover(SERVER, tmp_path)
    process(tmp_path, 202, STUB_NAME, model="a")  # the reloaded instance
    process(tmp_path, 201, STUB_NAME, model="a", state="Z")
    assert watch.gone(SERVER, ["a"], tmp_path) is None
    assert watch.known == {202: Stub(202, "a")}  # and it is watched from now on
    process(tmp_path, 202, STUB_NAME, model="a", state="Z")
    assert watch.gone(SERVER, ["a"], tmp_path) == "model a: its Python-backend stub (pid 202) exited"
