# -*- coding: utf-8 -*-
"""Running the cutover installed on a cluster's master and reading its JSON output.

cutover prints, with --output json, either an event stream (one JSON object per line, the last
one a "done" event) or one versioned document ({"apiVersion": "cutover/v1", "kind": ...}). Its
exit code means the same in both (docs/json.md). Nothing here reads cutover's text output.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# EXIT_MEANINGS are cutover's exit codes, in the words of its --help (the EXIT CODES of
# cmd/cutover/app.go, each code one of the exit* constants of cmd/cutover/main.go). test/fleet
# fails when the two disagree.
EXIT_MEANINGS = {
    0: "done",
    1: "failed and rolled back, or a check refused the run: the cluster is as before",
    2: "usage or bad input: nothing was touched",
    3: "a run is left pending (failed past the point of no return, an undo failed, or it "
       "cannot go on now): the message names the nodes and what to run next",
    4: "another cutover run holds the lock",
    5: "this host is not the cluster's master",
    6: "the run failed past the point of no return and [policy] on_failure = \"rollback\" took "
       "the cluster back to the version it ran before: it runs that version now",
}

# COMMON_ARGS are the options every module of the collection takes.
COMMON_ARGS = dict(
    cutover_path=dict(type="path", default="/usr/sbin/cutover"),
    config=dict(type="path"),
)


# A refusal because a run to another version is pending exits 1, but the cluster is not "as
# before" that pending run: it is in its middle (its queue may be drained, its nodes mixed).
PENDING_MEANING = ("refused, nothing changed by this run: run %d (%s -> %s) is pending and holds the "
                   "cluster in its middle (its queue may be drained): resume it with to=%s, or abort it")

# How much of cutover's text a failed task carries: its message in msg, the rest in bounded
# fields, so that Ansible's output of a failure stays a few lines long.
MSG_LIMIT = 600
DETAIL_LIMIT = 2000
LIST_LIMIT = 20


def exit_meaning(rc, pending=None):
    """Return what cutover's exit code rc means; pending is the run pending to another version
    (from cutover status or plan) that refused this one, if any."""
    if rc == 1 and pending:
        return PENDING_MEANING % (pending.get("run", 0), pending.get("from", "?"), pending.get("to", "?"), pending.get("to", "?"))
    return EXIT_MEANINGS.get(rc, "unexpected exit code %d" % rc)


def bounded(text, limit=DETAIL_LIMIT):
    """Return text cut to limit characters, keeping its end (where errors are), and saying so."""
    text = text or ""
    if len(text) <= limit:
        return text
    return "[%d characters left out] ...%s" % (len(text) - limit, text[-limit:])


def short(text, limit=MSG_LIMIT):
    """Return text cut to limit characters, keeping its start (the message's subject)."""
    text = text or ""
    if len(text) <= limit:
        return text
    return text[:limit] + "... (%d more characters)" % (len(text) - limit)


def bounded_list(items, limit=LIST_LIMIT, each=MSG_LIMIT):
    """Return at most limit items of a list of strings, each cut to each characters."""
    out = [short(i, each) for i in (items or [])[:limit]]
    if len(items or []) > limit:
        out.append("... and %d more" % (len(items) - limit))
    return out


def bounded_failures(failures, limit=LIST_LIMIT):
    """Return at most limit per-node failures, their errors and stderr tails bounded."""
    out = []
    for f in (failures or [])[:limit]:
        f = dict(f)
        f["error"] = short(f.get("error", ""))
        f["stderr_tail"] = bounded(f.get("stderr_tail", ""), MSG_LIMIT)
        out.append(f)
    return out


class Cutover(object):
    """Cutover runs one cutover program for a module."""

    def __init__(self, module):
        self.module = module
        self.path = module.params["cutover_path"]
        self.config = module.params.get("config")

    def argv(self, args):
        """Return the command line of a cutover command with JSON output."""
        argv = [self.path, "--output", "json"]
        if self.config:
            argv += ["--config", self.config]
        return argv + list(args)

    def _run(self, args):
        argv = self.argv(args)
        rc, out, err = self.module.run_command(argv, environ_update={"LC_ALL": "C"})
        return argv, rc, out, err

    def events(self, args):
        """Run a command that prints an event stream; return (rc, events, done, stderr).

        done is the last event when it is a "done" event, otherwise None (cutover died, or is
        not the program at cutover_path).
        """
        argv, rc, out, err = self._run(args)
        events = []
        for line in out.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except ValueError:
                self.fail_output(argv, rc, out, err, "a line of its output is not JSON: %s" % line[:200])
        done = events[-1] if events and events[-1].get("type") == "done" else None
        return rc, events, done, err

    def document(self, args, kind):
        """Run a command that prints one document of kind; return (rc, document, stderr)."""
        argv, rc, out, err = self._run(args)
        try:
            doc = json.loads(out) if out.strip() else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or doc.get("kind") != kind:
            self.fail_output(argv, rc, out, err, "want a %s document" % kind)
        return rc, doc, err

    def fail_output(self, argv, rc, out, err, why):
        """Fail the module because cutover's output could not be read."""
        self.module.fail_json(
            msg=short("%s: %s (exit code %d: %s)" % (" ".join(argv), why, rc, last_line(err) or last_line(out))),
            rc=rc, exit_meaning=exit_meaning(rc), cmd=argv, stdout=bounded(out), stderr=bounded(err))


def last_line(text):
    """Return the last non-empty line of text."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def error_message(done, stderr, rc):
    """Return cutover's own message for a command that exited rc."""
    if done and done.get("error"):
        return done["error"]
    line = last_line(stderr)
    if line:
        return line
    return "cutover exited %d: %s" % (rc, exit_meaning(rc))


def node_failures(events):
    """Return the per-node failures of a run's events: stage, node, error, exit_code, stderr_tail."""
    failures = []
    seen = set()
    for e in events:
        if e.get("type") not in ("stage", "undo", "batch"):
            continue
        for n in e.get("nodes") or []:
            if n.get("ok"):
                continue
            key = (e.get("stage"), n.get("node"), n.get("error"))
            if key in seen:
                continue
            seen.add(key)
            failures.append(dict(
                stage=e.get("stage", ""),
                node=n.get("node", ""),
                error=n.get("error", ""),
                exit_code=n.get("exit_code"),
                stderr_tail=n.get("stderr_tail", ""),
            ))
    return failures


def stage_results(events):
    """Return each stage's last state in a run's events, in order: stage, state, ok, of, message."""
    order = []
    last = {}
    for e in events:
        if e.get("type") != "stage" or not e.get("stage"):
            continue
        name = e["stage"]
        if name not in last:
            order.append(name)
        last[name] = dict(stage=name, state=e.get("state", ""), ok=e.get("ok"), of=e.get("of"),
                          message=e.get("message", ""), ponr=bool(e.get("ponr")))
    return [last[name] for name in order]


def seconds(ns):
    """Return a duration in nanoseconds as seconds, rounded to the millisecond."""
    return round((ns or 0) / 1e9, 3)
