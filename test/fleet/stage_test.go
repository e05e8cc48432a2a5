package fleet

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stubCutover is a shell script that stands in for cutover on the Ansible host of
// TestStageModule: it appends its arguments to a log, one invocation a line, and answers
// `status` with every node listing 1.0.0 and 1.1.0 as installed, and `stage` with the JSON
// events cutover prints (cmd/cutover/output_json.go) when the nodes hold what its mode says:
// same (this build of the version on every node), differs (another build of it on every node:
// refused without --replace, replaced with it), missing (node2 lacks it), locked (another run
// holds the lock). --dry-run changes what the done event says as cutover's does: no run, nothing
// sent.
const stubCutover = `#!/bin/sh
mode=%[1]q
log=%[2]q
sep=""
for a in "$@"; do printf '%%s%%s' "$sep" "$a" >>"$log"; sep="	"; done
echo >>"$log"
cmd="" replace=0 dry=0 version=""
for a in "$@"; do
	case "$a" in
	status|stage) [ -n "$cmd" ] || cmd=$a ;;
	--replace) replace=1 ;;
	--dry-run) dry=1 ;;
	--version=*) version=${a#--version=} ;;
	esac
done
t='"time":"2026-11-21T18:01:02Z"'
case "$cmd" in
status)
	cat <<'EOF'
{"apiVersion": "cutover/v1", "kind": "Status", "app": "demoapp", "master": "node1", "version": "1.0.0",
 "nodes": [{"name": "node1", "offline": false, "reachable": true, "live": "1.0.0", "installed": ["1.0.0", "1.1.0"]},
           {"name": "node2", "offline": false, "reachable": true, "live": "1.0.0", "installed": ["1.0.0", "1.1.0"]}],
 "pending": null, "behind": [], "problems": []}
EOF
	exit 0 ;;
stage) ;;
*) echo "cutover: stub: unexpected command: $*" >&2; exit 2 ;;
esac
run=7 dryf=""
if [ $dry = 1 ]; then run=0 dryf='"dry_run":true,'; fi
head="$t,\"type\":\"done\""
case "$mode" in
same)
	echo "{$t,\"type\":\"stage\",\"run\":$run,\"stage\":\"check\",\"index\":1,\"total\":3,\"where\":\"all\",\"state\":\"ok\",\"ok\":2,\"of\":2,\"message\":\"$version already staged on 2 nodes\"}"
	echo "{$head,\"exit\":0,$dryf\"run\":$run,\"version\":\"$version\",\"nodes\":[\"node1\",\"node2\"],\"already\":[\"node1\",\"node2\"],\"tree_bytes\":2048,\"sent_bytes\":0}"
	exit 0 ;;
missing)
	sent=2048; [ $dry = 1 ] && sent=0
	echo "{$head,\"exit\":0,$dryf\"run\":$run,\"version\":\"$version\",\"nodes\":[\"node1\",\"node2\"],\"already\":[\"node1\"],\"tree_bytes\":2048,\"sent_bytes\":$sent}"
	exit 0 ;;
differs)
	if [ $replace = 0 ]; then
		err="$version is installed but differs from what is to be staged: node1: usr/lib/demoapp/$version/usr/sbin/demoapp has other contents (checksum); node2: usr/lib/demoapp/$version/usr/sbin/demoapp has other contents (checksum); pass --replace to replace it"
		echo "{$t,\"type\":\"stage\",\"run\":$run,\"stage\":\"check\",\"index\":1,\"total\":3,\"where\":\"all\",\"state\":\"failed\",\"ok\":2,\"of\":2,\"message\":\"$err\"}"
		echo "{$head,\"exit\":1,$dryf\"run\":$run,\"version\":\"$version\",\"nodes\":[\"node1\",\"node2\"],\"tree_bytes\":2048,\"sent_bytes\":0,\"error\":\"$err\"}"
		echo "cutover: $err" >&2
		exit 1
	fi
	sent=4096; [ $dry = 1 ] && sent=0
	echo "{$head,\"exit\":0,$dryf\"run\":$run,\"version\":\"$version\",\"nodes\":[\"node1\",\"node2\"],\"tree_bytes\":2048,\"sent_bytes\":$sent}"
	exit 0 ;;
locked)
	err="the lock /var/lib/cutover/lock is held by run 6 (cutover upgrade, pid 4242 on node1)"
	echo "{$head,\"exit\":4,\"sent_bytes\":0,\"error\":\"$err\"}"
	echo "cutover: $err" >&2
	exit 4 ;;
esac
echo "cutover: stub: unknown mode $mode" >&2
exit 2
`

// stageCase is one task of TestStageModule's playbook and what it must report.
type stageCase struct {
	name    string
	mode    string // the stub's mode
	replace bool
	check   bool
	// what the task must report
	failed  bool
	changed bool
	rc      int
	msg     string   // a part of msg
	staged  []string // the nodes reported staged
	flags   []string // the flags of cutover stage, besides --version
}

// stageResult is the part of cutover_stage's result the test reads.
type stageResult struct {
	Failed      bool     `json:"failed"`
	Changed     bool     `json:"changed"`
	RC          int      `json:"rc"`
	ExitMeaning string   `json:"exit_meaning"`
	Msg         string   `json:"msg"`
	Run         int      `json:"run"`
	Nodes       []string `json:"nodes"`
	Already     []string `json:"already"`
	Staged      []string `json:"staged"`
	SentBytes   int      `json:"sent_bytes"`
}

// TestStageModule runs cutover_stage through ansible-playbook on this machine with a stub for
// cutover, where every node lists the version as installed: the module runs cutover stage
// whatever cutover status says, so a different build of the version fails the task with
// cutover's refusal, or is replaced with replace (changed), and only the same build on every
// node leaves the task unchanged; check mode adds --dry-run.
func TestStageModule(t *testing.T) {
	_, err := exec.LookPath("ansible-playbook")
	require(t, err == nil, "ansible-playbook is not installed (Debian's ansible-core)")
	dir := t.TempDir()
	const version, src = "1.1.0", "/var/cache/cutover/demoapp-1.1.0.tar.gz"
	meanings := collectionExitMeanings(t)
	cases := []stageCase{
		{name: "same", mode: "same", msg: "already staged on every node"},
		{name: "same_check", mode: "same", check: true, msg: "already staged on every node", flags: []string{"--dry-run"}},
		{name: "differs", mode: "differs", failed: true, rc: 1, msg: "differs from what is to be staged"},
		{name: "differs_check", mode: "differs", check: true, failed: true, rc: 1, msg: "differs from what is to be staged", flags: []string{"--dry-run"}},
		{name: "differs_replace", mode: "differs", replace: true, changed: true, msg: "1.1.0 staged on node1, node2", staged: []string{"node1", "node2"}, flags: []string{"--replace"}},
		{name: "differs_replace_check", mode: "differs", replace: true, check: true, changed: true, msg: "1.1.0 would be staged on node1, node2", staged: []string{"node1", "node2"}, flags: []string{"--replace", "--dry-run"}},
		{name: "missing", mode: "missing", changed: true, msg: "1.1.0 staged on node2; already on node1", staged: []string{"node2"}},
		{name: "locked", mode: "locked", failed: true, rc: 4, msg: "is held by run 6"},
	}
	var tasks strings.Builder
	for _, c := range cases {
		stub := filepath.Join(dir, "cutover-"+c.name)
		script := fmt.Sprintf(stubCutover, c.mode, filepath.Join(dir, c.name+".argv"))
		if err := os.WriteFile(stub, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&tasks, `    - name: %[1]s
      cutover.fleet.cutover_stage:
        version: %[2]q
        src: %[3]q
        replace: %[4]t
        cutover_path: %[5]q
      check_mode: %[6]t
      ignore_errors: true
      register: %[1]s
`, c.name, version, src, c.replace, stub, c.check)
	}
	var names []string
	for _, c := range cases {
		names = append(names, fmt.Sprintf("'%s': %s", c.name, c.name))
	}
	results := filepath.Join(dir, "results.json")
	playbook := fmt.Sprintf(`- hosts: localhost
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
%s    - name: results
      ansible.builtin.copy:
        content: "{{ {%s} | to_json }}"
        dest: %q
        mode: "0600"
`, tasks.String(), strings.Join(names, ", "), results)
	if err := os.WriteFile(filepath.Join(dir, "stage.yml"), []byte(playbook), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ansible-playbook", "-i", "localhost,", "-c", "local", filepath.Join(dir, "stage.yml"))
	cmd.Dir = ansibleDir(t)
	cmd.Env = append(os.Environ(),
		"ANSIBLE_CONFIG="+filepath.Join(ansibleDir(t), "ansible.cfg"),
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "ansible-tmp"),
		"ANSIBLE_REMOTE_TEMP="+filepath.Join(dir, "ansible-remote-tmp"),
		"CUTOVER_FLEET_SUMMARY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ansible-playbook: %v\n%s", err, out)
	}
	data, err := os.ReadFile(results)
	if err != nil {
		t.Fatalf("the tasks' results: %v\n%s", err, out)
	}
	var got map[string]stageResult
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("the tasks' results: %v\n%s", err, data)
	}

	for _, c := range cases {
		r, ok := got[c.name]
		if !ok {
			t.Errorf("%s: no result", c.name)
			continue
		}
		if r.Failed != c.failed || r.Changed != c.changed || r.RC != c.rc || !strings.Contains(r.Msg, c.msg) {
			t.Errorf("%s: failed=%t changed=%t rc=%d msg %q; want failed=%t changed=%t rc=%d msg with %q",
				c.name, r.Failed, r.Changed, r.RC, r.Msg, c.failed, c.changed, c.rc, c.msg)
		}
		if want := meanings[c.rc]; r.ExitMeaning != want {
			t.Errorf("%s: exit_meaning %q, want %q", c.name, r.ExitMeaning, want)
		}
		if !c.failed && !slices.Equal(r.Staged, c.staged) {
			t.Errorf("%s: staged %v, want %v", c.name, r.Staged, c.staged)
		}
		if c.check && !c.failed && (r.Run != 0 || r.SentBytes != 0) {
			t.Errorf("%s: check mode reports run %d, %d bytes sent; want none", c.name, r.Run, r.SentBytes)
		}
		// cutover stage ran, once, with the flags asked and nothing else: never cutover status,
		// whose list of installed versions says nothing of which build a node holds.
		argv, err := os.ReadFile(filepath.Join(dir, c.name+".argv"))
		if err != nil {
			t.Errorf("%s: cutover was never run: %v", c.name, err)
			continue
		}
		want := append(append([]string{"--output", "json", "stage", "--version=" + version}, c.flags...), "--", src)
		if lines := strings.Split(strings.TrimSuffix(string(argv), "\n"), "\n"); len(lines) != 1 || !slices.Equal(strings.Split(lines[0], "\t"), want) {
			t.Errorf("%s: cutover ran as\n%s\nwant once as %q", c.name, argv, want)
		}
	}
}
