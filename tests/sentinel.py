"""A real Sentinel set on loopback for the failover tests: a primary, a replica and three
sentinels (``redis-server --sentinel``, the program Debian's redis-sentinel runs), each on a
free port, in a temporary directory, torn down after.

The sentinels judge a primary down after :data:`DOWN_AFTER_MS` (1 s here; 30 s by default),
so a failover takes a few seconds instead of half a minute.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.servers import INSTALL_HINT, free_port, pings

SERVICE = "mymaster"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000


@dataclass
class SentinelSet:
    """The processes of one set; :meth:`url` is noti's ``redis+sentinel://`` URL for them."""

    workdir: Path
    binary: str
    data_ports: list[int] = field(default_factory=list)
    sentinel_ports: list[int] = field(default_factory=list)
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def url(self, db: int = 0) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/{db}"

    def sentinel(self, index: int = 0) -> redis.Redis:
        return redis.Redis(port=self.sentinel_ports[index], decode_responses=True, socket_timeout=2)

    def primary_port(self) -> int:
        """The primary's port as the first sentinel that answers sees it."""
        for index in range(len(self.sentinel_ports)):
            try:
                return int(self.sentinel(index).sentinel_get_master_addr_by_name(SERVICE)[1])
            except (redis.RedisError, TypeError):
                continue
        raise AssertionError("no sentinel answers")

    def data(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, decode_responses=True, socket_timeout=2)

    def start_data(self, port: int, *args: str) -> None:
        directory = self.workdir / f"data-{port}"
        directory.mkdir(exist_ok=True)
        command = [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)]
        command += ["--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--loglevel", "warning"]
        # a replica's full sync starts at once, not after Redis's default 5 s wait for more replicas
        command += ["--repl-diskless-sync-delay", "0"]
        self.procs[port] = subprocess.Popen([*command, *args], stdout=subprocess.DEVNULL)
        _wait_for(self.data(port), self.procs[port], port)

    def start_sentinel(self, port: int, primary: int) -> None:
        config = self.workdir / f"sentinel-{port}.conf"
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self.workdir}\nloglevel warning\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        self.procs[port] = subprocess.Popen(
            [self.binary, str(config), "--sentinel"], stdout=subprocess.DEVNULL
        )
        _wait_for(self.sentinel(self.sentinel_ports.index(port)), self.procs[port], port)

    def kill(self, port: int) -> None:
        """SIGKILL one process (a crash)."""
        proc = self.procs[port]
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def restart_data(self, port: int) -> None:
        """Start a killed data server again on its port and data, as a replica of nobody: the
        sentinels see it back and make it a replica of the current primary."""
        self.start_data(port)

    def failover(self) -> int:
        """``SENTINEL FAILOVER``, and wait until every sentinel names the new primary; its port."""
        old = self.primary_port()
        self.sentinel().sentinel_failover(SERVICE)
        return self.wait_for_new_primary(old)

    def wait_for_new_primary(self, old: int, timeout_s: float = 30.0) -> int:
        """Wait until every live sentinel names a primary other than ``old`` that answers as one."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            seen = set()
            for index, port in enumerate(self.sentinel_ports):
                if self.procs[port].poll() is not None:
                    continue
                try:
                    seen.add(int(self.sentinel(index).sentinel_get_master_addr_by_name(SERVICE)[1]))
                except (redis.RedisError, TypeError):
                    seen.add(-1)
            if len(seen) == 1 and old not in seen and -1 not in seen:
                new = seen.pop()
                with contextlib.suppress(redis.RedisError):
                    if self.data(new).info("replication")["role"] == "master":
                        return new
            time.sleep(0.1)
        raise AssertionError(f"the sentinels did not agree on a new primary within {timeout_s} s")

    def close(self) -> None:
        """Kill every process: nothing of them is kept (the directory goes), and a primary asked
        to stop would wait up to 10 s for its replicas (Redis' shutdown-timeout)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait(10)


def _wait_for(client: redis.Redis, proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 10
    while not pings(client):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"redis-server did not start on port {port}")
        time.sleep(0.02)


@contextlib.contextmanager
def sentinel_set(replicas: int = 1) -> Iterator[SentinelSet]:
    """A primary, ``replicas`` replicas and three sentinels, replication in sync before it yields."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError(INSTALL_HINT)
    workdir = Path(tempfile.mkdtemp(prefix="noti-sentinel-"))
    servers = SentinelSet(workdir, binary)
    try:
        servers.data_ports = [free_port() for _ in range(1 + replicas)]
        primary, *others = servers.data_ports
        servers.start_data(primary)
        for port in others:
            servers.start_data(port, "--replicaof", "127.0.0.1", str(primary))
        servers.sentinel_ports = [free_port() for _ in range(3)]
        for port in servers.sentinel_ports:
            servers.start_sentinel(port, primary)
        deadline = time.monotonic() + 20
        while True:  # replicas in sync, and every sentinel knows every replica and the others
            try:
                info = servers.data(primary).info("replication")
                states = [info[f"slave{i}"]["state"] for i in range(int(info["connected_slaves"]))]
                synced = states == ["online"] * replicas  # the first full sync is over
                known = all(
                    servers.sentinel(i).sentinel_master(SERVICE)["num-slaves"] == replicas
                    and servers.sentinel(i).sentinel_master(SERVICE)["num-other-sentinels"] == 2
                    for i in range(3)
                )
            except redis.RedisError:
                synced = known = False
            if synced and known:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the sentinel set did not come together in 20 s")
            time.sleep(0.1)
        yield servers
    finally:
        servers.close()
        shutil.rmtree(workdir, ignore_errors=True)
