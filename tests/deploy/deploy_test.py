"""The deploy/ folder checked the way its consumers read it: the Grafana dashboard's JSON as Grafana
imports it, the Kubernetes manifests against each other and against the server's real flags, the
PrometheusRule against the rule files it is generated from, and the compose demo's mounts.
(promtool checks the rule files themselves; the dashboard's queries run on a real Prometheus in
tests/e2e/observability_test.py.)

Usage: deploy_test.py SERVER_BINARY CLI_BINARY REPO_ROOT
"""
import json
import os
import re
import subprocess
import sys
import unittest

import yaml

SERVER, CLI, ROOT = sys.argv[1:4]
DEPLOY = os.path.join(ROOT, "deploy")
K8S = os.path.join(DEPLOY, "kubernetes", "base")


def load_yaml(*parts):
    with open(os.path.join(*parts)) as f:
        return yaml.safe_load(f)


class DashboardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(DEPLOY, "grafana", "dashboards", "kvledger.json")) as f:
            cls.d = json.load(f)
        cls.panels = cls.d["panels"]
        cls.leaves = [p for p in cls.panels if p["type"] != "row"]

    # Proves: the top-level fields Grafana needs to import the dashboard are there.
    def test_importable(self):
        for key in ("title", "uid", "schemaVersion", "panels", "templating", "time"):
            self.assertIn(key, self.d)
        self.assertGreaterEqual(self.d["schemaVersion"], 36)
        self.assertNotIn("id", self.d)  # an id would clash with the importing Grafana's own
        self.assertNotIn("__inputs", self.d)

    # Proves: panel ids are unique and no two panels overlap on the 24-column grid.
    def test_ids_and_layout(self):
        ids = [p["id"] for p in self.panels]
        self.assertEqual(len(ids), len(set(ids)))
        cells = {}
        for p in self.panels:
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), cells, f"{p['title']} overlaps {cells.get((x, y))}")
                    cells[(x, y)] = p["title"]

    # Proves: every datasource reference is the ${datasource} variable; no uid is hard-coded.
    def test_datasource_is_the_variable(self):
        text = json.dumps(self.d)
        self.assertEqual(set(re.findall(r'"uid": "([^"]*)"', text)) - {self.d["uid"]}, {"${datasource}"})
        for p in self.leaves:
            self.assertEqual(p["datasource"], {"type": "prometheus", "uid": "${datasource}"}, p["title"])
            for t in p["targets"]:
                self.assertEqual(t["datasource"], {"type": "prometheus", "uid": "${datasource}"}, p["title"])
        variables = {v["name"]: v for v in self.d["templating"]["list"]}
        self.assertEqual(variables["datasource"]["type"], "datasource")
        self.assertEqual(variables["datasource"]["query"], "prometheus")
        self.assertEqual(variables["job"]["query"]["query"], "label_values(kvledger_build_info, job)")
        for name in ("job", "model", "tier"):
            v = variables[name]
            self.assertTrue(v["multi"] and v["includeAll"], name)
        for name in ("model", "tier"):  # the values of the selected jobs
            self.assertEqual(variables[name]["query"]["query"],
                             f'label_values(kvledger_requests_total{{job=~"$job"}}, {name})')

    # Proves: where a recording rule records a counter's per-(job, model, tier) rate, the dashboard
    # reads that series instead of computing the rate again (rule and panel cannot drift), and every
    # recorded series it reads exists in the shipped rules.
    def test_panels_read_recorded_rates(self):
        with open(os.path.join(ROOT, "deploy", "prometheus", "rules", "kvledger-rules.yml")) as f:
            recorded = set(re.findall(r"record: (\S+)", f.read()))
        inputs = {name for name in recorded if re.fullmatch(r"model_tier:kvledger_\w+:rate5m", name)}
        for p in self.leaves:
            for t in p["targets"]:
                with self.subTest(panel=p["title"], ref=t["refId"]):
                    for name in re.findall(r"(\w+:kvledger_\w+:\w+)\{", t["expr"]):
                        self.assertIn(name, recorded)
                    for counter in re.findall(r"rate\(kvledger_(\w+)_total", t["expr"]):
                        self.assertNotIn(f"model_tier:kvledger_{counter}:rate5m", inputs, t["expr"])

    # Proves: every panel has a unit, a one-sentence description, and queries; every rate uses
    # $__rate_interval; every series is filtered by the job variable (one Prometheus may scrape several
    # kvledger fleets), and every per-request series by the model and tier variables.
    def test_panels(self):
        for p in self.leaves:
            with self.subTest(panel=p["title"]):
                self.assertTrue(p["fieldConfig"]["defaults"].get("unit"))
                self.assertTrue(p.get("description", "").strip())
                self.assertTrue(p["targets"])
                for t in p["targets"]:
                    windows = re.findall(r"\[([^\]]+)\]", t["expr"])
                    self.assertEqual(set(windows) - {"$__rate_interval"}, set(), t["expr"])
                    for series in re.findall(r"((?:\w+:)?kvledger_\w+(?::\w+)?)[\{\[)]", t["expr"]):
                        self.assertRegex(t["expr"], re.escape(series) + r'\{job=~"\$job"')
                        # Series without a tier label (unrecorded requests and the capacity curves have none)
                        # filter by model only.
                        # The rejected share divides by every record, whatever its model and tier.
                        all_records = (series in ("kvledger_requests_total", "model_tier:kvledger_requests:rate5m")
                                       and p["title"] == "Rejected share")
                        if not all_records and series not in (
                                "kvledger_records_rejected_total", "kvledger_model_label_folded_records_total",
                                "kvledger_build_info", "kvledger_model_info", "kvledger_unrecorded_requests_total") and \
                                "kvledger_capacity_" not in series:
                            self.assertRegex(t["expr"],
                                             re.escape(series) + r'\{job=~"\$job", model=~"\$model", tier=~"\$tier"')
                        if "kvledger_capacity_" in series:
                            self.assertRegex(t["expr"], re.escape(series) + r'\{job=~"\$job", model=~"\$model"')

    # Proves: the rows tell the story in order, from traffic to the profiles.
    def test_row_order(self):
        rows = [p["title"] for p in self.panels if p["type"] == "row"]
        expected = ["Traffic", "Logical", "Recoverable", "Reused", "Avoided attention", "Avoided prefill",
                    "Reload cost", "Alignment and restore", "Routing", "Where time to first token goes",
                    "TTFT bought by reuse", "Decode and the prefill's share", "Latency", "What more (or less) cache",
                    "What a second tier", "Models"]
        self.assertEqual(len(rows), len(expected))
        for row, start in zip(rows, expected):
            self.assertTrue(row.startswith(start), (row, start))

    # Proves: the provisioning files point Grafana at the dashboard folder and a Prometheus.
    def test_provisioning(self):
        providers = load_yaml(DEPLOY, "grafana", "provisioning", "dashboards", "kvledger.yml")["providers"]
        self.assertEqual(providers[0]["type"], "file")
        sources = load_yaml(DEPLOY, "grafana", "provisioning", "datasources", "kvledger.yml")["datasources"]
        self.assertEqual(sources[0]["type"], "prometheus")
        compose = load_yaml(DEPLOY, "compose", "compose.yaml")
        mounts = dict(v.rsplit(":", 1)[0].split(":", 1) for v in compose["services"]["grafana"]["volumes"])
        self.assertEqual(mounts["../grafana/dashboards"], providers[0]["options"]["path"])


class KubernetesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.kustomization = load_yaml(K8S, "kustomization.yaml")
        cls.docs = {}
        for name in cls.kustomization["resources"]:
            doc = load_yaml(K8S, name)
            cls.docs[(doc["kind"], doc["metadata"]["name"])] = doc
        cls.deployment = cls.docs[("Deployment", "kvledger")]
        cls.pod = cls.deployment["spec"]["template"]
        cls.container = cls.pod["spec"]["containers"][0]
        help_text = subprocess.run([SERVER, "--help"], capture_output=True, text=True, timeout=60).stdout
        cls.server_flags = set(re.findall(r"^  --(\w+)", help_text, re.M))

    def selects_pods(self, selector):
        labels = self.pod["metadata"]["labels"]
        return all(labels.get(k) == v for k, v in selector.items())

    # Proves: every selector selects the Deployment's pods, and the Deployment selects its own.
    def test_selectors_agree(self):
        self.assertTrue(self.selects_pods(self.deployment["spec"]["selector"]["matchLabels"]))
        for kind in ("Service", "PodDisruptionBudget"):
            for (k, name), doc in self.docs.items():
                if k == kind:
                    selector = doc["spec"]["selector"]
                    self.assertTrue(self.selects_pods(selector.get("matchLabels", selector)), name)
        hpa = self.docs[("HorizontalPodAutoscaler", "kvledger")]
        self.assertEqual((hpa["spec"]["scaleTargetRef"]["kind"], hpa["spec"]["scaleTargetRef"]["name"]),
                         ("Deployment", "kvledger"))

    # Proves: the ports the server listens on (its flags) are the container ports the Services and
    # probes use; the headless Service serves gRPC, and the PodMonitor scrapes the pods as job="kvledger".
    def test_ports_and_flags(self):
        args = dict(a[2:].split("=", 1) for a in self.container["args"])
        self.assertEqual(set(args) - self.server_flags, set(), "flags the server does not have")
        ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        self.assertEqual(args["grpc_address"], f"0.0.0.0:{ports['grpc']}")
        self.assertEqual(args["metrics_address"], f"0.0.0.0:{ports['metrics']}")
        grpc_service = self.docs[("Service", "kvledger-grpc")]
        self.assertEqual(grpc_service["spec"]["clusterIP"], "None")
        self.assertEqual(grpc_service["spec"]["ports"][0]["targetPort"], "grpc")
        metrics_service = self.docs[("Service", "kvledger")]
        self.assertEqual(metrics_service["spec"]["ports"][0]["targetPort"], "metrics")
        # Pod-role discovery (a PodMonitor): a pod being stopped stays a target until its process exits.
        monitor = self.docs[("PodMonitor", "kvledger")]
        self.assertNotIn(("ServiceMonitor", "kvledger"), self.docs)
        self.assertEqual(monitor["spec"]["podMetricsEndpoints"][0]["port"], "metrics")
        self.assertIn("metrics", ports)
        self.assertTrue(self.selects_pods(monitor["spec"]["selector"]["matchLabels"]))
        # job="kvledger", which the rules and alerts expect, from the pods' label jobLabel names.
        pod_labels = self.deployment["spec"]["template"]["metadata"]["labels"]
        self.assertEqual(pod_labels[monitor["spec"]["jobLabel"]], "kvledger")
        for probe in ("readinessProbe", "livenessProbe"):  # through gRPC health, never /metrics
            self.assertEqual(self.container[probe]["grpc"]["port"], ports["grpc"])

    # Proves: the NetworkPolicy selects the server's pods, lets only Prometheus reach the metrics port
    # (by name, the container port the Service targets) and the gRPC port to the namespace and to
    # namespaces labelled kvledger.io/reporters=true; the PodDisruptionBudget evicts one pod at a time.
    def test_network_policy(self):
        self.assertEqual(self.docs[("PodDisruptionBudget", "kvledger")]["spec"].get("maxUnavailable"), 1)
        self.assertNotIn("minAvailable", self.docs[("PodDisruptionBudget", "kvledger")]["spec"])
        policy = self.docs[("NetworkPolicy", "kvledger")]
        self.assertTrue(self.selects_pods(policy["spec"]["podSelector"]["matchLabels"]))
        self.assertEqual(policy["spec"]["policyTypes"], ["Ingress"])
        rules = {rule["ports"][0]["port"]: rule["from"] for rule in policy["spec"]["ingress"]}
        ports = {p["name"] for p in self.container["ports"]}
        self.assertEqual(set(rules), ports)
        (metrics_peer,) = rules["metrics"]
        self.assertEqual(metrics_peer["podSelector"]["matchLabels"], {"app.kubernetes.io/name": "prometheus"})
        self.assertIn("namespaceSelector", metrics_peer)  # Prometheus' namespace, not every namespace
        # The reporters: the namespace's pods and those of namespaces labelled for it (engines run elsewhere).
        self.assertEqual(rules["grpc"], [{"podSelector": {}},
                                         {"namespaceSelector": {"matchLabels": {"kvledger.io/reporters": "true"}}}])

    # Proves: --profiles names the file the ConfigMap generator ships, at the mounted path.
    def test_profiles_configmap(self):
        args = dict(a[2:].split("=", 1) for a in self.container["args"])
        generator = self.kustomization["configMapGenerator"][0]
        mount = self.container["volumeMounts"][0]
        volume = next(v for v in self.pod["spec"]["volumes"] if v["name"] == mount["name"])
        self.assertEqual(volume["configMap"]["name"], generator["name"])
        self.assertEqual(args["profiles"], os.path.join(mount["mountPath"], generator["files"][0]))
        self.assertTrue(os.path.exists(os.path.join(K8S, generator["files"][0])))

    # Proves: the profiles file the ConfigMap ships loads (the CLI uses the server's loader).
    def test_profiles_file_loads(self):
        result = subprocess.run([CLI, "kv-bytes", "--model", "llama-3.1-8b", "--tokens", "1", "--json",
                                 f"--profiles={os.path.join(K8S, 'profiles.textproto')}"],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout)["bytes_per_token"], 131072)

    # Proves: the pod runs hardened: non-root, read-only root, no capabilities, bounded resources.
    def test_hardening(self):
        pod_security = self.pod["spec"]["securityContext"]
        self.assertTrue(pod_security["runAsNonRoot"])
        self.assertNotEqual(pod_security["runAsUser"], 0)
        security = self.container["securityContext"]
        self.assertTrue(security["readOnlyRootFilesystem"])
        self.assertFalse(security["allowPrivilegeEscalation"])
        self.assertEqual(security["capabilities"]["drop"], ["ALL"])
        for kind in ("requests", "limits"):
            self.assertEqual(set(self.container["resources"][kind]), {"cpu", "memory"})

    # Proves: every counter a ratio rule divides by (job, model, tier) has its rate recorded in the
    # kvledger.inputs group (or model_tier:kvledger_requests:rate5m), so a fleet of fleets can sum any
    # ratio's parts; the job-level counters without model and tier (rejections, folding) are the
    # job: rules.
    def test_every_ratio_input_is_recorded(self):
        groups = load_yaml(DEPLOY, "prometheus", "rules", "kvledger-rules.yml")["groups"]
        recorded = {r["record"] for g in groups for r in g["rules"]}
        read = {c for g in groups if g["name"] not in ("kvledger.inputs", "kvledger.fleet") for r in g["rules"]
                for c in re.findall(r"rate\(kvledger_(\w+)_total", r["expr"])}
        for counter in sorted(read - {"records_rejected", "model_label_folded_records"}):
            self.assertIn(f"model_tier:kvledger_{counter}:rate5m", recorded, counter)

    # Proves: a ratio rule that reads a new counter gets its input rate from the generator, a job-level
    # counter and a counter recorded elsewhere get none, and nothing else in the file changes.
    def test_the_inputs_group_follows_the_ratios(self):
        sys.path.insert(0, os.path.join(DEPLOY, "kubernetes"))
        import importlib
        generator = importlib.import_module("generate-prometheusrule")
        rules = "\n".join([
            "groups:", "- name: kvledger.model_tier", "  rules:",
            "  - record: model_tier:kvledger_new:ratio_rate5m",
            "    expr: sum(rate(kvledger_new_things_total[5m])) / sum(rate(kvledger_requests_total[5m]))",
            "  - record: model_tier:kvledger_requests:rate5m",
            "    expr: sum without (instance) (rate(kvledger_requests_total[5m]))",
            "- name: kvledger.job", "  rules:", "  - record: job:kvledger_records_rejected:rate5m",
            "    expr: sum by (job) (rate(kvledger_records_rejected_total[5m]))",
            "- name: kvledger.inputs", "  rules:", "  - record: model_tier:kvledger_gone:rate5m",
            "    expr: sum without (instance) (rate(kvledger_gone_total[5m]))",
            "- name: kvledger.fleet", "  rules: []", ""])
        fresh = generator.with_inputs_group(rules)
        groups = {g["name"]: g["rules"] for g in yaml.safe_load(fresh)["groups"]}
        self.assertEqual([r["record"] for r in groups["kvledger.inputs"]], ["model_tier:kvledger_new_things:rate5m"])
        self.assertEqual(groups["kvledger.inputs"][0]["expr"], "sum without (instance) (rate(kvledger_new_things_total[5m]))")
        self.assertEqual(fresh.split("- name: kvledger.inputs")[0], rules.split("- name: kvledger.inputs")[0])
        self.assertTrue(fresh.endswith("- name: kvledger.fleet\n  rules: []\n"))

    # Proves: the PrometheusRule is the rule files, unchanged (one source), the inputs group is the
    # one the generator writes, and both are up to date.
    def test_prometheusrule_is_generated_from_the_rule_files(self):
        rule = self.docs[("PrometheusRule", "kvledger")]
        groups = load_yaml(DEPLOY, "prometheus", "rules", "kvledger-rules.yml")["groups"]
        groups += load_yaml(DEPLOY, "prometheus", "alerts", "kvledger-alerts.yml")["groups"]
        self.assertEqual(rule["spec"]["groups"], groups)
        check = subprocess.run([sys.executable, os.path.join(DEPLOY, "kubernetes", "generate-prometheusrule.py"),
                                "--check"], capture_output=True, text=True, timeout=60)
        self.assertEqual(check.returncode, 0, check.stderr)

    # Proves: the example overlay builds on the base and its patches point at what they mean to change.
    def test_overlay(self):
        overlay = load_yaml(DEPLOY, "kubernetes", "overlays", "example", "kustomization.yaml")
        self.assertEqual(overlay["resources"], ["../../base"])
        self.assertEqual(overlay["images"][0]["name"], self.kustomization["images"][0]["newName"])
        for patch in overlay["patches"]:
            target = self.docs[(patch["target"]["kind"], patch["target"]["name"])]
            for op in yaml.safe_load(patch["patch"]):
                node = target
                for part in op["path"].strip("/").split("/"):
                    node = node[int(part)] if isinstance(node, list) else node[part]
                if isinstance(op["value"], str) and op["value"].startswith("--"):
                    self.assertEqual(node.split("=")[0], op["value"].split("=")[0], op["path"])


class AlertsTest(unittest.TestCase):
    # Proves: every alert has a severity, a summary and description, and a runbook_url naming a
    # section that docs/runbook.md has.
    def test_alerts_have_runbooks(self):
        with open(os.path.join(ROOT, "docs", "runbook.md")) as f:
            anchors = {h.strip().lower() for h in re.findall(r"^## (.+)$", f.read(), re.M)}
        rules = load_yaml(DEPLOY, "prometheus", "alerts", "kvledger-alerts.yml")["groups"][0]["rules"]
        self.assertGreaterEqual(len(rules), 7)
        for rule in rules:
            with self.subTest(alert=rule["alert"]):
                self.assertTrue(rule["alert"].startswith("Kvledger"))
                self.assertIn(rule["labels"]["severity"], ("warning", "critical"))
                self.assertTrue(rule["annotations"]["summary"] and rule["annotations"]["description"])
                page, anchor = rule["annotations"]["runbook_url"].split("#")
                self.assertEqual(page, "docs/runbook.md")
                self.assertIn(anchor, anchors)


class ComposeTest(unittest.TestCase):
    # Proves: the compose demo mounts files that exist, its Prometheus loads the shipped rules, and
    # its replayer replays the example trace.
    def test_compose(self):
        compose = load_yaml(DEPLOY, "compose", "compose.yaml")
        self.assertEqual(set(compose["services"]), {"kvledger", "replayer", "prometheus", "grafana"})
        for service in compose["services"].values():
            for volume in service.get("volumes", []):
                source = volume.split(":")[0]
                self.assertTrue(os.path.exists(os.path.join(DEPLOY, "compose", source)), source)
        config = load_yaml(DEPLOY, "compose", "prometheus.yml")
        self.assertEqual(config["rule_files"], ["rules/kvledger-rules.yml", "alerts/kvledger-alerts.yml"])
        self.assertIn("/examples/trace.jsonl", compose["services"]["replayer"]["command"][0])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
