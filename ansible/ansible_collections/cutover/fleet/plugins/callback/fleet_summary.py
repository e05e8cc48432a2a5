# -*- coding: utf-8 -*-

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: fleet_summary
type: aggregate
short_description: Summarise a fleet upgrade, cluster by cluster
description:
  - At the end of a playbook run, prints one line per cluster (inventory host) of the fleet, as
    upgraded or downgraded (with the versions, the run and C(down), the longest time the
    application's clients could not be served, the longest node's downtime for a rolling run),
    staged (a pre-cache alone), already at the target, failed (with cutover's exit code and
    message), unreachable or untouched; in check mode would-upgrade, would-downgrade or
    would-stage.
  - It is printed even when the fleet stopped (a canary failed, a wave failed beyond
    C(max_fail_percentage)), when Ansible runs no further play.
  - The same summary can be written as JSON to a file.
  - The clusters are the hosts of the plays of the run; results are read from the tasks of
    M(cutover.fleet.cutover_upgrade), M(cutover.fleet.cutover_stage) and any other failed task.
version_added: 1.0.0
author:
  - cutover's authors
options:
  summary_file:
    description: Where to write the summary as JSON; none when empty.
    type: str
    default: ''
    env:
      - name: CUTOVER_FLEET_SUMMARY
    ini:
      - section: cutover_fleet_summary
        key: summary_file
requirements:
  - enable it with C(callbacks_enabled = cutover.fleet.fleet_summary) in ansible.cfg
"""

import json

from ansible import context
from ansible.plugins.callback import CallbackBase

# STATES are a cluster's states in the summary, in the order it counts them; docs/fleet.md's
# table of states must list the same (cmd/cutover's docs tests check it).
STATES = ["upgraded", "downgraded", "would-upgrade", "would-downgrade", "staged", "would-stage",
          "at-target", "failed", "unreachable", "untouched"]

UPGRADE = "cutover_upgrade"
STAGE = "cutover_stage"


def action_name(task):
    """Return the short name of a task's module (cutover.fleet.cutover_upgrade -> cutover_upgrade)."""
    name = getattr(task, "resolved_action", None) or task.action or ""
    return name.rsplit(".", 1)[-1]


class CallbackModule(CallbackBase):
    """Collects each cluster's outcome and prints it at the end."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cutover.fleet.fleet_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self.clusters = {}  # host name -> its entry, in the order the plays met them
        self.check_mode = False

    def entry(self, host):
        if host not in self.clusters:
            self.clusters[host] = dict(cluster=host, state="untouched", changed=False, rc=None,
                                       exit_meaning="", message="", task="", run=0, downtime=0.0,
                                       outage=0.0, rolling=False, direction="",
                                       node_downtime={}, backup="", staged=False, stage_message="")
            self.clusters[host]["from"] = ""
            self.clusters[host]["to"] = ""
        return self.clusters[host]

    def v2_playbook_on_play_start(self, play):
        self.check_mode = self.check_mode or bool(context.CLIARGS.get("check")) or play.check_mode is True
        try:
            inventory = play.get_variable_manager()._inventory
            hosts = inventory.get_hosts(play.hosts, ignore_restrictions=True)
        except Exception:  # an inventory this plugin cannot read: hosts are met as they report
            hosts = []
        for h in hosts:
            self.entry(h.get_name())

    def v2_runner_on_ok(self, result):
        r = result._result
        e = self.entry(result._host.get_name())
        name = action_name(result._task)
        if name == STAGE:
            e["staged"] = True
            e["stage_message"] = r.get("msg", "")
            if e["state"] == "untouched":
                e["to"] = r.get("version", "")
                check = self.check_mode or result._task.check_mode is True
                e["state"] = "would-stage" if check and r.get("changed") else "staged"
            return
        if name != UPGRADE:
            return
        e["task"] = result._task.get_name()
        e["rc"] = r.get("rc", 0)
        e["exit_meaning"] = r.get("exit_meaning", "")
        e["message"] = r.get("msg", "")
        e["from"], e["to"] = r.get("from", ""), r.get("to", "")
        e["run"] = r.get("run", 0)
        e["downtime"] = r.get("downtime", 0.0)
        e["outage"] = r.get("outage", 0.0)
        e["rolling"] = bool(r.get("rolling"))
        e["direction"] = r.get("direction", "")
        e["node_downtime"] = dict((k, round(v / 1e9, 3)) for k, v in (r.get("node_downtime_ns") or {}).items())
        e["backup"] = r.get("backup", "")
        e["changed"] = bool(r.get("changed"))
        e["would_stage"] = r.get("would_stage") or []
        switched = "downgrade" if e["direction"] == "downgrade" else "upgrade"
        if not e["changed"]:
            e["state"] = "at-target"
        elif self.check_mode or result._task.check_mode is True:
            e["state"] = "would-" + switched
        else:
            e["state"] = switched + "d"

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if ignore_errors:
            return
        r = result._result
        e = self.entry(result._host.get_name())
        e["state"] = "failed"
        e["task"] = result._task.get_name()
        e["rc"] = r.get("rc")
        e["exit_meaning"] = r.get("exit_meaning", "")
        e["message"] = r.get("msg", "") or r.get("stderr", "")
        if action_name(result._task) == UPGRADE:
            e["from"], e["to"] = r.get("from", ""), r.get("to", "")
            e["run"] = r.get("run", 0)
            e["rollback_run"] = r.get("rollback_run", 0)
            e["downtime"] = r.get("downtime", 0.0)
            e["outage"] = r.get("outage", 0.0)
            e["direction"] = r.get("direction", "")
            e["failures"] = r.get("failures", [])
            e["refusals"] = r.get("refusals", [])

    def v2_runner_on_unreachable(self, result):
        e = self.entry(result._host.get_name())
        e["state"] = "unreachable"
        e["task"] = result._task.get_name()
        e["message"] = result._result.get("msg", "")

    def v2_playbook_on_stats(self, stats):
        clusters = list(self.clusters.values())
        counts = {}
        for c in clusters:
            counts[c["state"]] = counts.get(c["state"], 0) + 1
        self._display.banner("CUTOVER FLEET SUMMARY")
        order = STATES
        self._display.display(", ".join("%s %d" % (s, counts[s]) for s in order if s in counts) or "no clusters")
        width = max([len(c["cluster"]) for c in clusters] + [7])
        for c in clusters:
            versions = ""
            if c["state"] in ("staged", "would-stage"):
                versions = c["to"]
            elif c["from"] or c["to"]:
                versions = "%s -> %s" % (c["from"] or "?", c["to"] or "?")
            line = "%-*s  %-13s  %-17s" % (width, c["cluster"], c["state"], versions)
            if c["state"] in ("upgraded", "downgraded"):
                line += "  down %.1fs%s  run %d" % (c["outage"], " (longest node, rolling)" if c["rolling"] else "", c["run"])
            elif c["state"] in ("staged", "would-stage"):
                line += "  %s" % c["stage_message"]
            elif c["state"] in ("failed", "unreachable"):
                detail = c["message"]
                if c["rc"] is not None and c["exit_meaning"]:
                    detail = "exit %s (%s): %s" % (c["rc"], c["exit_meaning"].split(":")[0], detail)
                line += "  %s: %s" % (c["task"], detail)
            self._display.display(line.rstrip())
        path = self.get_option("summary_file")
        if path:
            with open(path, "w") as f:
                json.dump(dict(check_mode=self.check_mode, counts=counts, clusters=clusters), f, indent=2, sort_keys=True)
                f.write("\n")
