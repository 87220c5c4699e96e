"""dask_transport, decoded once (docs/transport.md): what clients, the scheduler and the workers speak, and what
the firewall and the specs need to know about it."""
from __future__ import annotations

from typing import Any

# name: (the protocol clients use to reach the scheduler, the protocol of scheduler-worker and worker-worker links)
TRANSPORTS = {"tls": ("tls", "tls"), "tls-ucx": ("tls", "ucx"), "ucx": ("ucx", "ucx"), "tcp": ("tcp", "tcp")}


def facets(name: str) -> dict[str, Any]:
    """Everything the model publishes about a transport.

    clients_reach_workers: clients talk to the workers directly (any port of a worker host), so the firewall lets a
    client in to every port; otherwise clients need the scheduler's port only (gathers go through the scheduler).
    ucx_every_address: distributed-ucxx binds its listeners to every address of the host.
    """
    client, worker = TRANSPORTS.get(name, TRANSPORTS["tls"])
    return {"transport": name if name in TRANSPORTS else "tls", "client_protocol": client, "protocol": worker,
            "tls": client == "tls", "worker_tls": worker == "tls", "tls_off": client != "tls",
            "clients_reach_workers": name in ("tls", "ucx"), "ucx_every_address": worker == "ucx",
            "scheduler_second_listener": client != worker}
