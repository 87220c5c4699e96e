"""roles/dask_autoscale/files/autoscale_agent.py's TLS: a host certificate renewed in place (site.yml -e
dask_tls_renew=true writes new files, the agent keeps running) is the one the agent shows at its next question, and
files caught half renewed keep the earlier certificate until they match. Real certificates (openssl) and a real
HTTPS server that asks for the client's certificate, as the autoscaler does."""
from __future__ import annotations

import http.server
import json
import os
import runpy
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import certificates

AGENT = runpy.run_path(str(Path(__file__).resolve().parents[2] / "roles" / "dask_autoscale" / "files"
                           / "autoscale_agent.py"))


class Echo(http.server.BaseHTTPRequestHandler):
    """Answers with the serial of the client certificate it was shown."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        peer = self.request.getpeercert()
        body = json.dumps({"serial": peer["serialNumber"], "desired": "up", "generation": 1}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, dict[str, Path]]]:
    files = certificates(tmp_path)
    httpd = http.server.HTTPServer(("127.0.0.1", 0), Echo)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(files["ca"]))
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(str(files["server"]), str(files["server_key"]))
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}/v1/hosts/w1", files
    httpd.shutdown()


def serial(url: str, tls: Any) -> str:
    return str(AGENT["ask"](url, tls.context())["serial"])


def test_a_renewed_certificate_is_shown_at_the_next_question(server: tuple[str, dict[str, Path]],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    url, files = server
    tls = AGENT["Tls"](str(files["ca"]), str(files["client"]), str(files["client_key"]))
    first = serial(url, tls)
    assert serial(url, tls) == first
    # Half renewed: the new certificate is there, its key not yet (the old key does not match it).
    old_key = files["client_key"].read_bytes()
    renewed = certificates(files["ca"].parent)  # the same CA, new certificates and keys
    new_key = renewed["client_key"].read_bytes()
    renewed["client_key"].write_bytes(old_key)
    os.utime(renewed["client_key"], ns=(1, 1))
    assert serial(url, tls) == first
    assert "do not load yet" in capsys.readouterr().out
    renewed["client_key"].write_bytes(new_key)
    second = serial(url, tls)
    assert second != first
    assert "certificate reloaded" in capsys.readouterr().out


def test_files_that_cannot_be_read_stop_the_agent_at_its_start(tmp_path: Path) -> None:
    files = certificates(tmp_path)
    tls = AGENT["Tls"](str(files["ca"]), str(files["client"]), str(tmp_path / "missing.key"))
    with pytest.raises(OSError):
        tls.context()
