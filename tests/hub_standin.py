"""A local stand-in for the Hugging Face Hub HTTP API, enough for ``create_repo`` + ``upload_folder``.

It serves on 127.0.0.1 only, stores committed files in memory, and can fail a number of calls on purpose.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HubStandIn:
    def __init__(self, fail_creates: int = 0) -> None:
        self.repos: dict[str, dict] = {}
        self.requests: list[tuple[str, str, dict, bytes]] = []
        self.fail_creates = fail_creates
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, code: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                hub.requests.append(("GET", self.path, dict(self.headers), b""))
                self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hub.requests.append(("POST", self.path, dict(self.headers), data))
                path = self.path.split("?")[0]
                if path == "/api/repos/create":
                    if hub.fail_creates > 0:
                        hub.fail_creates -= 1
                        return self._send(400, {"error": "simulated failure"})
                    req = json.loads(data)
                    name = f"{req['organization']}/{req['name']}" if req.get("organization") else req["name"]
                    hub.repos.setdefault(name, {"visibility": req.get("visibility"), "files": {}, "commits": []})
                    return self._send(200, {"url": f"{hub.url}/{name}", "name": name})
                if path == "/api/validate-yaml":
                    return self._send(200, {"errors": [], "warnings": []})
                if "/preupload/" in path:
                    files = json.loads(data)["files"]
                    return self._send(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]})
                if "/commit/" in path:
                    repo = path.split("/api/models/")[1].split("/commit/")[0]
                    lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
                    for line in lines:
                        if line["key"] == "header":
                            hub.repos[repo]["commits"].append(line["value"]["summary"])
                        if line["key"] == "file":
                            hub.repos[repo]["files"][line["value"]["path"]] = base64.b64decode(line["value"]["content"])
                    return self._send(200, {"commitUrl": f"{hub.url}/{repo}/commit/{'a' * 40}", "commitOid": "a" * 40})
                self._send(404, {"error": "unknown endpoint"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
