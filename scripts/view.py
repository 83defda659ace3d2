#!/usr/bin/env python3
"""The main job's live view: reads `kubectl get novas,novacomputes -o json` on stdin and prints
every Nova's and NovaCompute's conditions as a table, saying plainly which conditions no step
of this build sets yet instead of showing them as pending. The argument is what
`nova-controller conditions` printed: every Nova condition type but Ready, in the order shown,
tagged `aggregated` when Ready needs it and `step` when a step of the build reports on it.

Each NovaCompute shows its conditions and its node ledger (phase, zone, compute service).
Until the view's goal is reached, its last line says what it waits for (the conditions that are
not True, with their reasons, and the nodes that are not Active): what a run that gives up names.

Usage: view.py CONDITIONS [--pools-active]. The goal is every Nova Ready=True; with
--pools-active also every NovaCompute Ready=True with at least one node, all of them Active.
Exit code: 0 when the goal is reached, 2 when the controller has reconciled the current
generation and a Nova's Ready cannot become True because a sub-condition is not implemented
yet, 3 when every Nova is Ready but a pool is not there yet (--pools-active), 1 otherwise
(still converging)."""
import json
import sys
from collections import namedtuple

WIDTH = 72

# The Nova condition types of the build: all but Ready in order, the ones Ready aggregates,
# and the ones a step reports on.
Build = namedtuple("Build", "order aggregated steps")


def read_build(path):
    """The build's Nova conditions from what `nova-controller conditions` printed."""
    build = Build([], set(), set())
    with open(path) as f:
        for name, *tags in (line.split() for line in f if line.strip()):
            build.order.append(name)
            if "aggregated" in tags:
                build.aggregated.add(name)
            if "step" in tags:
                build.steps.add(name)
    return build


def short(text, width):
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def row(kind, status, reason, message):
    return f"  {kind:<24} {status:<8} {reason:<26} {short(message, WIDTH)}"


def waits_on(name, conditions):
    """What keeps the object `name` from Ready: each reported sub-condition that is not True,
    or Ready itself when none is."""
    ready = conditions.get("Ready", {})
    if ready.get("status") == "True":
        return []
    held = [f"{name}: {c['type']} {c['status']} {c.get('reason', '')}".rstrip()
            for c in conditions.values() if c["type"] != "Ready" and c["status"] != "True"]
    return held or [f"{name}: Ready {ready.get('status', 'not reported')} {ready.get('reason', '')}".rstrip()]


def nova_view(nova, build):
    meta, status = nova["metadata"], nova.get("status") or {}
    conditions = {c["type"]: c for c in status.get("conditions", [])}
    current = status.get("observedGeneration") == meta.get("generation")
    lines = [f"Nova {meta['namespace']}/{meta['name']}  (generation {meta.get('generation')}, "
             f"observed {status.get('observedGeneration', '-')})"]
    missing = []
    for kind in ["Ready"] + build.order:
        c = conditions.get(kind)
        if c:
            lines.append(row(kind, c["status"], c.get("reason", ""), c.get("message", "")))
        elif kind in build.steps or kind not in build.aggregated:
            lines.append(row(kind, "-", "", "not reported yet (an earlier step waits)"))
        else:
            lines.append(row(kind, "-", "NotImplementedYet", "no step of this build sets it"))
            missing.append(kind)
    ready = conditions.get("Ready", {}).get("status") == "True"
    aggregated = {k: c for k, c in conditions.items() if k == "Ready" or k in build.aggregated}
    waits = waits_on(f"Nova {meta['namespace']}/{meta['name']}", aggregated)
    return lines, waits, current and bool(missing) and not ready, missing


def pool_view(pool):
    """The pool's conditions and its node ledger, and what keeps it from Ready with every node
    Active."""
    meta, status = pool["metadata"], pool.get("status") or {}
    name = f"NovaCompute {meta['namespace']}/{meta['name']}"
    lines = [f"{name}  (Nova {pool['spec']['novaRef']['name']})"]
    conditions = status.get("conditions", [])
    if not conditions:
        lines.append("  no status yet: the controller has not reconciled the pool")
    for c in conditions:
        lines.append(row(c["type"], c["status"], c.get("reason", ""), c.get("message", "")))
    nodes = status.get("nodes", [])
    for n in nodes:
        service = "/".join(v for v in (n.get("serviceStatus"), n.get("serviceState")) if v)
        lines.append(f"  node {n['name']:<19} {n['phase']:<10} zone {n.get('zone') or '-':<12} "
                     f"service {service or '-'}")
    # The Nodes step fills the ledger: before it reports, an earlier step waits.
    listed = any(c["type"] == "NodesReady" for c in conditions)
    if listed and not nodes:
        lines.append("  no node: nothing matches spec.nodeSelector")
    elif conditions and not nodes:
        lines.append("  no node yet: an earlier step waits")
    if not conditions:
        waits = [f"{name}: not reconciled yet"]
    else:
        waits = [f"{name}: node {n['name']} {n['phase']}" for n in nodes if n["phase"] != "Active"]
        waits += [f"{name}: no node matches spec.nodeSelector"] if listed and not nodes else []
        waits += waits_on(name, {c["type"]: c for c in conditions})
    return lines, waits


def main():
    build = read_build(sys.argv[1])
    pools_active = "--pools-active" in sys.argv[2:]
    items = json.load(sys.stdin).get("items", [])
    novas = [i for i in items if i["kind"] == "Nova"]
    pools = [i for i in items if i["kind"] == "NovaCompute"]
    out, nova_waits, pool_waits, stuck, missing = [], [], [], False, set()
    for nova in novas:
        lines, held, unreachable, gaps = nova_view(nova, build)
        out += lines + [""]
        nova_waits += held
        stuck |= unreachable
        missing.update(gaps)
    for pool in pools:
        lines, held = pool_view(pool)
        out += lines + [""]
        pool_waits += held if pools_active else []
    if not novas:
        nova_waits.append("no Nova yet")
    if pools_active and not pools:
        pool_waits.append("no NovaCompute yet")
    if missing:
        out.append(f"Ready needs all {len(build.aggregated)} sub-conditions; not implemented in this "
                   "build yet: " + ", ".join(k for k in build.order if k in missing))
    waits = nova_waits + pool_waits
    if waits:
        out.append("waiting for: " + "; ".join(waits))
    print("\n".join(out))
    sys.exit(0 if not waits else 2 if stuck else 1 if nova_waits else 3)


if __name__ == "__main__":
    main()
