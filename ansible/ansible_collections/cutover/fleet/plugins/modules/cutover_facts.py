#!/usr/bin/python
# -*- coding: utf-8 -*-

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cutover_facts
short_description: Read a cluster's state from the cutover on its master
description:
  - Runs C(cutover status) on the cluster's master, the inventory host, and returns its
    C(Status) document as facts (the live version, the run left pending, the nodes behind,
    every node's links and installed versions).
  - It changes nothing; it runs the same in check mode.
version_added: 1.0.0
author:
  - cutover's authors
requirements:
  - cutover on the master, with python3 for Ansible's modules.
options:
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
  facts:
    support: full
seealso:
  - module: cutover.fleet.cutover_upgrade
"""

EXAMPLES = r"""
- name: Read the cluster's state
  cutover.fleet.cutover_facts:

- name: Stop here when a run is pending on the cluster
  ansible.builtin.fail:
    msg: "run {{ cutover_pending.run }} to {{ cutover_pending.to }} is pending at {{ cutover_pending.stage }}"
  when: cutover_pending is not none

- name: List the nodes that missed a run
  ansible.builtin.debug:
    msg: "{{ item.node }} is at {{ item.version }}: {{ item.command }}"
  loop: "{{ cutover_behind }}"
"""

RETURN = r"""
ansible_facts:
  description: The cluster's state.
  returned: always
  type: complex
  contains:
    cutover_version:
      description: The version the cluster runs (the master's links); empty when they disagree.
      type: str
      sample: 3.0.2
    cutover_pending:
      description: The run left pending (C(run), C(from), C(to), C(direction), C(stage), C(state), C(past_ponr), C(rebooted), ...), or null.
      type: dict
    cutover_behind:
      description: The nodes that missed a run (C(node), C(version), C(command) that catches it up).
      type: list
      elements: dict
    cutover_installed:
      description: The versions installed on every online node that answered, in cutover's order. A node's copy of a version may be another build than its release; M(cutover.fleet.cutover_stage) compares them.
      type: list
      elements: str
    cutover_unreachable:
      description: The online nodes the master could not reach.
      type: list
      elements: str
    cutover_status:
      description: The whole C(Status) document (docs/json.md).
      type: dict
rc:
  description: cutover's exit code.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cutover.fleet.plugins.module_utils.cutover import (
    COMMON_ARGS,
    Cutover,
    error_message,
    exit_meaning,
)


def installed_everywhere(status):
    """Return the versions installed on every online node that answered."""
    common = None
    for node in status.get("nodes") or []:
        if node.get("offline") or not node.get("reachable"):
            continue
        versions = node.get("installed") or []
        common = list(versions) if common is None else [v for v in common if v in versions]
    return common or []


def main():
    module = AnsibleModule(argument_spec=dict(COMMON_ARGS), supports_check_mode=True)
    rc, status, err = Cutover(module).document(["status"], "Status")
    if rc not in (0, 1):
        module.fail_json(msg=error_message(None, err, rc), rc=rc, exit_meaning=exit_meaning(rc))
    facts = dict(
        cutover_version=status.get("version") or "",
        cutover_pending=status.get("pending"),
        cutover_behind=status.get("behind") or [],
        cutover_installed=installed_everywhere(status),
        cutover_unreachable=[n.get("name") for n in status.get("nodes") or []
                             if not n.get("offline") and not n.get("reachable")],
        cutover_status=status,
    )
    module.exit_json(changed=False, rc=rc, exit_meaning=exit_meaning(rc), ansible_facts=facts)


if __name__ == "__main__":
    main()
