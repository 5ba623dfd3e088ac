"""A TCP relay in front of the cluster's API that a test can freeze: the network between an operator's laptop and
the cluster going quiet (a laptop asleep, a link down) without closing anything, which only a lease notices."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import yaml


class FrozenableRelay:
    """Relays 127.0.0.1:PORT to the API server; `frozen` set, no byte moves either way (connections stay open)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.frozen = threading.Event()
        self.closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self.closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._relay, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _relay(self, conn: socket.socket) -> None:
        with contextlib.closing(conn), contextlib.closing(socket.create_connection(self.upstream)) as up:
            selector = selectors.DefaultSelector()
            selector.register(conn, selectors.EVENT_READ, up)
            selector.register(up, selectors.EVENT_READ, conn)
            while not self.closed.is_set():
                if self.frozen.is_set():
                    time.sleep(0.05)
                    continue
                for key, _ in selector.select(0.2):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = source.recv(65536)
                    if not data:
                        return
                    key.data.sendall(data)

    @classmethod
    def of(cls, kubeconfig: Path) -> FrozenableRelay:
        """A relay to the server `kubeconfig` names."""
        server = urlsplit(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
        return cls((server.hostname or "127.0.0.1", server.port or 443))

    def kubeconfig(self, admin: Path, into: Path) -> Path:
        """The admin's kubeconfig with the relay as its server (the same certificate names 127.0.0.1)."""
        config = yaml.safe_load(admin.read_text())
        for entry in config["clusters"]:
            entry["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        into.write_text(yaml.safe_dump(config))
        into.chmod(0o600)
        return into

    def close(self) -> None:
        self.closed.set()
        self.listener.close()
