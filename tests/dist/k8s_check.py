#!/usr/bin/env python3
"""Checks what the Kubernetes schemas cannot: that the manifests of target/dist/kubernetes/
refer to each other rightly (selectors, named ports, probes, the token's secret, the image of
the release), and writes the ServiceMonitor documents as JSON for their own schema check.

    k8s_check.py VERSION SERVICEMONITORS_JSON MANIFEST...

Exits 1 naming every mismatch. Needs PyYAML (installed with kubernetes-validate).
"""

import json
import sys

import yaml

ADMIN_PORT = 9464
PROBE_PATHS = {"/healthz", "/readyz"}


def subset(small, big):
    return all(big.get(k) == v for k, v in (small or {}).items())


def toolsize_containers(pod_spec):
    return [c for c in pod_spec.get("containers", []) + pod_spec.get("initContainers", [])
            if c["image"].split(":")[0] == "toolsize"]


def main(version, monitors_out, *paths):
    errors = []
    docs = [d for p in paths for d in yaml.safe_load_all(open(p)) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    services = by_kind.get("Service", [])
    deployments = by_kind.get("Deployment", [])
    for dep in deployments:
        name = dep["metadata"]["name"]
        template = dep["spec"]["template"]
        labels = template["metadata"]["labels"]
        if not subset(dep["spec"]["selector"]["matchLabels"], labels):
            errors.append(f"{name}: selector does not match its pod labels")
        spec = template["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        daemons = toolsize_containers(spec)
        if not daemons:
            errors.append(f"{name}: no toolsize container")
        for c in daemons:
            if c["image"] != f"toolsize:{version}":
                errors.append(f"{name}: image {c['image']}, not toolsize:{version}")
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            if ports.get("admin") != ADMIN_PORT:
                errors.append(f"{name}: no admin port {ADMIN_PORT}")
            for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                probe = c.get(kind, {}).get("httpGet")
                if probe and (probe["port"] not in ports or probe["path"] not in PROBE_PATHS):
                    errors.append(f"{name}: {kind} on {probe}")
            if "livenessProbe" not in c:
                errors.append(f"{name}: no liveness probe")
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            token_file = env.get("TOOLSIZE_AUTH_TOKEN_FILE", "")
            mounts = [m for m in c.get("volumeMounts", []) if token_file.startswith(m["mountPath"] + "/")]
            if not mounts or "secret" not in volumes.get(mounts[0]["name"], {}):
                errors.append(f"{name}: TOOLSIZE_AUTH_TOKEN_FILE is not in a mounted secret")
            if not any(m["mountPath"] == "/var/lib/toolsize" for m in c.get("volumeMounts", [])):
                errors.append(f"{name}: no volume on the data directory")
            ctx = c.get("securityContext", {})
            if ctx.get("allowPrivilegeEscalation") is not False or not ctx.get("readOnlyRootFilesystem"):
                errors.append(f"{name}: container security context not locked down")
        annotations = template["metadata"].get("annotations", {})
        if annotations.get("prometheus.io/scrape") == "true":
            if annotations.get("prometheus.io/port") != str(ADMIN_PORT):
                errors.append(f"{name}: prometheus.io/port is not the admin port")
            if annotations.get("prometheus.io/path") != "/metrics":
                errors.append(f"{name}: prometheus.io/path is not /metrics")
    for svc in services:
        name = svc["metadata"]["name"]
        pods = [d for d in deployments if subset(svc["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])]
        if len(pods) != 1:
            errors.append(f"service {name} selects {len(pods)} deployments")
            continue
        named = {p["name"] for c in toolsize_containers(pods[0]["spec"]["template"]["spec"]) for p in c["ports"]}
        for p in svc["spec"]["ports"]:
            if p["targetPort"] not in named:
                errors.append(f"service {name}: targetPort {p['targetPort']} is no container port")
    monitors = by_kind.get("ServiceMonitor", [])
    for sm in monitors:
        name = sm["metadata"]["name"]
        sel = sm["spec"]["selector"]["matchLabels"]
        targets = [s for s in services if subset(sel, s["metadata"]["labels"])]
        if len(targets) != 1:
            errors.append(f"servicemonitor {name} selects {len(targets)} services")
            continue
        svc_ports = {p["name"] for p in targets[0]["spec"]["ports"]}
        for ep in sm["spec"]["endpoints"]:
            if ep["port"] not in svc_ports or ep.get("path") != "/metrics":
                errors.append(f"servicemonitor {name}: endpoint {ep}")
            secret = ep.get("authorization", {}).get("credentials", {}).get("name")
            used = {v["secret"]["secretName"] for d in deployments
                    for v in d["spec"]["template"]["spec"].get("volumes", []) if "secret" in v}
            if secret not in used:
                errors.append(f"servicemonitor {name}: scrapes without the daemon's token")
    if not monitors:
        errors.append("no ServiceMonitor")
    json.dump(monitors, open(monitors_out, "w"))
    for e in errors:
        print(f"k8s_check: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"k8s_check: {len(docs)} documents refer to each other rightly "
          f"({', '.join(sorted(by_kind))})")


if __name__ == "__main__":
    main(*sys.argv[1:])
