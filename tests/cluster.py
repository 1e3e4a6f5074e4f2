"""A real Redis Cluster for tests: three masters on free loopback ports, no replicas.

Started by :func:`local_cluster` in a temporary directory and torn down after. Under
``CI=true`` missing ``redis-server`` / ``redis-cli`` fail the test instead of skipping it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import wait_until
from tests.servers import free_port


def _binaries() -> tuple[str, str]:
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        message = "redis-server and redis-cli are needed (Debian/Ubuntu: apt-get install redis-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return server, cli


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _cluster_port(taken: list[int]) -> int:
    """A free loopback port whose cluster bus port (port + 10000) is free and valid too."""
    for _ in range(1000):
        port = free_port()  # reserved: no other worker of the tests gets it meanwhile
        if port + 10000 <= 65535 and port not in taken and _bindable(port + 10000):
            return port
    raise AssertionError("no free pair of loopback ports (port, port + 10000)")


def _cluster_ok(port: int, masters: int) -> bool:
    """``cluster_state:ok`` and every master known, as this node sees it."""
    try:
        info = redis.Redis(port=port, socket_timeout=2, decode_responses=True).cluster("INFO")
    except redis.RedisError:
        return False
    return bool(info.get("cluster_state") == "ok" and int(info.get("cluster_known_nodes", 0)) == masters)


def _pings(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_timeout=2).ping())
    except redis.RedisError:
        return False


@contextlib.contextmanager
def local_cluster(masters: int = 3) -> Iterator[list[int]]:
    """Start ``masters`` cluster-enabled servers, join them into one cluster; yield their ports."""
    server, cli = _binaries()
    workdir = Path(tempfile.mkdtemp(prefix="noti-cluster-"))
    ports: list[int] = []
    for _ in range(masters):
        ports.append(_cluster_port(ports))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for port in ports:
            procs.append(
                subprocess.Popen(
                    [
                        server,
                        "--port",
                        str(port),
                        "--bind",
                        "127.0.0.1",
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        str(workdir / f"nodes-{port}.conf"),
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--dir",
                        str(workdir),
                        "--loglevel",
                        "warning",
                    ],
                    stdout=subprocess.DEVNULL,
                )
            )
        for port in ports:
            wait_until(lambda port=port: _pings(port), timeout=10)
        subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports)]
            + ["--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=60,
        )
        for port in ports:
            wait_until(lambda port=port: _cluster_ok(port, masters), timeout=30)
        yield ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
