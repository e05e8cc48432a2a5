#!/usr/bin/python
# -*- coding: utf-8 -*-

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cutover_stage
short_description: Pre-cache a version on every node of a cluster with cutover stage
description:
  - Runs C(cutover stage --version=VERSION SOURCE) on the cluster's master, the inventory host.
    Every online node receives the version's two trees, checked against a SHA-256 manifest, ahead
    of the switch, so the upgrade window does not wait for the transfer.
  - C(src) is a release tarball or directory already on the master; copy it there first with
    M(ansible.builtin.copy) when it is on the controller.
  - When every online node already holds C(version) (C(cutover status) says so), nothing is run and
    the task is unchanged; this is also the case for the version the cluster runs, which cutover
    stage would refuse.
  - In check mode it runs C(cutover stage --dry-run) and reports which nodes would receive it.
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
    details: Runs C(cutover stage --dry-run).
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
"""

RETURN = r"""
rc:
  description: cutover's exit code (0 done; 1 refused or rolled back; 2 bad input; 3 pending; 4 locked; 5 not the master).
  returned: always
  type: int
exit_meaning:
  description: What C(rc) means.
  returned: always
  type: str
msg:
  description: cutover's message when staging failed, or what was done.
  returned: always
  type: str
run:
  description: The stage run's id in the cluster's journal; 0 when none was made.
  returned: always
  type: int
version:
  description: The version staged.
  returned: always
  type: str
nodes:
  description: The nodes the version was staged on (or would be, in check mode).
  returned: always
  type: list
  elements: str
already:
  description: The nodes that held the version already.
  returned: always
  type: list
  elements: str
sent_bytes:
  description: The bytes sent to the nodes.
  returned: always
  type: int
done:
  description: cutover's C(done) event as it printed it.
  returned: when cutover stage ran
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

    rc, status, err = cutover.document(["status"], "Status")
    online = [n for n in status.get("nodes") or [] if not n.get("offline")]
    if online and all(n.get("reachable") and version in (n.get("installed") or []) for n in online):
        names = [n.get("name") for n in online]
        module.exit_json(changed=False, rc=0, exit_meaning=exit_meaning(0), run=0, version=version,
                         nodes=[], already=names, sent_bytes=0,
                         msg="%s is installed on every online node already" % version)

    args = ["stage", "--version=" + version]
    if module.params["replace"]:
        args.append("--replace")
    if module.check_mode:
        args.append("--dry-run")
    args.append(module.params["src"])
    rc, events, done, err = cutover.events(args)
    done = done or {}
    already = done.get("already") or []
    nodes = done.get("nodes") or []
    result = dict(rc=rc, exit_meaning=exit_meaning(rc), run=done.get("run") or 0, version=version,
                  nodes=nodes, already=already, sent_bytes=done.get("sent_bytes") or 0,
                  failures=node_failures(events), done=done, cmd=cutover.argv(args))
    if rc != 0 or not done:
        module.fail_json(msg=error_message(done, err, rc), stderr=err, **result)
    changed = bool(set(nodes) - set(already))
    verb = "would be staged" if module.check_mode else "staged"
    result["msg"] = "%s %s on %d nodes (%d had it)" % (version, verb, len(set(nodes) - set(already)), len(already))
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
