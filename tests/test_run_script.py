"""``make run`` (scripts/run.sh) as a person uses it: it starts Redis (on a private port, never
6379), a worker, beat and Flower, delivers the demo, writes the settings file the CLI finds;
Ctrl-C (a real SIGINT to its process group) stops everything in order, Redis by SHUTDOWN with
its AOF flushed, and it exits 0 leaving nothing running. And ``make run`` / ``make test`` share
one install: scripts/venv.sh installs nothing when the extras asked for are already there."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[1]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_ctrl_c_stops_everything_in_order_and_exits_0(tmp_path: Path) -> None:
    if not (ROOT / ".venv" / "bin" / "celery").exists():
        pytest.skip("scripts/run.sh runs noti from ./.venv, which is not installed here")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTI_")}
    settings = tmp_path / "noti.toml"
    env.update(
        NOTI_RUN_VAR=str(tmp_path / "var"),
        NOTI_RUN_SETTINGS=str(settings),
        NOTI_FLOWER_PORT=str(free_port()),
        NOTI_RUN_API_PORT=str(free_port()),
    )
    log = tmp_path / "run.log"
    with log.open("w") as out:
        run = subprocess.Popen(
            ["scripts/run.sh"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 150
        while "Press Ctrl-C to stop." not in log.read_text():
            assert run.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        text = log.read_text()
        port = int(re.search(r"redis-server on 127\.0\.0\.1:(\d+) \(pid (\d+)", text).group(1))  # type: ignore[union-attr]
        assert port != 6379
        pids = {"redis-server": int(re.search(r"redis-server on \S+ \(pid (\d+)", text).group(1))}  # type: ignore[union-attr]
        for name in ("worker", "beat", "Flower", "API"):
            pids[name] = int(re.search(rf"{name} \(pid (\d+)\)", text).group(1))  # type: ignore[union-attr]
        assert all(alive(pid) for pid in pids.values())
        assert settings.read_text().startswith("# written by scripts/run.sh")
        listed = subprocess.run(
            [str(ROOT / ".venv/bin/noti"), "list", "-json", "-c"], cwd=tmp_path,
            env={k: v for k, v in env.items() if not k.startswith("NOTI_")}, capture_output=True, text=True,
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr  # found ./noti.toml: no exported variable
        assert listed.stdout.count('"noti_st":10') == 5
        # the curl example it prints works: its token, its address
        url, token = re.search(r"curl -X POST (\S+) -H 'Authorization: Bearer (noti_\S+)'", text).groups()  # type: ignore[union-attr]
        import httpx

        posted = httpx.post(url, json={"type": "sms", "to": "+8613912345678", "text": "hi"},
                            headers={"Authorization": f"Bearer {token}"}, timeout=10)  # fmt: skip
        assert posted.status_code == 201, posted.text
        # the admin page it prints takes the same token
        admin = re.search(r"^admin page: (http://\S+/admin) ", text, re.M).group(1)  # type: ignore[union-attr]
        assert admin == url.removesuffix("/v1/notifications") + "/admin"
        with httpx.Client(timeout=10) as browser:
            assert browser.get(admin, follow_redirects=True).status_code == 401  # the login form
            logged = browser.post(f"{admin}/login", data={"token": token}, follow_redirects=True)
            assert logged.status_code == 200 and "demo (root administrator)" in logged.text, logged.text

        os.killpg(run.pid, signal.SIGINT)  # what a Ctrl-C at its terminal sends
        assert run.wait(timeout=90) == 0, log.read_text()
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    text = log.read_text()
    stopped = [line.strip() for line in text.splitlines() if line.strip().endswith("stopped")]
    assert stopped == [
        "API stopped",
        "worker stopped",
        "beat stopped",
        "Flower stopped",
        "redis-server stopped",
    ], text
    assert not [name for name, pid in pids.items() if alive(pid)], text
    redis_log = (tmp_path / "var" / "log" / "redis.log").read_text()
    assert "User requested shutdown" in redis_log  # SHUTDOWN, not a signal
    assert "Calling fsync() on the AOF file" in redis_log or "fsync" in redis_log
    assert "ready to exit" in redis_log
    assert "You insist" not in redis_log
    assert not settings.exists()  # the settings file it wrote is gone with it


@pytest.mark.slow
def test_one_install_marker_serves_run_and_test(tmp_path: Path) -> None:
    """With the test extras installed (make test), make run's flower is there: nothing installed."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    marker = venv / ".noti-installed"
    marker.write_text("extras=bench,test\nconstraints=\n")
    later = (ROOT / "pyproject.toml").stat().st_mtime + 10
    os.utime(marker, (later, later))
    for extras in ("flower", "test", "", "bench,test", "test,flower"):
        done = subprocess.run(
            ["scripts/venv.sh"], cwd=ROOT, env={**os.environ, "VENV": str(venv), "NOTI_EXTRAS": extras},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "installing" not in done.stderr, (extras, done.stderr)
    assert marker.read_text() == "extras=bench,test\nconstraints=\n"


@pytest.mark.slow
def test_make_run_at_a_terminal_exits_0_on_ctrl_c(tmp_path: Path) -> None:
    """The keystroke itself: ^C typed at `make run`'s terminal (a pty) signals its foreground
    process group; make must not die of it (it would exit 130), run.sh stops everything."""
    import pty
    import select
    import shutil

    if not (ROOT / ".venv" / "bin" / "celery").exists() or shutil.which("make") is None:
        pytest.skip("needs make and ./.venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTI_")}
    env.update(
        NOTI_RUN_VAR=str(tmp_path / "var"),
        NOTI_RUN_SETTINGS=str(tmp_path / "noti.toml"),
        NOTI_FLOWER_PORT=str(free_port()),
        NOTI_RUN_API_PORT=str(free_port()),
    )
    pid, fd = pty.fork()
    if pid == 0:  # the child: make run on the pty as its controlling terminal
        os.chdir(ROOT)
        os.execvpe("make", ["make", "run"], env)
    seen = b""

    def read_until(token: bytes, seconds: float) -> None:
        nonlocal seen
        deadline = time.monotonic() + seconds
        while token not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # the terminal closed: make has exited
                    return
                if not chunk:
                    return
                seen += chunk

    try:
        read_until(b"Press Ctrl-C to stop.", 150)
        assert b"Press Ctrl-C to stop." in seen, seen.decode(errors="replace")
        os.write(fd, b"\x03")  # ^C: the terminal sends SIGINT to its foreground process group
        read_until(b"redis-server stopped", 90)
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)  # make; closing the terminal hangs up run.sh, which stops the rest
        raise
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, seen.decode(errors="replace")
    assert b"redis-server stopped" in seen
    assert not (tmp_path / "noti.toml").exists()
