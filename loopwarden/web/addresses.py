"""Which addresses are this machine's: loopback, or any address of one of its interfaces."""

from __future__ import annotations

import ipaddress
import socket

import psutil

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def resolve(host: str) -> list[Address]:
    """The addresses `host` names (a literal address is itself; a name is resolved); [] when none."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [address for info in infos if (address := _address(str(info[4][0]))) is not None]


def loopback(host: str) -> bool:
    """Whether every address `host` names is loopback (only those are private to this machine)."""
    found = resolve(host)
    return bool(found) and all(address.is_loopback for address in found)


def this_machine(ip: str) -> bool:
    """Whether the literal address `ip` is one of this machine's (loopback or an interface's)."""
    address = _address(ip)
    if address is None:
        return False
    if address.is_loopback or address.is_unspecified:
        return True
    try:
        interfaces = psutil.net_if_addrs()
    except (psutil.Error, OSError):
        return True  # cannot tell: treat it as local, which is the side that is checked
    return any(_address(entry.address) == address for entries in interfaces.values() for entry in entries
               if entry.family in (socket.AF_INET, socket.AF_INET6))


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def same_address(text: str) -> str:
    """An address as one form for comparing: an IPv4 address mapped into IPv6 (`::ffff:127.0.0.1`, as a
    dual-stack server sees an IPv4 peer) as the IPv4 address itself."""
    address = _address(text)
    return str(address) if address is not None else text
