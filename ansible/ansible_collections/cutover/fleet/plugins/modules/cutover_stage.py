#!/usr/bin/python
# -*- coding: utf-8 -*-

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cutover_stage
short_description: Pre-cache a version on every node of a cluster with cutover stage
description:
  - Runs C(cutover stage --version=VERSION SOURCE) on the cluster's master, the inventory host,
    and reads its JSON event stream. Every online node receives the version's two trees, checked
    against a SHA-256 manifest, ahead of the switch, so the upgrade window does not wait for the
    transfer.
  - C(src) is a release tarball or directory already on the master; copy it there first with
    M(ansible.builtin.copy) when it is on the controller.
  - cutover stage always runs, also when every node lists C(version) as installed, because
    cutover compares each node's trees with C(src) by their checksums, which is cheap when they
    are the same. A node whose trees are the release's is left alone; when every node's are, the
    task is unchanged. A node holding a different build of C(version) makes cutover refuse, and
    the task fails with its message, unless C(replace) is set, which replaces that copy
    (reported changed). So the fleet never switches to a build of the version other than C(src).
  - C(changed) is what cutover's C(done) event says, a node in C(nodes) but not in C(already)
    having received the trees (or, in check mode, being about to receive them).
  - cutover stage refuses the version a node runs (it never touches the live version) and a
    cluster with a run pending; the task fails with cutover's message then. The collection's
    playbook stages only on clusters that do not run the version and have no run pending.
  - In check mode it runs C(cutover stage --dry-run), which runs the same checks, compares the
    same checksums and changes nothing; the task fails where cutover would refuse and reports
    changed where a node would receive the trees.
  - On failure the module fails with cutover's own message, its exit code in C(rc) and what
    that code means in C(exit_meaning).
version_added: 1.0.0
author:
  - cutover's authors
requirements:
  - cutover on the master, with python3 for Ansible's modules.
options:
  version:
    description:
      - The version the trees are of.
    type: str
    required: true
  src:
    description:
      - The version's release tarball (C(.tar.gz)) or directory, on the master.
    type: path
    required: true
  replace:
    description:
      - Replace a different copy of the version on a node (never the live one), C(--replace).
        Without it, a node holding a copy of C(version) that differs from C(src) makes the task fail.
    type: bool
    default: false
  config:
    description:
      - cutover's configuration file on the master; cutover's default when omitted.
    type: path
  cutover_path:
    description:
      - The cutover program on the master.
    type: path
    default: /usr/sbin/cutover
attributes:
  check_mode:
    support: full
    details: Runs C(cutover stage --dry-run), which compares the nodes' trees with C(src) and changes nothing.
seealso:
  - module: cutover.fleet.cutover_upgrade
"""

EXAMPLES = r"""
- name: Put the release tarball on the master
  ansible.builtin.copy:
    src: releases/ganeti-3.1.0.tar.gz
    dest: /var/cache/cutover/ganeti-3.1.0.tar.gz
    mode: "0600"

- name: Pre-cache 3.1.0 on every node of the cluster
  cutover.fleet.cutover_stage:
    version: 3.1.0
    src: /var/cache/cutover/ganeti-3.1.0.tar.gz

- name: Put this build of 3.1.0 in place of a different one staged before
  cutover.fleet.cutover_stage:
    version: 3.1.0
    src: /var/cache/cutover/ganeti-3.1.0.tar.gz
    replace: true
"""

RETURN = r"""
rc:
  description: >-
    cutover's exit code (0 done; 1 refused (a different copy of the version, the live version,
    no disk space) or failed; 2 bad input; 3 a run is left pending; 4 locked; 5 not the master;
    6 rolled back by cutover's rollback policy).
  returned: always
  type: int
exit_meaning:
  description: What C(rc) means, in the words of C(cutover --help).
  returned: always
  type: str
msg:
  description: cutover's message when staging failed, or what was done.
  returned: always
  type: str
run:
  description: The stage run's id in the cluster's journal; 0 when none was made (check mode).
  returned: always
  type: int
version:
  description: The version staged.
  returned: always
  type: str
nodes:
  description: The online nodes cutover staged on, each holding the release's trees after the task (in check mode, the nodes it would stage on).
  returned: always
  type: list
  elements: str
already:
  description: The nodes that held the release's trees already (compared by checksums); nothing was sent to them.
  returned: always
  type: list
  elements: str
staged:
  description: The nodes that received the trees (in check mode, that would receive them); the task is changed when there is one.
  returned: always
  type: list
  elements: str
sent_bytes:
  description: The bytes sent to the nodes.
  returned: always
  type: int
failures:
  description: Per node, what failed (the stage, the node, the error, the command's exit code and the end of its stderr).
  returned: always
  type: list
  elements: dict
cmd:
  description: The command line of cutover stage.
  returned: always
  type: list
  elements: str
done:
  description: cutover's C(done) event as it printed it.
  returned: when cutover stage printed one
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cutover.fleet.plugins.module_utils.cutover import (
    COMMON_ARGS,
    Cutover,
    error_message,
    exit_meaning,
    node_failures,
)


def stage_args(params, check_mode):
    """Return the arguments of the cutover stage command the module runs."""
    args = ["stage", "--version=" + params["version"]]
    if params["replace"]:
        args.append("--replace")
    if check_mode:
        args.append("--dry-run")
    # cutover stage asks no confirmation (it has no --yes); SOURCE ends the command line.
    return args + ["--", params["src"]]


def main():
    argument_spec = dict(
        version=dict(type="str", required=True),
        src=dict(type="path", required=True),
        replace=dict(type="bool", default=False),
    )
    argument_spec.update(COMMON_ARGS)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    cutover = Cutover(module)
    version = module.params["version"]

    # cutover stage decides, never cutover status: a node that lists the version may hold
    # another build of it, which only stage's comparison with src finds.
    args = stage_args(module.params, module.check_mode)
    rc, events, done, err = cutover.events(args)
    result = dict(rc=rc, exit_meaning=exit_meaning(rc), version=version, run=0, nodes=[], already=[],
                  staged=[], sent_bytes=0, failures=node_failures(events), cmd=cutover.argv(args))
    if done is None:
        module.fail_json(msg="cutover printed no done event: %s" % error_message(None, err, rc), stderr=err, **result)
    nodes = done.get("nodes") or []
    already = done.get("already") or []
    staged = [n for n in nodes if n not in already]
    result.update(run=done.get("run") or 0, nodes=nodes, already=already, staged=staged,
                  sent_bytes=done.get("sent_bytes") or 0, done=done)
    if rc != 0:
        module.fail_json(msg=error_message(done, err, rc), stderr=err, **result)
    if not staged:
        result["msg"] = "%s is already staged on every node (%s): their trees are those of %s" % (
            version, ", ".join(already) or "none online", module.params["src"])
    else:
        verb = "would be staged" if module.check_mode else "staged"
        result["msg"] = "%s %s on %s" % (version, verb, ", ".join(staged))
        if already:
            result["msg"] += "; already on %s" % ", ".join(already)
    module.exit_json(changed=bool(staged), **result)


if __name__ == "__main__":
    main()
