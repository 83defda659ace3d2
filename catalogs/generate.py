#!/usr/bin/env python3
"""Generate the per-release nova option catalogs (catalogs/<release>.json).

Usage (normally through generate.sh):
    generate.py [--check] [--fresh] [--release 2026.1 ...] [--out-dir DIR]

For every release this script
  1. creates a venv OUTSIDE the repository
     ($NOVA_CATALOG_CACHE or ~/.cache/nova-operator-catalogs, venv-<release>),
     upgrades pip and installs the pinned library set below (a venv whose pin
     stamp matches is reused; --fresh recreates it),
  2. reads nova's generator namespaces from the sdist's
     etc/nova/nova-config-generator.conf (pip download --no-binary :all:),
     falling back to the hard-coded FALLBACK_NAMESPACES,
  3. runs `oslo-config-generator --format json` for those namespaces and fails
     on any "Could not load" / "ERROR" line on stderr (the generator drops
     namespaces it cannot load and still exits 0),
  4. runs this same file inside the venv (`--venv-helper`) to collect what the
     generator output lacks (see "Additions" below) plus the `ignore_case`
     flag of choice options,
  5. normalises, folds deprecations, checks the plausibility floor and the
     facts the design documents rely on (FACTS), and writes the catalog.

Only the standard library is used outside the venv.

Catalog format (pretty JSON, sorted keys, one option per line, trailing
newline; no default values, they are machine-dependent):

  {
   "dynamic_sections": {"<prefix>": <section>, ...},
   "release": "2026.1",
   "sections": {"<section name>": <section>, ...},
   "service": "nova"
  }
  <section> = {
   "deprecated": {"<old key>": "[<section>] <new key>[, [<s2>] <k2>]" | ""},
   "opts": {"<dest>": {"type": "<type>",
                       "choices": [...],          # only when present
                       "ignore_case": true,       # only with choices
                       "min": N, "max": N,        # only when present
                       "deprecated_for_removal": true}}   # only when true
  }

Keys are the option `dest` (underscore spelling oslo.config reads from
files), never the dashed `name`.

Type normalisation (oslo.config type_name -> catalog type). The set is
closed: an unknown type_name fails the generation so a new type is never
silently mis-typed.
    "boolean value"        -> boolean      (checked by the webhook)
    "integer value"        -> integer      (checked: integer, min/max, choices)
    "floating point value" -> float        (checked: float, min/max)
    "port value", "port"   -> port         (checked: integer, min/max, choices)
    "string value"         -> string       (choices checked when present)
    "multi valued"         -> multistring  (may legitimately repeat)
    "list value"           -> list
    "dict value"           -> dict
    "uri value"            -> uri
    "IP address value"     -> ipaddress
    "hostname value"       -> hostname
    "host address value"   -> hostaddress
    "host domain value"    -> hostdomain
    "range value"          -> range
  The last six are string-like for the webhook.  Choices keep their native
  JSON type (strings; integers for integer options).  A `None` choice means
  "unset" and cannot be written in an INI file, so it is dropped.

Deprecation folding (common-types §3.15):
  * `deprecated_opts: [{group: g, name: n}]` on live option A of group G
    makes `n` a deprecated key of section `g` with replacement "[G] A".
    The alias section is created when it exists only as an alias section
    (e.g. [keymgr]).
  * A name that is live in a section is never also listed as deprecated
    there (e.g. [key_manager] auth_url): the live option wins.
  * One alias with several replacements (2026.1 [DEFAULT] network_device_mtu
    -> [os_vif_linux_bridge] and [os_vif_ovs]): the replacements are sorted
    and joined with ", ".
  * An alias whose replacement is itself deprecated for removal still names
    that replacement; the replacement carries "deprecated_for_removal": true.
  * `deprecated_for_removal: true` on a live option stays in `opts` with
    "deprecated_for_removal": true (its free-text reason is not kept).
  * The generator's inverse `deprecated_options` map must agree with the
    folded data (checked).

Additions (valid options the generator does not list):
  * keystoneauth plugin options: the union (by dest) of
    keystoneauth1.loading.get_auth_plugin_conf_options() over EVERY plugin
    registered under the `keystoneauth1.plugin` entry point, available or
    not (availability depends on optional packages such as requests-kerberos
    that do not change which keys are valid; using all keeps the catalog
    reproducible), added to every section that has keystoneauth's auth_type
    and auth_section (the 10 sections in AUTH_GROUPS; asserted).
  * [manila] adapter options: nova.conf.utils.get_ksa_adapter_opts() for
    manila's service type (nova registers them but omits them from its list).
  * [oslo_messaging_metrics] and, where oslo.messaging has it,
    [oslo_messaging_tracing] from oslo.messaging's own option lists.
  * privsep context sections [nova_sys_admin], [privsep_osbrick],
    [vif_plug_ovs_privileged], each with the [privsep] options.
  * [neutron_tunnel] numa_nodes, and the dynamic families [mdev_<type>],
    [vgpu_<type>] (deprecated alias of [mdev_<type>] device_addresses) and
    [neutron_physnet_<name>] under "dynamic_sections" keyed by prefix; all
    taken from nova's own register_dynamic_opts().  In a dynamic section's
    replacement text "<type>" / "<name>" stands for the matched suffix.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICE = "nova"

# Pinned library sets (option-catalogs.md "known-good catalogs").  Every
# option-registering library is pinned; pyroute2 registers no options but
# os_vif imports it without depending on it (pinned for reproducibility).
RELEASES = {
    "2026.1": {
        "nova": "33.0.2",
        "pins": [
            "nova[osprofiler]==33.0.2",
            "keystoneauth1==5.13.1",
            "keystonemiddleware==12.0.0",
            "castellan==5.6.0",
            "os-brick==7.0.0",
            "os_vif==4.3.0",
            "oslo.cache==4.1.1",
            "oslo.concurrency==7.4.1",
            "oslo.config==10.3.0",
            "oslo.db==18.0.0",
            "oslo.limit==2.10.0",
            "oslo.log==8.1.0",
            "oslo.messaging==17.3.0",
            "oslo.middleware==8.0.0",
            "oslo.policy==5.0.0",
            "oslo.privsep==3.10.1",
            "oslo.reports==3.7.0",
            "oslo.service==4.5.1",
            "oslo.versionedobjects==3.9.0",
            "osprofiler==4.3.0",
            "pyroute2==0.8.1",
        ],
    },
    "2026.2": {
        "nova": "34.0.0",
        "pins": [
            "nova[osprofiler]==34.0.0",
            "keystoneauth1==5.17.0",
            "keystonemiddleware==13.0.1",
            "castellan==5.8.0",
            "os-brick==7.1.1",
            "os_vif==5.2.1",
            "oslo.cache==4.3.0",
            "oslo.concurrency==7.6.1",
            "oslo.config==10.7.0",
            "oslo.db==18.1.1",
            "oslo.limit==2.12.0",
            "oslo.log==8.3.2",
            "oslo.messaging==18.3.0",
            "oslo.middleware==8.2.0",
            "oslo.policy==6.0.1",
            "oslo.privsep==3.12.0",
            "oslo.reports==3.9.0",
            "oslo.service==4.8.0",
            "oslo.versionedobjects==3.12.0",
            "osprofiler==4.4.0",
            # os_vif 5.x imports pyroute2 without depending on it.
            "pyroute2==0.9.7",
        ],
    },
}

# Used only when the sdist cannot be downloaded or lacks the file.  Copied
# from etc/nova/nova-config-generator.conf (identical for nova 33.x and
# 34.0.0, see option-catalogs.md).  oslo.db is deliberately absent: nova
# registers [database]/[api_database] itself.
FALLBACK_NAMESPACES = [
    "nova.conf", "oslo.limit", "oslo.log", "oslo.messaging", "oslo.policy",
    "oslo.privsep", "oslo.service.periodic_task", "oslo.service.service",
    "oslo.middleware", "oslo.concurrency", "oslo.reports",
    "oslo.versionedobjects", "keystonemiddleware.auth_token", "osprofiler",
    "os_vif", "os_brick",
]

TYPE_MAP = {
    "boolean value": "boolean",
    "integer value": "integer",
    "floating point value": "float",
    "port value": "port",
    "port": "port",
    "string value": "string",
    "multi valued": "multistring",
    "list value": "list",
    "dict value": "dict",
    "uri value": "uri",
    "IP address value": "ipaddress",
    "hostname value": "hostname",
    "host address value": "hostaddress",
    "host domain value": "hostdomain",
    "range value": "range",
}

PRIVSEP_CONTEXT_SECTIONS = ["nova_sys_admin", "privsep_osbrick",
                            "vif_plug_ovs_privileged"]

# Placeholders used when registering nova's dynamic groups in the helper.
DYN_SUFFIX = "XXDYNXX"
DYNAMIC_FAMILIES = {  # prefix -> placeholder shown in replacement text
    "mdev_": "<type>",
    "vgpu_": "<type>",
    "neutron_physnet_": "<name>",
}

# Sections where keystoneauth plugin options are registered at run time.
AUTH_GROUPS = sorted([
    "barbican_service_user", "cinder", "ironic", "keystone",
    "keystone_authtoken", "manila", "neutron", "placement", "service_user",
    "vendordata_dynamic_auth"])

MIN_SECTIONS = 60
MIN_OPTIONS = 1000

# Facts the design documents rely on (option-catalogs.md).  Each entry:
# (section, key, expected type or None for "any", releases or None for all).
FACTS = [
    ("filter_scheduler", "build_failure_weight_multiplier", "float", None),
    ("filter_scheduler", "shuffle_best_same_weighed_hosts", "boolean", None),
    ("placement", "timeout", "integer", ["2026.1"]),
    ("placement", "timeout", "float", ["2026.2"]),
    ("api", "local_metadata_per_cell", None, None),
    ("scheduler", "discover_hosts_in_cells_interval", None, None),
    ("oslo_messaging_rabbit", "rabbit_quorum_queue", None, None),
    ("oslo_messaging_rabbit", "rabbit_transient_quorum_queue", None, None),
    ("oslo_messaging_rabbit", "use_queue_manager", None, None),
    ("vnc", "novncproxy_host", None, None),
    ("vnc", "novncproxy_port", "port", None),
    ("vnc", "novncproxy_base_url", None, None),
    ("DEFAULT", "web", None, None),
    # additions
    ("manila", "service_type", "string", None),
    ("manila", "valid_interfaces", "list", None),
    ("keystone_authtoken", "auth_url", "string", None),
    ("keystone_authtoken", "password", "string", None),
    ("service_user", "application_credential_secret", "string", None),
    ("placement", "system_scope", "string", None),
    ("nova_sys_admin", "helper_command", None, None),
    ("privsep_osbrick", "capabilities", None, None),
    ("vif_plug_ovs_privileged", "thread_pool_size", None, None),
    ("neutron_tunnel", "numa_nodes", "list", None),
    ("oslo_messaging_metrics", "metrics_enabled", "boolean", None),
    ("oslo_messaging_tracing", None, None, ["2026.2"]),
]
ABSENT_FACTS = [("api", "auth_strategy"), ("default", None)]
# (section, old key, expected replacement, releases or None)
DEPRECATION_FACTS = [
    ("keymgr", "fixed_key", "[key_manager] fixed_key", None),
    ("DEFAULT", "network_device_mtu",
     "[os_vif_linux_bridge] network_device_mtu, [os_vif_ovs] network_device_mtu",
     ["2026.1"]),
    ("vgpu_", "device_addresses", "[mdev_<type>] device_addresses", "dynamic"),
]


class GenerationError(Exception):
    pass


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Part 1: runs INSIDE the release venv (python generate.py --venv-helper)
# --------------------------------------------------------------------------

def _entry(opt, group, namespace):
    """Reduce an Opt to the generator's JSON entry fields we use."""
    from oslo_config import generator
    e = generator._build_entry(opt, group, namespace, None)
    return {
        "name": e["name"],
        "dest": e["dest"],
        "type": e["type"],
        "choices": [list(c) for c in e["choices"]],
        "min": e["min"],
        "max": e["max"],
        "deprecated_for_removal": bool(e["deprecated_for_removal"]),
        "deprecated_opts": e["deprecated_opts"],
    }


def venv_helper(namespaces):
    import warnings
    warnings.simplefilter("ignore")
    import importlib
    import importlib.metadata
    from oslo_config import cfg, generator
    from keystoneauth1 import loading as ks_loading

    out = {"ignore_case": [], "groups": {}, "dynamic": {},
           "ks_plugins": [], "ks_auth_opts": []}

    # ignore_case of choice options, from the same namespaces.
    groups = generator._get_groups(generator._list_opts(namespaces))
    for gname, gdata in groups.items():
        for _ns, opts in gdata["namespaces"]:
            for opt in opts:
                t = opt.type
                if getattr(t, "choices", None) and getattr(t, "ignore_case",
                                                           False):
                    out["ignore_case"].append([gname, opt.dest])

    def add(group, opts, namespace):
        lst = out["groups"].setdefault(group, [])
        for o in opts:
            lst.append(_entry(o, group, namespace))

    # keystoneauth plugin options (union over every registered plugin).
    names = sorted({ep.name for ep in importlib.metadata.entry_points(
        group="keystoneauth1.plugin")})
    out["ks_plugins"] = names
    seen = {}
    for name in names:
        loader = ks_loading.get_plugin_loader(name)
        for o in ks_loading.get_auth_plugin_conf_options(loader):
            e = _entry(o, "KSA", "keystoneauth1")
            prev = seen.get(o.dest)
            if prev is not None and prev["type"] != e["type"]:
                raise SystemExit("keystoneauth option %s has conflicting "
                                 "types %s / %s" % (o.dest, prev["type"],
                                                    e["type"]))
            if prev is None:
                seen[o.dest] = e
            else:  # merge alias lists deterministically
                for d in e["deprecated_opts"]:
                    if d not in prev["deprecated_opts"]:
                        prev["deprecated_opts"].append(d)
    out["ks_auth_opts"] = [seen[k] for k in sorted(seen)]

    # [manila] adapter options, exactly as nova registers them.
    import nova.conf.manila
    import nova.conf.utils
    add("manila", nova.conf.utils.get_ksa_adapter_opts(
        nova.conf.manila.DEFAULT_SERVICE_TYPE), "nova.conf")

    # oslo.messaging option lists it registers but does not list.
    for mod, attr, group in [
            ("oslo_messaging._metrics.client", "oslo_messaging_metrics",
             "oslo_messaging_metrics"),
            ("oslo_messaging._tracing.client", "oslo_messaging_tracing",
             "oslo_messaging_tracing")]:
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        add(group, getattr(m, attr), "oslo.messaging")

    # nova's dynamic groups, through nova's own registration functions.
    import nova.conf.devices
    import nova.conf.neutron
    conf = cfg.ConfigOpts()
    nova.conf.devices.register_opts(conf)
    # Only [neutron] physnets is needed (register_opts() also registers
    # keystoneauth options, not idempotently).
    conf.register_opts([o for o in nova.conf.neutron.ALL_OPTS
                        if o.dest == "physnets"], group="neutron")
    conf.set_override("enabled_mdev_types", [DYN_SUFFIX], group="devices")
    conf.set_override("physnets", [DYN_SUFFIX], group="neutron")
    before = set(conf._groups)
    nova.conf.devices.register_dynamic_opts(conf)
    nova.conf.neutron.register_dynamic_opts(conf)
    for gname in sorted(set(conf._groups) - before):
        opts = [v["opt"] for v in conf._groups[gname]._opts.values()]
        if gname.endswith(DYN_SUFFIX):
            out["dynamic"][gname] = [_entry(o, gname, "nova.conf")
                                     for o in opts]
        else:
            add(gname, opts, "nova.conf")
    json.dump(out, sys.stdout)


# --------------------------------------------------------------------------
# Part 2: orchestration (runs with the system python3, stdlib only)
# --------------------------------------------------------------------------

def cache_dir():
    return os.environ.get("NOVA_CATALOG_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "nova-operator-catalogs")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def ensure_venv(release, fresh):
    spec = RELEASES[release]
    venv = os.path.join(cache_dir(), "venv-" + release)
    stamp_path = os.path.join(venv, ".catalog-pins")
    stamp = json.dumps({"python": sys.version.split()[0],
                        "pins": spec["pins"]}, sort_keys=True)
    py = os.path.join(venv, "bin", "python")
    if not fresh and os.path.exists(stamp_path) and os.path.exists(py):
        with open(stamp_path) as f:
            if f.read() == stamp:
                log("[%s] reusing venv %s" % (release, venv))
                return venv
    if os.path.exists(venv):
        shutil.rmtree(venv)
    os.makedirs(cache_dir(), exist_ok=True)
    log("[%s] creating venv %s" % (release, venv))
    run([sys.executable, "-m", "venv", venv])
    run([py, "-m", "pip", "install", "-q", "--upgrade", "pip"])
    log("[%s] installing %s" % (release, " ".join(spec["pins"])))
    run([py, "-m", "pip", "install", "-q"] + spec["pins"])
    with open(stamp_path, "w") as f:
        f.write(stamp)
    return venv


def nova_namespaces(release, venv):
    version = RELEASES[release]["nova"]
    sdist_dir = os.path.join(cache_dir(), "sdist")
    os.makedirs(sdist_dir, exist_ok=True)
    path = os.path.join(sdist_dir, "nova-%s.tar.gz" % version)
    member = "nova-%s/etc/nova/nova-config-generator.conf" % version
    try:
        if not os.path.exists(path):
            run([os.path.join(venv, "bin", "python"), "-m", "pip", "download",
                 "-q", "--no-binary", ":all:", "--no-deps",
                 "nova==" + version, "-d", sdist_dir])
        with tarfile.open(path) as tf:
            text = tf.extractfile(member).read().decode()
        ns = re.findall(r"^namespace\s*=\s*(\S+)\s*$", text, re.M)
        if not ns:
            raise GenerationError("no namespace lines in " + member)
        if ns != FALLBACK_NAMESPACES:
            log("[%s] NOTE: sdist namespaces differ from the fallback list: "
                "%s" % (release, ns))
        return ns
    except (subprocess.CalledProcessError, OSError, KeyError,
            tarfile.TarError, GenerationError) as e:
        log("[%s] WARNING: cannot read %s (%s); using the hard-coded "
            "namespace list" % (release, member, e))
        return list(FALLBACK_NAMESPACES)


BAD_STDERR = re.compile(r"Could not load|\bERROR\b")


def check_stderr(what, stderr):
    bad = [ln for ln in stderr.splitlines() if BAD_STDERR.search(ln)]
    if bad:
        raise GenerationError("%s reported errors on stderr:\n  %s"
                              % (what, "\n  ".join(bad)))


def run_generator(venv, namespaces, workdir):
    out = os.path.join(workdir, "generator.json")
    cmd = [os.path.join(venv, "bin", "oslo-config-generator"),
           "--format", "json", "--output-file", out]
    for ns in namespaces:
        cmd += ["--namespace", ns]
    p = subprocess.run(cmd, capture_output=True, text=True)
    check_stderr("oslo-config-generator", p.stderr)
    if p.returncode != 0:
        raise GenerationError("oslo-config-generator exited %d:\n%s"
                              % (p.returncode, p.stderr))
    with open(out) as f:
        return json.load(f)


def run_helper(venv, namespaces):
    cmd = [os.path.join(venv, "bin", "python"), os.path.abspath(__file__),
           "--venv-helper"] + namespaces
    p = subprocess.run(cmd, capture_output=True, text=True)
    check_stderr("venv helper", p.stderr)
    if p.returncode != 0:
        raise GenerationError("venv helper exited %d:\n%s"
                              % (p.returncode, p.stderr))
    return json.loads(p.stdout)


def norm_opt(e):
    t = TYPE_MAP.get(e["type"])
    if t is None:
        raise GenerationError("unknown option type %r (%s); extend TYPE_MAP"
                              % (e["type"], e["dest"]))
    o = {"type": t}
    # generator choices are [value, description] pairs
    choices = [c[0] for c in e["choices"] if c[0] is not None]
    if choices:
        o["choices"] = choices
    if e["min"] is not None:
        o["min"] = e["min"]
    if e["max"] is not None:
        o["max"] = e["max"]
    if e["deprecated_for_removal"]:
        o["deprecated_for_removal"] = True
    return o


class Builder:
    """Collects live options and aliases, then folds the aliases."""

    def __init__(self):
        self.opts = {}      # section -> dest -> normalised opt
        self.aliases = {}   # section -> old name -> set of "[G] A"

    def add(self, group, e, override=False):
        sec = self.opts.setdefault(group, {})
        if e["dest"] in sec and not override:
            return False
        sec[e["dest"]] = norm_opt(e)
        for d in e["deprecated_opts"]:
            self.aliases.setdefault(d["group"], {}).setdefault(
                d["name"], set()).add("[%s] %s" % (group, e["dest"]))
        return True

    def sections(self):
        out = {}
        for s in sorted(set(self.opts) | set(self.aliases)):
            live = self.opts.get(s, {})
            dep = {}
            for old, repl in self.aliases.get(s, {}).items():
                if old in live:
                    continue  # the live option wins
                repl = {r for r in repl if r != "[%s] %s" % (s, old)}
                if repl:
                    dep[old] = ", ".join(sorted(repl))
            if live or dep:
                out[s] = {"deprecated": dep, "opts": live}
        return out


def build_catalog(release, gen, helper):
    b = Builder()
    for group, gdata in gen["options"].items():
        for e in gdata["opts"]:
            if e["dest"] in b.opts.get(group, {}):
                raise GenerationError("duplicate option [%s] %s"
                                      % (group, e["dest"]))
            b.add(group, e)
    for group, dest in helper["ignore_case"]:
        o = b.opts[group][dest]
        if "choices" in o:
            o["ignore_case"] = True
    generator_sections = set(b.opts)

    # keystoneauth plugin options wherever keystoneauth's auth_type /
    # auth_section pair is registered.  ([key_manager] has castellan's own
    # unrelated auth_type and no auth_section: castellan lists its auth keys.)
    auth_groups = sorted(g for g, opts in b.opts.items()
                         if "auth_type" in opts and "auth_section" in opts)
    if auth_groups != AUTH_GROUPS:
        raise GenerationError("keystoneauth groups %s != expected %s"
                              % (auth_groups, AUTH_GROUPS))
    for g in auth_groups:
        for e in helper["ks_auth_opts"]:
            e = dict(e, deprecated_opts=[
                dict(d, group=g if d["group"] == "KSA" else d["group"])
                for d in e["deprecated_opts"]])
            b.add(g, e)
    # [manila] adapter, oslo.messaging extras, [neutron_tunnel].
    for g, entries in sorted(helper["groups"].items()):
        for e in entries:
            b.add(g, e)
    # privsep context sections take the [privsep] options.
    for g in PRIVSEP_CONTEXT_SECTIONS:
        if g in b.opts:
            raise GenerationError("[%s] unexpectedly listed by the generator"
                                  % g)
        b.opts[g] = {k: dict(v) for k, v in b.opts["privsep"].items()}

    sections = b.sections()

    # dynamic families
    db = Builder()
    for gname, entries in sorted(helper["dynamic"].items()):
        for e in entries:
            db.add(gname, e)
    dyn = {}
    for gname, sec in db.sections().items():
        prefix = gname[:-len(DYN_SUFFIX)]
        if prefix not in DYNAMIC_FAMILIES:
            raise GenerationError("unexpected dynamic group %s" % gname)
        for k, r in sec["deprecated"].items():
            for p, ph in DYNAMIC_FAMILIES.items():
                r = r.replace("[%s%s]" % (p, DYN_SUFFIX), "[%s%s]" % (p, ph))
            if DYN_SUFFIX in r:
                raise GenerationError("dynamic alias to a static section: %s"
                                      % r)
            sec["deprecated"][k] = r
        dyn[prefix] = sec
    if sorted(dyn) != sorted(DYNAMIC_FAMILIES):
        raise GenerationError("dynamic families %s != %s"
                              % (sorted(dyn), sorted(DYNAMIC_FAMILIES)))

    # The generator's inverse map must agree with the folded data.
    for group, items in gen["deprecated_options"].items():
        for it in items:
            live = sections.get(group, {}).get("opts", {})
            if it["name"] in live:
                continue
            repl = "[%s] %s" % (it["replacement_group"],
                                it["replacement_name"].replace("-", "_"))
            got = sections.get(group, {}).get("deprecated", {}).get(
                it["name"], "")
            if repl not in got.split(", "):
                raise GenerationError("deprecated_options [%s] %s -> %s not "
                                      "folded (got %r)"
                                      % (group, it["name"], repl, got))

    cat = {"dynamic_sections": dyn, "release": release,
           "sections": sections, "service": SERVICE}
    stats = {
        "generator_sections": len(gen["options"]),
        "generator_options": sum(len(g["opts"])
                                 for g in gen["options"].values()),
        "auth_groups": auth_groups,
        "ks_plugins": len(helper["ks_plugins"]),
        "added_sections": sorted(set(sections) - generator_sections),
    }
    return cat, stats


def verify(release, cat):
    secs = cat["sections"]
    nopts = sum(len(s["opts"]) for s in secs.values())
    if len(secs) < MIN_SECTIONS or nopts < MIN_OPTIONS or "DEFAULT" not in secs:
        raise GenerationError("implausible catalog: %d sections, %d options, "
                              "DEFAULT %s" % (len(secs), nopts,
                                              "DEFAULT" in secs))
    for sec, key, typ, rels in FACTS:
        if rels and release not in rels:
            continue
        if sec not in secs:
            raise GenerationError("fact: section [%s] missing" % sec)
        if key is None:
            continue
        o = secs[sec]["opts"].get(key)
        if o is None:
            raise GenerationError("fact: [%s] %s missing" % (sec, key))
        if typ and o["type"] != typ:
            raise GenerationError("fact: [%s] %s is %s, expected %s"
                                  % (sec, key, o["type"], typ))
    for sec, key in ABSENT_FACTS:
        s = secs.get(sec)
        if key is None:
            if s is not None:
                raise GenerationError("fact: section [%s] must be absent"
                                      % sec)
        elif s and (key in s["opts"] or key in s["deprecated"]):
            raise GenerationError("fact: [%s] %s must be absent" % (sec, key))
    for sec, key, repl, rels in DEPRECATION_FACTS:
        if rels == "dynamic":
            got = cat["dynamic_sections"][sec]["deprecated"].get(key)
        elif rels and release not in rels:
            continue
        else:
            got = secs.get(sec, {}).get("deprecated", {}).get(key)
        if got != repl:
            raise GenerationError("fact: deprecated [%s] %s -> %r, expected "
                                  "%r" % (sec, key, got, repl))
    # every replacement names a live option; one alias is known to point at
    # an option that is itself deprecated for removal.
    for name, s in secs.items():
        for old, repl in s["deprecated"].items():
            for part in filter(None, repl.split(", ")):
                g, k = part[1:].split("] ")
                if k not in secs.get(g, {}).get("opts", {}):
                    raise GenerationError("[%s] %s -> %s: replacement is not "
                                          "a live option" % (name, old, repl))
    d = secs["DEFAULT"]["deprecated"].get("secure_proxy_ssl_header")
    if d != "[wsgi] secure_proxy_ssl_header" or not secs["wsgi"]["opts"][
            "secure_proxy_ssl_header"].get("deprecated_for_removal"):
        raise GenerationError("fact: [DEFAULT] secure_proxy_ssl_header -> "
                              "deprecated-for-removal [wsgi] option")
    ka = secs["key_manager"]
    if "auth_url" not in ka["opts"] or "auth_url" in ka["deprecated"]:
        raise GenerationError("fact: [key_manager] auth_url must be live and "
                              "not deprecated")
    for name, s in list(secs.items()) + list(
            cat["dynamic_sections"].items()):
        both = set(s["opts"]) & set(s["deprecated"])
        if both:
            raise GenerationError("[%s] lists %s as live and deprecated"
                                  % (name, sorted(both)))
        bad = [k for k in s["opts"] if "-" in k]
        if bad:
            raise GenerationError("[%s] dashed keys %s" % (name, bad))


def dumps(cat):
    """Deterministic pretty JSON: one option / deprecated entry per line."""
    def leaf(v):
        return json.dumps(v, sort_keys=True, ensure_ascii=False)

    def section(s, ind):
        pad = " " * ind
        lines = [pad + "{"]
        for part in ("deprecated", "opts"):
            items = sorted(s[part].items())
            if not items:
                lines.append('%s "%s": {},' % (pad, part))
                continue
            lines.append('%s "%s": {' % (pad, part))
            for i, (k, v) in enumerate(items):
                lines.append("%s  %s: %s%s" % (pad, leaf(k), leaf(v),
                                                "," if i < len(items) - 1
                                                else ""))
            lines.append("%s }," % pad)
        lines[-1] = lines[-1][:-1]
        lines.append(pad + "}")
        return lines

    def section_map(m, ind):
        pad = " " * ind
        lines = []
        items = sorted(m.items())
        for i, (name, s) in enumerate(items):
            body = section(s, ind + 1)
            body[0] = "%s %s: {" % (pad, leaf(name))
            if i < len(items) - 1:
                body[-1] += ","
            lines += body
        return lines

    out = ["{", ' "dynamic_sections": {']
    out += section_map(cat["dynamic_sections"], 1)
    out += [" },", ' "release": %s,' % leaf(cat["release"]),
            ' "sections": {']
    out += section_map(cat["sections"], 1)
    out += [" },", ' "service": %s' % leaf(cat["service"]), "}"]
    text = "\n".join(out) + "\n"
    if json.loads(text) != cat:  # the writer must round-trip exactly
        raise GenerationError("serialiser does not round-trip")
    return text


def generate(release, out_dir, fresh):
    t0 = time.time()
    venv = ensure_venv(release, fresh)
    t1 = time.time()
    namespaces = nova_namespaces(release, venv)
    with tempfile.TemporaryDirectory() as work:
        gen = run_generator(venv, namespaces, work)
    helper = run_helper(venv, namespaces)
    cat, stats = build_catalog(release, gen, helper)
    verify(release, cat)
    text = dumps(cat)
    path = os.path.join(out_dir, release + ".json")
    with open(path, "w") as f:
        f.write(text)
    secs = cat["sections"]
    nopts = sum(len(s["opts"]) for s in secs.values())
    ndep = sum(len(s["deprecated"]) for s in secs.values())
    log("[%s] generator: %d sections / %d options; catalog: %d sections, "
        "%d options, %d deprecated (%d keys), %d dynamic families, %d bytes; "
        "added sections %s; keystoneauth options (from %d plugins) in %s; "
        "venv %.0fs, generation %.0fs"
        % (release, stats["generator_sections"], stats["generator_options"],
           len(secs), nopts, ndep, nopts + ndep,
           len(cat["dynamic_sections"]), len(text.encode()),
           stats["added_sections"], stats["ks_plugins"],
           stats["auth_groups"], t1 - t0, time.time() - t1))
    return path


def main(argv):
    if argv[:1] == ["--venv-helper"]:
        venv_helper(argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temp dir and diff against the "
                         "committed catalogs")
    ap.add_argument("--fresh", action="store_true",
                    help="recreate the venvs even if their pins match")
    ap.add_argument("--release", action="append", choices=sorted(RELEASES),
                    help="only this release (repeatable; default: all)")
    ap.add_argument("--out-dir", default=HERE)
    args = ap.parse_args(argv)
    if sys.version_info < (3, 11):
        log("python >= 3.11 is required (nova 34 needs it)")
        return 2
    releases = args.release or sorted(RELEASES)
    try:
        if args.check:
            drift = False
            with tempfile.TemporaryDirectory() as tmp:
                for r in releases:
                    new = generate(r, tmp, args.fresh)
                    old = os.path.join(HERE, r + ".json")
                    with open(new, "rb") as f:
                        a = f.read()
                    try:
                        with open(old, "rb") as f:
                            b = f.read()
                    except FileNotFoundError:
                        b = None
                    if a != b:
                        drift = True
                        print("DRIFT: catalogs/%s.json" % r)
                        if b is not None:
                            subprocess.run(["diff", "-u", old, new])
            if drift:
                return 1
            print("catalogs up to date: %s" % ", ".join(releases))
        else:
            os.makedirs(args.out_dir, exist_ok=True)
            for r in releases:
                print("wrote %s" % generate(r, args.out_dir, args.fresh))
    except (GenerationError, subprocess.CalledProcessError) as e:
        log("generation FAILED: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
