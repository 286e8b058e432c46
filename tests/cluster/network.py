"""The cluster's hosts: one Linux network namespace each, on a bridge of their own.

    bridge bbc-<engine>  10.79.N.1/24 (root namespace: the job server and the beam-bpe client)
    bbc-<engine>-<host>  10.79.N.k/24 on eth0, a veth pair to the bridge

Flink's hosts use 10.79.1.0/24 and Spark's 10.79.2.0/24, so both can be up at once. The
namespaces get no default route and nothing forwards out of them: the hosts reach each other
and the root namespace's bridge address, nothing else.

The JVMs resolve names from a hosts file of their own (``-Djdk.net.hosts.file``): inside a
namespace the machine's name server is unreachable, and each reverse lookup would wait for it
(about 10 s) - long enough for Flink to give up on a TaskManager's slots.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import pathlib
import socket
import subprocess

SUBNETS = {"flink": "10.79.1", "spark": "10.79.2"}


@dataclasses.dataclass(frozen=True)
class Host:
    """One machine of the cluster.

    Args:
      name: short name inside the cluster (``jm``, ``tm1``).
      netns: its network namespace.
      address: its IPv4 address on the bridge.
      veth: the root-namespace end of its link (at most 15 characters, as Linux requires).
    """

    name: str
    netns: str
    address: str
    veth: str


def bridge(engine: str) -> str:
    return f"bbc-{engine}"


def gateway(engine: str) -> str:
    """The root namespace's address on the cluster's bridge."""
    return f"{SUBNETS[engine]}.1"


def hosts(engine: str, names: list[str]) -> list[Host]:
    """The hosts of a cluster, addressed in order from .2 on."""
    return [Host(name, f"bbc-{engine}-{name}", f"{SUBNETS[engine]}.{k}", f"bbc{engine[0]}{k}")
            for k, name in enumerate(names, start=2)]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def _links() -> set[str]:
    return {line.split(":")[1].strip().split("@")[0] for line in _ip("-o", "link").stdout.splitlines()}


def namespaces() -> set[str]:
    return {line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line.strip()}


def _check_subnet_free(engine: str) -> None:
    """Refuses a subnet that some other interface of the machine already uses."""
    ours = ipaddress.ip_network(f"{SUBNETS[engine]}.0/24")
    for line in _ip("-o", "-4", "addr").stdout.splitlines():
        fields = line.split()
        device, address = fields[1], fields[3]
        if device != bridge(engine) and ipaddress.ip_interface(address).network.overlaps(ours):
            raise RuntimeError(f"{ours} is already used by {device} ({address}); the cluster needs it for itself")


def up(engine: str, cluster: list[Host]) -> None:
    """Makes the bridge, the namespaces and their links, whichever are missing."""
    _check_subnet_free(engine)
    links = _links()
    if bridge(engine) not in links:
        _ip("link", "add", bridge(engine), "type", "bridge")
        _ip("addr", "add", f"{gateway(engine)}/24", "dev", bridge(engine))
        _ip("link", "set", bridge(engine), "up")
    existing = namespaces()
    for host in cluster:
        if host.netns in existing and host.veth in links:
            continue
        if host.netns in existing:  # a half-made host: start it again from nothing
            _ip("netns", "del", host.netns)
        if host.veth in links:
            _ip("link", "del", host.veth)
        _ip("netns", "add", host.netns)
        _ip("link", "add", host.veth, "type", "veth", "peer", "name", f"{host.veth}n")
        _ip("link", "set", host.veth, "master", bridge(engine))
        _ip("link", "set", host.veth, "up")
        _ip("link", "set", f"{host.veth}n", "netns", host.netns)
        _ip("-n", host.netns, "link", "set", "lo", "up")
        _ip("-n", host.netns, "link", "set", f"{host.veth}n", "name", "eth0")
        _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.netns, "link", "set", "eth0", "up")


def processes_in(netns: str) -> list[int]:
    return [int(p) for p in _ip("netns", "pids", netns, check=False).stdout.split()]


def down(engine: str, cluster: list[Host]) -> None:
    """Removes the namespaces (their ends of the links go with them), the links and the bridge.

    Raises:
      RuntimeError: a process still runs in one of the namespaces (it would keep it alive).
    """
    existing, links = namespaces(), _links()
    for host in cluster:
        if host.netns in existing:
            left = processes_in(host.netns)
            if left:
                raise RuntimeError(f"processes still run in {host.netns}: {left}")
            _ip("netns", "del", host.netns)
        if host.veth in links:
            _ip("link", "del", host.veth, check=False)  # usually gone with its peer
    if bridge(engine) in links:
        _ip("link", "del", bridge(engine))


def write_hosts_file(path: pathlib.Path, engine: str, cluster: list[Host]) -> None:
    """The JVMs' own hosts file: this machine's name, the bridge and every host."""
    lines = [f"127.0.0.1 localhost {socket.gethostname()}", f"{gateway(engine)} {bridge(engine)}"]
    lines += [f"{host.address} {host.netns}" for host in cluster]
    path.write_text("\n".join(lines) + "\n")


def listening(address: str, port: int) -> bool:
    """Whether something accepts TCP connections at address:port (from the root namespace)."""
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False
