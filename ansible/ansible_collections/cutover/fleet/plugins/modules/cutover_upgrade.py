#!/usr/bin/python
# -*- coding: utf-8 -*-

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cutover_upgrade
short_description: Switch a cluster to a version with the cutover on its master
description:
  - Runs C(cutover upgrade) on the cluster's master, the inventory host, and reads its JSON
    event stream. One inventory host is one cluster.
  - With C(to), it first asks C(cutover plan --to) whether the run would do anything. A cluster
    already at C(to) is left alone and reported unchanged. Otherwise it runs
    C(cutover upgrade --to=VERSION --yes); a run to C(to) left pending (the master rebooted, a
    failure past the point of no return) is resumed, as cutover does for C(--to) of a pending run.
  - With C(resume) or C(abort), it continues or undoes an interrupted run; with none pending it
    changes nothing.
  - In check mode it runs C(cutover plan --to) only and fails listing every refusal, so a
    check run of a fleet shows each cluster that would refuse and why. With C(precached), a
    refusal because C(to) is not installed on a node is not one, as the caller stages the version
    before the run (the collection's playbook does, in its pre-cache), so the task lists those
    nodes in C(would_stage) and fails only for the other refusals.
  - On failure the module fails with cutover's own message, its exit code in C(rc) and what
    that code means in C(exit_meaning) (1 the cluster is as before, or, when a run to another
    version is pending, untouched by this run but in the middle of that one, 2 bad input, 3 a run is
    left pending (resume it), 4 another run holds the lock, 5 the host is not the master, 6 the
    run failed past its point of no return and the cluster's C([policy] on_failure = "rollback")
    took it back to the version it ran before, in the run C(rollback_run)).
  - A failed task keeps C(msg) to cutover's message (at most 600 characters) and bounds every
    other field (C(refusals), C(failures), C(stderr)); it carries neither the plan nor the
    run's events, so that Ansible's output of a failure stays short.
version_added: 1.0.0
author:
  - cutover's authors
requirements:
  - cutover on the master, with python3 for Ansible's modules.
options:
  to:
    description:
      - The version to switch the cluster to, up or down.
    type: str
  resume:
    description:
      - Continue an interrupted run (C(cutover upgrade --resume)).
    type: bool
    default: false
  abort:
    description:
      - Undo an interrupted run that is before its point of no return (C(cutover upgrade --abort)).
    type: bool
    default: false
  watch:
    description:
      - With C(to), whether the run watches the cluster after its finish as the cluster's
        C([policy] watch) says (the default). The task then returns only once the watch passed,
        failed or was rolled back.
      - C(false) passes C(--watch=0), and the task returns at the finish.
    type: bool
    default: true
  precached:
    description:
      - The caller stages C(to) on every node before the run (the collection's playbook does, in
        its pre-cache). In check mode a refusal because C(to) is not installed on a node then
        does not fail the task; the node is listed in C(would_stage). Outside check mode it
        changes nothing.
    type: bool
    default: false
  force:
    description:
      - Skippable checks to override, passed as C(--force=CHECK) each, e.g. C(unhealthy).
      - cutover never lets a missing version or a refused upgrade path be forced.
    type: list
    elements: str
    default: []
  config:
    description:
      - cutover's configuration file on the master; cutover's default (C(/etc/cutover/cutover.toml),
        or C($CUTOVER_CONFIG)) when omitted.
    type: path
  cutover_path:
    description:
      - The cutover program on the master.
    type: path
    default: /usr/sbin/cutover
notes:
  - The upgrade strategy (all at once or rolling, batches, canary nodes) is the cluster's own,
    set in its C(cutover.toml); the module has no flag to change it because cutover has none.
  - Use the task keywords C(async) and C(poll) to bound how long one cluster may take. When the
    time is up Ansible kills the module and cutover with it; cutover's journal keeps the run, and
    the next run of this module with the same C(to) (or cutover's C(@reboot) resume) finishes it.
attributes:
  check_mode:
    support: full
    details: Runs C(cutover plan) and changes nothing.
seealso:
  - module: cutover.fleet.cutover_facts
  - module: cutover.fleet.cutover_stage
"""

EXAMPLES = r"""
- name: Switch the cluster to 3.1.0
  cutover.fleet.cutover_upgrade:
    to: 3.1.0
  async: 3600   # give up on this cluster after an hour
  poll: 5
  register: upgrade

- name: Say how long the cluster's daemons were down
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }}: {{ upgrade.from }} -> {{ upgrade.to }}, down {{ upgrade.downtime }} s"
  when: upgrade is changed

- name: Upgrade an unhealthy cluster all the same
  cutover.fleet.cutover_upgrade:
    to: 3.1.0
    force: [unhealthy]
    config: /etc/cutover/ganeti.toml

- name: Finish a run left pending past its point of no return
  cutover.fleet.cutover_upgrade:
    resume: true

- name: Undo a run interrupted before its point of no return
  cutover.fleet.cutover_upgrade:
    abort: true
"""

RETURN = r"""
rc:
  description: cutover's exit code (0 done; 1 rolled back or refused; 2 bad input; 3 a run is left pending; 4 locked; 5 not the master; 6 rolled back by cutover's rollback policy).
  returned: always
  type: int
  sample: 0
exit_meaning:
  description: What C(rc) means.
  returned: always
  type: str
  sample: done
msg:
  description: cutover's message when the run failed, or what the module did.
  returned: always
  type: str
run:
  description: The run's id in the cluster's journal; 0 when no run was made.
  returned: always
  type: int
  sample: 7
from:
  description: The version the cluster ran before.
  returned: always
  type: str
  sample: 3.0.2
to:
  description: The version the run switched to (for an abort, the version it was going to).
  returned: always
  type: str
  sample: 3.1.0
direction:
  description: Which way the run switched the cluster, C(upgrade) or C(downgrade) (C(plan)'s direction in check mode).
  returned: always
  type: str
  sample: upgrade
rolling:
  description: Whether the run was a rolling one (the cluster's C(cutover.toml) decides).
  returned: always
  type: bool
outage_ns:
  description: >-
    The longest time the application's clients could not be served, in nanoseconds: C(downtime_ns)
    for an all-at-once run, the longest node's downtime for a rolling run (its other nodes serve
    meanwhile).
  returned: always
  type: int
  sample: 4120000000
outage:
  description: C(outage_ns) in seconds; the summary's C(down).
  returned: always
  type: float
  sample: 4.12
downtime_ns:
  description: >-
    How long some node's daemons were stopped, in nanoseconds (0 when they never were): for an
    all-at-once run from the first stop to the last start; never the time they served between
    two executions of a resumed run.
  returned: always
  type: int
  sample: 4120000000
downtime:
  description: C(downtime_ns) in seconds.
  returned: always
  type: float
  sample: 4.12
node_downtime_ns:
  description: Per node, how long its daemons were stopped, in nanoseconds.
  returned: when daemons were stopped
  type: dict
  sample: {"node1": 4120000000, "node2": 3900000000}
duration_ns:
  description: How long the run took, in nanoseconds.
  returned: always
  type: int
backup:
  description: The backup cutover took before the switch, on the master.
  returned: always
  type: str
  sample: /var/lib/cutover/backups/ganeti-3.0.2-to-3.1.0-20261121T180102Z.tar.gz
log:
  description: The run's log on the master.
  returned: always
  type: str
watched:
  description: Whether the run watched the cluster after its finish (C([policy] watch)); if so, the task returned after the watch.
  returned: always
  type: bool
rollback_run:
  description: The run that took the cluster back to the version it ran before after this one failed past its point of no return (C(rc) 6); 0 when none did.
  returned: always
  type: int
  sample: 8
failures:
  description: Per node, what failed (the stage, the node, the error, the command's exit code and the end of its stderr).
  returned: always
  type: list
  elements: dict
  sample: [{"stage": "verify-installed", "node": "node3", "error": "demoapp 3.1.0 is not installed", "exit_code": null, "stderr_tail": ""}]
stages:
  description: Each stage of the run with its last state (C(ok), C(failed), C(skipped), C(undone), ...).
  returned: when a run was made, and the task did not fail
  type: list
  elements: dict
done:
  description: cutover's C(done) event as it printed it.
  returned: when a run was made, and the task did not fail
  type: dict
plan:
  description: The C(Plan) document of C(cutover plan --to) (with C(to)); not in a failed task.
  returned: with C(to), when the task did not fail
  type: dict
refusals:
  description: Every check that refuses the run, from the plan (at most 20 in a failed task, each at most 600 characters).
  returned: with C(to)
  type: list
  elements: str
would_stage:
  description: In check mode with C(precached), the refusals because C(to) is not installed on a node, which the pre-cache answers.
  returned: in check mode with C(to)
  type: list
  elements: str
pending:
  description: The run left pending, from C(cutover status) (check mode with C(resume) or C(abort)).
  returned: in check mode with C(resume) or C(abort)
  type: dict
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cutover.fleet.plugins.module_utils.cutover import (
    COMMON_ARGS,
    Cutover,
    bounded,
    bounded_failures,
    bounded_list,
    error_message,
    exit_meaning,
    node_failures,
    seconds,
    short,
    stage_results,
)


def result_from_done(done, events):
    """Return the module's result fields from a run's done event and its events."""
    done = done or {}
    downtime = done.get("downtime_ns") or 0
    outage = done.get("outage_ns") or 0
    result = dict(
        run=done.get("run") or 0,
        rollback_run=done.get("rollback_run") or 0,
        watched=bool(done.get("watched")),
        duration_ns=done.get("duration_ns") or 0,
        direction=done.get("direction") or "",
        rolling=bool(done.get("rolling")),
        downtime_ns=downtime,
        downtime=seconds(downtime),
        outage_ns=outage,
        outage=seconds(outage),
        backup=done.get("backup") or "",
        log=done.get("log") or "",
        failures=node_failures(events),
        stages=stage_results(events),
        done=done,
    )
    result["from"] = done.get("from") or ""
    result["to"] = done.get("to") or ""
    if done.get("node_downtime_ns"):
        result["node_downtime_ns"] = done["node_downtime_ns"]
    return result


def empty_result(version_from="", version_to="", direction=""):
    """Return the result of a module that made no run."""
    result = dict(run=0, rollback_run=0, watched=False, duration_ns=0, direction=direction, rolling=False, downtime_ns=0,
                  downtime=0.0, outage_ns=0, outage=0.0, backup="", log="", failures=[])
    result["from"] = version_from
    result["to"] = version_to
    return result


def fail(module, msg, result):
    """Fail the module with cutover's message, keeping Ansible's output of it short: no plan, no
    events, every list and text bounded."""
    result = dict(result)
    for key in ("plan", "done", "stages"):
        result.pop(key, None)
    if "refusals" in result:
        result["refusals"] = bounded_list(result["refusals"])
    if "would_stage" in result:
        result["would_stage"] = bounded_list(result["would_stage"])
    result["failures"] = bounded_failures(result.get("failures"))
    if "stderr" in result:
        result["stderr"] = bounded(result["stderr"])
    module.fail_json(msg=short(msg), **result)


def pending_elsewhere(cutover, to):
    """Return the run pending to a version other than to, from cutover status, or None."""
    argv, rc, out, err = cutover._run(["status"])
    try:
        status = json.loads(out)
    except ValueError:
        return None
    pending = status.get("pending") if isinstance(status, dict) else None
    if isinstance(pending, dict) and pending.get("to") != to:
        return pending
    return None


def run_upgrade(module, cutover, args, plan=None, to=None):
    """Run cutover upgrade with args and exit the module with its outcome."""
    rc, events, done, err = cutover.events(["upgrade"] + args)
    result = result_from_done(done, events)
    result.update(rc=rc, exit_meaning=exit_meaning(rc), cmd=cutover.argv(["upgrade"] + args))
    if plan is not None:
        result.update(plan=plan, refusals=plan.get("refusals") or [])
    if done is None:
        fail(module, "cutover printed no done event: %s" % error_message(None, err, rc), dict(result, stderr=err))
    if rc != 0:
        if rc == 1 and to and plan is not None and any(c.get("name") == "pending" and not c.get("ok") for c in plan.get("checks") or []):
            result["exit_meaning"] = exit_meaning(rc, pending_elsewhere(cutover, to))
        fail(module, error_message(done, err, rc), dict(result, stderr=err))
    # A resume or an abort with nothing pending makes no run (run 0).
    changed = result["run"] != 0
    if not changed:
        result["msg"] = "no run is pending: nothing to do"
    elif args[0] == "--abort":
        result["msg"] = "run %d undone: the cluster is at %s" % (result["run"], result["from"])
    else:
        verb = "downgraded" if result["direction"] == "downgrade" else "switched"
        result["msg"] = "%s %s -> %s in run %d" % (verb, result["from"], result["to"], result["run"])
    module.exit_json(changed=changed, **result)


def upgrade_to(module, cutover):
    """Switch the cluster to the version module.params['to'] (or say what would be done)."""
    to = module.params["to"]
    plan_args = ["plan", "--to=" + to] + ["--force=" + f for f in module.params["force"]]
    rc, plan, err = cutover.document(plan_args, "Plan")
    refusals = plan.get("refusals") or []
    direction = plan.get("direction") or ""
    if plan.get("nothing") and not refusals:
        result = empty_result(plan.get("from") or to, to, direction)
        module.exit_json(changed=False, rc=0, exit_meaning=exit_meaning(0), plan=plan, refusals=[],
                         msg="the cluster already runs %s" % to, **result)
    if module.check_mode:
        result = empty_result(plan.get("from") or "", to, direction)
        # A node that lacks the version is no refusal when the caller stages it first.
        would_stage, others = [], []
        for c in plan.get("checks") or []:
            if c.get("ok"):
                continue
            text = "%s: %s" % (c["node"], c.get("message", "")) if c.get("node") else c.get("message", "")
            if module.params["precached"] and c.get("not_installed"):
                would_stage.append(text)
            else:
                others.append(text)
        result.update(rc=rc, exit_meaning=exit_meaning(rc), plan=plan, refusals=others, would_stage=would_stage)
        refused = bool(others) or rc not in (0, 1) or (not would_stage and (rc != 0 or not plan.get("proceed")))
        if refused:
            msg = "; ".join(others) or error_message(None, err, rc)
            fail(module, "cutover would refuse %s -> %s: %s" % (result["from"], to, msg), result)
        result.update(rc=0, exit_meaning=exit_meaning(0))
        verb = "would downgrade" if direction == "downgrade" else "would switch"
        msg = "%s %s -> %s" % (verb, result["from"], to)
        if would_stage:
            msg += " once the pre-cache has staged %s (not installed now: %s)" % (to, "; ".join(would_stage))
        module.exit_json(changed=True, msg=short(msg), **result)
    args = ["--to=" + to, "--yes"] + ["--force=" + f for f in module.params["force"]]
    if not module.params["watch"]:
        args.append("--watch=0")
    run_upgrade(module, cutover, args, plan=plan, to=to)


def resume_or_abort(module, cutover, flag):
    """Continue (--resume) or undo (--abort) the run left pending, if any."""
    if module.check_mode:
        rc, status, err = cutover.document(["status"], "Status")
        pending = status.get("pending")
        result = empty_result((pending or {}).get("from", ""), (pending or {}).get("to", ""))
        result.update(rc=0, exit_meaning=exit_meaning(0), pending=pending)
        if not pending:
            module.exit_json(changed=False, msg="no run is pending: nothing to do", **result)
        if flag == "--abort" and pending.get("past_ponr"):
            fail(module, "run %d is past its point of no return: it cannot be aborted; resume it" % pending.get("run", 0), result)
        module.exit_json(changed=True, msg="would %s run %d" % (flag[2:], pending.get("run", 0)), **result)
    run_upgrade(module, cutover, [flag])


def main():
    argument_spec = dict(
        to=dict(type="str"),
        resume=dict(type="bool", default=False),
        abort=dict(type="bool", default=False),
        force=dict(type="list", elements="str", default=[]),
        precached=dict(type="bool", default=False),
        watch=dict(type="bool", default=True),
    )
    argument_spec.update(COMMON_ARGS)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    chosen = [name for name in ("to", "resume", "abort") if module.params[name]]
    if len(chosen) != 1:
        module.fail_json(msg="give exactly one of to, resume=true and abort=true (got %s)" % (", ".join(chosen) or "none"),
                         rc=2, exit_meaning="usage or bad input: nothing was touched")
    cutover = Cutover(module)
    if module.params["to"]:
        upgrade_to(module, cutover)
    elif module.params["resume"]:
        resume_or_abort(module, cutover, "--resume")
    else:
        resume_or_abort(module, cutover, "--abort")


if __name__ == "__main__":
    main()
