# The SIMULATED image and network services of the harness's OpenStack: no Glance or Neutron runs
# here, yet nova asks Glance for the image of every server it creates and Neutron for the ports
# of every server it shows or deletes, even on the fake driver (spec/real-openstack.md, pitfall
# 5). Glance on GLANCE_PORT: the version document, the image schema and any image id as one
# active raw image; Neutron on NEUTRON_PORT: the version document and every collection
# (/v2.0/ports, /v2.0/security-groups, ...) as an empty list. Servers boot with networks "none".
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# Every top-level image attribute nova reads is a base property of the schema, so glanceclient
# hands it to nova as such (anything else lands in the image's custom properties).
BASE = ["id", "name", "status", "visibility", "size", "disk_format", "container_format",
        "min_disk", "min_ram", "created_at", "updated_at", "owner", "checksum", "protected",
        "tags", "virtual_size"]


def image(image_id):
    return {"id": image_id, "name": "simulated-image", "status": "active",
            "visibility": "public", "size": 1024, "disk_format": "raw",
            "container_format": "bare", "min_disk": 0, "min_ram": 0,
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "owner": None, "checksum": None, "protected": False, "tags": []}


class Stub(BaseHTTPRequestHandler):
    service = "?"

    def log_message(self, fmt, *args):
        print("SIMULATED %s stub: %s" % (self.service, fmt % args), flush=True)

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def versions(self, version, path):
        link = "http://%s%s" % (self.headers.get("Host", "localhost"), path)
        self.answer(200, {"versions": [{"id": version, "status": "CURRENT",
                                        "links": [{"rel": "self", "href": link}]}]})

    def refuse(self):
        self.answer(404, {"message": "SIMULATED %s stub: nothing at %s %s"
                          % (self.service, self.command, self.path)})

    do_POST = do_PUT = do_PATCH = do_DELETE = refuse


class Glance(Stub):
    service = "glance"

    def do_GET(self):
        parts = [p for p in urlsplit(self.path).path.split("/") if p]
        if parts in ([], ["v2"]):
            self.versions("v2.16", "/v2/")
        elif parts == ["v2", "schemas", "image"]:
            self.answer(200, {"name": "image", "properties": {p: {} for p in BASE},
                              "additionalProperties": True})
        elif len(parts) == 3 and parts[:2] == ["v2", "images"]:
            self.answer(200, image(parts[2]))
        else:
            self.refuse()


class Neutron(Stub):
    service = "neutron"

    def do_GET(self):
        parts = [p for p in urlsplit(self.path).path.split("/") if p]
        if parts == []:
            self.versions("v2.0", "/v2.0/")
        elif len(parts) == 2 and parts[0] == "v2.0":
            self.answer(200, {parts[1].removesuffix(".json").replace("-", "_"): []})
        else:
            self.refuse()


servers = [ThreadingHTTPServer(("0.0.0.0", int(os.environ[port])), handler)
           for port, handler in (("GLANCE_PORT", Glance), ("NEUTRON_PORT", Neutron))]
for server in servers[1:]:
    threading.Thread(target=server.serve_forever, daemon=True).start()
print("SIMULATED glance and neutron stubs: serving", flush=True)
servers[0].serve_forever()
