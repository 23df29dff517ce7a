"""Whether a call may reach `host:port`, and at which addresses: the egress rule.

A destination passes when the call's tool lists it ("host:port"; an IPv6 host in brackets)
and every address the gateway resolves it to is public. An address that is not (private,
loopback, link-local, multicast, unspecified, reserved or shared, in IPv4 or IPv6, an
IPv4-mapped IPv6 address judged as its IPv4 one) passes only when that literal address is
itself listed with the port: listing `localhost:80` alone reaches nothing, since the name
could point anywhere (DNS rebinding). The proxy connects to the addresses checked here and
never resolves the name again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class EgressRefused(Exception):
    """The destination is not allowed; the message says why, for the 403 and the caller."""


def split_host_port(destination: str) -> tuple[str, int]:
    """("host", port) of "host:port" or "[v6]:port", the host in its normal form."""
    host, sep, port_text = destination.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise EgressRefused(f"{destination!r} is not host:port")
    return _normal_host(host), int(port_text)


def _normal_host(host: str) -> str:
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        if ":" in bare:  # only an IPv6 literal may carry a colon
            raise EgressRefused(f"{host!r} is not a host name or address") from None
        return bare.lower().rstrip(".")


def _is_public(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


async def checked_addresses(allow_list: tuple[str, ...], destination: str) -> list[IPAddress]:
    """The addresses `destination` may be reached at, or EgressRefused saying why not."""
    host, port = split_host_port(destination)
    listed = set()
    for entry in allow_list:
        try:
            listed.add(split_host_port(entry))
        except EgressRefused:
            continue  # a malformed entry allows nothing
    if (host, port) not in listed:
        raise EgressRefused(f"{host}:{port} is not in the tool's network allow-list")
    addresses = await _resolve(host, port)
    for address in addresses:
        if not _is_public(address) and (str(address), port) not in listed:
            raise EgressRefused(
                f"{host} resolves to {address}, a non-public address; list {address}:{port} "
                "itself to allow it"
            )
    return addresses


async def public_addresses(destination: str) -> list[IPAddress]:
    """The addresses of `destination`, or EgressRefused when any of them is not public: for a
    destination no allow-list covers, named by someone else's text (an A2A push URL)."""
    host, port = split_host_port(destination)
    addresses = await _resolve(host, port)
    for address in addresses:
        if not _is_public(address):
            raise EgressRefused(f"{host} resolves to {address}, a non-public address")
    return addresses


async def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise EgressRefused(f"{host} does not resolve ({exc})") from exc
    found: list[IPAddress] = []
    for _, _, _, _, sockaddr in infos:
        # A scoped IPv6 address ("fe80::1%eth0") is link-local: refused without its scope.
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if address not in found:
            found.append(address)
    if not found:
        raise EgressRefused(f"{host} resolves to no address")
    return found
