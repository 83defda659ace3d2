# Waits until the node's Open vSwitch database names its OVN chassis (a system-id in the
# external_ids of the Open_vSwitch table): nova-compute plugs ports only on a chassis.
import json
import os
import socket
import time

SOCKET = os.environ["OVSDB_SOCKET"]
REQUEST = json.dumps({
    "method": "transact",
    "params": ["Open_vSwitch", {"op": "select", "table": "Open_vSwitch",
                                "where": [], "columns": ["external_ids"]}],
    "id": 0,
}).encode()


def chassis():
    decoder = json.JSONDecoder()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(5)
        conn.connect(SOCKET)
        conn.sendall(REQUEST)
        buffered = ""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            buffered += chunk.decode()
            while buffered.strip():
                try:
                    message, end = decoder.raw_decode(buffered.lstrip())
                except ValueError:
                    break
                buffered = buffered.lstrip()[end:]
                if message.get("id") != 0:
                    continue
                rows = message["result"][0]["rows"]
                return any(dict(row["external_ids"][1]).get("system-id") for row in rows)


while True:
    try:
        if chassis():
            break
    except Exception:
        pass
    print("waiting for the OVN chassis: no system-id in the Open_vSwitch external_ids", flush=True)
    time.sleep(2)
