#!/usr/bin/env python3
"""The main job's live view: reads `kubectl get novas,novacomputes -o json` on stdin and prints
every Nova's and NovaCompute's conditions as a table, saying plainly which conditions no step
of this build sets yet (the argument: `nova-controller conditions`, one per line, is what the
build's pipeline reports on) instead of showing them as pending.

Each NovaCompute shows its conditions and its node ledger (phase, zone, compute service).

Exit code: 0 when every Nova is Ready=True, 2 when the controller has reconciled the current
generation and Ready cannot become True because a sub-condition is not implemented yet, 1
otherwise (still converging)."""
import json
import sys

# The sixteen sub-conditions the aggregate Ready needs (nova-reconciler.txt, "Conditions"),
# in pipeline order, and ExtraConfigHealthy, reported outside the aggregate.
NOVA_CONDITIONS = [
    "SecretsReady", "ComputeConfigReady", "DatabaseReady", "ConductorReady", "SchedulerReady",
    "MetadataReady", "ConsoleProxyReady", "DeploymentReady", "DBArchiveReady", "NovaAPIReady",
    "HPAReady", "VPAReady", "NetworkPolicyReady", "HTTPRouteReady", "MetadataHTTPRouteReady",
    "ConsoleHTTPRouteReady",
]
WIDTH = 72


def short(text, width):
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def row(kind, status, reason, message):
    return f"  {kind:<24} {status:<8} {reason:<26} {short(message, WIDTH)}"


def nova_view(nova, implemented):
    meta, status = nova["metadata"], nova.get("status") or {}
    conditions = {c["type"]: c for c in status.get("conditions", [])}
    current = status.get("observedGeneration") == meta.get("generation")
    lines = [f"Nova {meta['namespace']}/{meta['name']}  (generation {meta.get('generation')}, "
             f"observed {status.get('observedGeneration', '-')})"]
    missing = []
    for kind in ["Ready"] + NOVA_CONDITIONS + ["ExtraConfigHealthy"]:
        c = conditions.get(kind)
        if c:
            lines.append(row(kind, c["status"], c.get("reason", ""), c.get("message", "")))
        elif kind in implemented or kind not in NOVA_CONDITIONS:
            lines.append(row(kind, "-", "", "not reported yet (an earlier step waits)"))
        else:
            lines.append(row(kind, "-", "NotImplementedYet", "no step of this build sets it"))
            missing.append(kind)
    ready = conditions.get("Ready", {}).get("status") == "True"
    return lines, ready, current and bool(missing) and not ready, missing


def pool_view(pool):
    """The pool's conditions and its node ledger."""
    meta, status = pool["metadata"], pool.get("status") or {}
    lines = [f"NovaCompute {meta['namespace']}/{meta['name']}  (Nova {pool['spec']['novaRef']['name']})"]
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
    if conditions and not nodes:
        lines.append("  no node: nothing matches spec.nodeSelector")
    return lines


def main():
    with open(sys.argv[1]) as f:
        implemented = {line.strip() for line in f if line.strip()}
    items = json.load(sys.stdin).get("items", [])
    novas = [i for i in items if i["kind"] == "Nova"]
    pools = [i for i in items if i["kind"] == "NovaCompute"]
    out, all_ready, stuck, missing = [], bool(novas), False, set()
    for nova in novas:
        lines, ready, unreachable, gaps = nova_view(nova, implemented)
        out += lines + [""]
        all_ready &= ready
        stuck |= unreachable
        missing.update(gaps)
    for pool in pools:
        out += pool_view(pool) + [""]
    if not novas:
        out.append("no Nova yet")
    if missing:
        out.append("Ready needs all sixteen sub-conditions; not implemented in this build yet: "
                   + ", ".join(k for k in NOVA_CONDITIONS if k in missing))
    print("\n".join(out))
    sys.exit(0 if all_ready else 2 if stuck else 1)


if __name__ == "__main__":
    main()
