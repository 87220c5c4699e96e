#!/usr/bin/env python3
"""Wait until every given port can be bound the way its listener will bind it.

    wait_ports.py [--timeout SECONDS] PROTOCOL://HOST:PORT [...]     PROTOCOL: tcp, tls, http or ucx

Run before a scheduler or worker starts (the units' ExecStartPre; tests/gpu/harness.py before each cluster). A port
that nothing listens on may still hold connections in TIME_WAIT for a minute after the process that served it
stopped. Dask's TCP and TLS listeners and the HTTP servers (Tornado) bind with SO_REUSEADDR, which TIME_WAIT does
not block; UCX's listener binds without it and then fails with "Address already in use" (a UCX scheduler started
within about a minute of a TCP one on the same port did, on a 4 x H100 host). So a ucx:// port is tested by a bind
without SO_REUSEADDR (TIME_WAIT and listeners block it), the others by a bind with it (only a listener blocks it).
Standard library only: it runs on the hosts' own python3. Exit 0 with a line naming the ports and the seconds waited
on stdout (the unit's journal), 1 when the time ran out (naming the ports still taken), 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import errno
import socket
import sys
import time

PROTOCOLS = ("tcp", "tls", "http", "ucx")
Endpoint = tuple[str, str, int]  # protocol, host, port


def bindable(protocol: str, host: str, port: int) -> bool:
    """True when protocol's listener could bind host:port now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        if protocol != "ucx":
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def wait(endpoints: list[Endpoint], timeout: float, interval: float = 0.5) -> tuple[float, list[str]]:
    """Seconds waited, and the endpoints still taken when the time ran out ([] when all could be bound)."""
    started = time.monotonic()
    while True:
        taken = [f"{protocol}://{host}:{port}" for protocol, host, port in endpoints
                 if not bindable(protocol, host, port)]
        waited = time.monotonic() - started
        if not taken or waited >= timeout:
            return round(waited, 1), taken
        time.sleep(interval)


def endpoint(text: str) -> Endpoint:
    protocol, sep, rest = text.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or protocol not in PROTOCOLS or not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not PROTOCOL://HOST:PORT with PROTOCOL one of "
                                         f"{', '.join(PROTOCOLS)}")
    return protocol, host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - a bind test, not a listener


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds to wait at most (default 90)")
    parser.add_argument("endpoints", nargs="+", type=endpoint, metavar="PROTOCOL://HOST:PORT")
    args = parser.parse_args(argv)
    waited, taken = wait(args.endpoints, args.timeout)
    if taken:
        print(f"ports still taken after {waited} s (a listener, or connections in TIME_WAIT): {', '.join(taken)}",
              file=sys.stderr)
        return 1
    names = ", ".join(f"{protocol}://{host}:{port}" for protocol, host, port in args.endpoints)
    print(f"wait_ports: {names} free to bind after {waited} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
