package cluster

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/cutover/cutover/test/demoapp"
)

func TestOptionsWithDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    Options
		want    Options // compared on Nodes and Live when wantErr is empty
		wantErr string
	}{
		{"defaults", Options{Name: "c1"}, Options{Nodes: DefaultNodes, Live: "1.0.0"}, ""},
		{"explicit", Options{Name: "c1", Nodes: 2, Live: "1.1.0"}, Options{Nodes: 2, Live: "1.1.0"}, ""},
		{"missing ok", Options{Name: "c1", Missing: map[string][]string{"node3": {"1.2.0"}}}, Options{Nodes: 4, Live: "1.0.0"}, ""},
		{"empty name", Options{}, Options{}, "cluster name"},
		{"name with slash", Options{Name: "a/b"}, Options{}, "cluster name"},
		{"upper-case name", Options{Name: "Demo"}, Options{}, "cluster name"},
		{"too many nodes", Options{Name: "c1", Nodes: maxNodes + 1}, Options{}, "nodes"},
		{"negative nodes", Options{Name: "c1", Nodes: -1}, Options{}, "nodes"},
		{"unknown live", Options{Name: "c1", Live: "9.9.9"}, Options{}, "live version \"9.9.9\" is not a demo application version [1.0.0 1.1.0 1.2.0]; for nodes without the demo application, start a bare cluster (make cluster-up BARE=1, clusterctl up -bare)"},
		{"missing on unknown node", Options{Name: "c1", Missing: map[string][]string{"node5": {"1.2.0"}}}, Options{}, "node5"},
		{"missing on bad name", Options{Name: "c1", Missing: map[string][]string{"node01": {"1.2.0"}}}, Options{}, "node01"},
		{"missing unknown version", Options{Name: "c1", Missing: map[string][]string{"node2": {"2.0.0"}}}, Options{}, "2.0.0"},
		{"missing live version", Options{Name: "c1", Missing: map[string][]string{"node2": {"1.0.0"}}}, Options{}, "live version 1.0.0 cannot be missing; for nodes without the demo application, start a bare cluster"},
		{"bare", Options{Name: "c1", Nodes: 2, Bare: true}, Options{Nodes: 2}, ""},
		{"bare with a live version", Options{Name: "c1", Bare: true, Live: "1.0.0"}, Options{}, "a bare cluster has no demo application"},
		{"bare with missing versions", Options{Name: "c1", Bare: true, Missing: map[string][]string{"node2": {"1.2.0"}}}, Options{}, "a bare cluster has no demo application"},
		{"bare with too many nodes", Options{Name: "c1", Bare: true, Nodes: maxNodes + 1}, Options{}, "nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.opts.withDefaults()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("withDefaults() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("withDefaults() error = %v", err)
			}
			if got.Nodes != tt.want.Nodes || got.Live != tt.want.Live || got.Logf == nil {
				t.Errorf("withDefaults() = nodes %d live %q logf set %v, want nodes %d live %q logf set",
					got.Nodes, got.Live, got.Logf != nil, tt.want.Nodes, tt.want.Live)
			}
		})
	}
}

func testNodes(n int) []Node {
	var nodes []Node
	for k := 1; k <= n; k++ {
		nodes = append(nodes, Node{Name: nodeName(k), Address: "10.77.1.1" + string(rune('0'+k)), Container: "c-" + nodeName(k)})
	}
	return nodes
}

func TestSpecs(t *testing.T) {
	t.Parallel()
	opts, err := Options{Name: "c1", Missing: map[string][]string{"node3": {"1.2.0"}, "node4": {"1.1.0", "1.2.0"}}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	specs := opts.specs(testNodes(4))
	want := map[string][]string{
		"node1": {"1.0.0", "1.1.0", "1.2.0"},
		"node2": {"1.0.0", "1.1.0", "1.2.0"},
		"node3": {"1.0.0", "1.1.0"},
		"node4": {"1.0.0"},
	}
	if len(specs) != 4 {
		t.Fatalf("specs() = %d specs, want 4", len(specs))
	}
	for _, s := range specs {
		if !slices.Equal(s.Versions, want[s.Name]) {
			t.Errorf("%s: Versions = %v, want %v", s.Name, s.Versions, want[s.Name])
		}
		if s.Master != "node1" || s.Live != "1.0.0" || len(s.Nodes) != 4 || s.Nodes[2] != (demoapp.NodeAddr{Name: "node3", Address: "10.77.1.13"}) {
			t.Errorf("%s: spec = %+v, want master node1, live 1.0.0, 4 nodes with node3 at 10.77.1.13", s.Name, s)
		}
	}
}

func TestNodeNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want int
		ok   bool
	}{
		{"node1", 1, true}, {"node12", 12, true}, {"node0", 0, false}, {"node01", 0, false},
		{"node", 0, false}, {"nodex", 0, false}, {"master", 0, false}, {"node-1", 0, false}, {"node+1", 0, false},
	}
	for _, tt := range tests {
		got, ok := nodeNumber(tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("nodeNumber(%q) = %d, %v, want %d, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseVeth(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "ip-link.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		index   int
		want    string
		wantErr bool
	}{
		{13, "vetha9cc92a", false},
		{23, "vethdd406a9", false},
		{131, "veth0c0ffee", false},
		{4, "eth0", false},
		{12, "", true}, // the container's end is not a host interface
		{1313, "", true},
	}
	for _, tt := range tests {
		got, err := parseVeth(string(data), tt.index)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseVeth(ip-link.txt, %d) = %q, %v, want %q, error %v", tt.index, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestNameFor(t *testing.T) {
	t.Parallel()
	names := map[string]string{}
	for _, test := range []string{
		"TestCluster", "TestCluster/sub", "TestUpgrade_Resume/After PONR (crash)",
		"TestAVeryLongTestNameThatGoesOnAndOnAndOnForeverAndEver", "Test---",
	} {
		got := nameFor(test)
		if !validName.MatchString(got) || len(got) > 40 {
			t.Errorf("nameFor(%q) = %q: not a valid cluster name of at most 40 characters", test, got)
		}
		if again := nameFor(test); again != got {
			t.Errorf("nameFor(%q) = %q, then %q; want the same", test, got, again)
		}
		if other, ok := names[got]; ok {
			t.Errorf("nameFor(%q) = nameFor(%q) = %q", test, other, got)
		}
		names[got] = test
	}
}

func TestSubnetIndex(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for _, name := range []string{"cutover-demo", "ct-testcluster-123456", "a", "b", "c", "zz"} {
		n := subnetIndex(name)
		if n < 1 || n > 254 {
			t.Errorf("subnetIndex(%q) = %d, want 1..254", name, n)
		}
		seen[n] = true
	}
	if len(seen) < 4 {
		t.Errorf("subnetIndex spreads 6 names over %d subnets, want at least 4", len(seen))
	}
}

func TestMasterKeyAndKnownHosts(t *testing.T) {
	t.Parallel()
	key, err := newMasterKey("root@node1")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(key.private)
	if err != nil {
		t.Fatalf("private key does not parse: %v", err)
	}
	pub, comment, _, _, err := ssh.ParseAuthorizedKey(key.public)
	if err != nil {
		t.Fatalf("public key does not parse: %v", err)
	}
	if !bytes.Equal(pub.Marshal(), signer.PublicKey().Marshal()) || comment != "root@node1" {
		t.Fatalf("public key %q (comment %q) does not match the private key", key.public, comment)
	}

	// The master's key stands in for a node's host key.
	node := Node{Name: "node2", Address: "10.77.1.12"}
	line, err := knownHostsLine(node, string(key.public))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	check, err := knownhosts.New(path)
	if err != nil {
		t.Fatalf("known_hosts line %q does not parse: %v", line, err)
	}
	other, err := newMasterKey("other")
	if err != nil {
		t.Fatal(err)
	}
	otherPub, _, _, _, _ := ssh.ParseAuthorizedKey(other.public)
	tests := []struct {
		host    string
		key     ssh.PublicKey
		wantErr bool
	}{
		{"node2:22", pub, false},
		{"10.77.1.12:22", pub, false},
		{"node2:22", otherPub, true},
		{"node3:22", pub, true},
	}
	for _, tt := range tests {
		err := check(tt.host, &netAddr{"10.77.1.12:22"}, tt.key)
		if (err != nil) != tt.wantErr {
			t.Errorf("known_hosts check of %s = %v, want error %v", tt.host, err, tt.wantErr)
		}
	}
	if _, err := knownHostsLine(node, "not a key"); err == nil {
		t.Error("knownHostsLine(garbage) = nil error, want one")
	}
}

type netAddr struct{ s string }

func (a *netAddr) Network() string { return "tcp" }
func (a *netAddr) String() string  { return a.s }

// fakeArtifacts are stand-in binaries: staging only copies them.
func fakeArtifacts(t *testing.T) *artifacts {
	t.Helper()
	dir := t.TempDir()
	bins := &demoapp.Binaries{Dir: dir, Paths: map[string]string{}}
	for _, v := range demoapp.Versions {
		p := filepath.Join(dir, "demoapp-"+v)
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+v+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		bins.Paths[v] = p
	}
	deb := filepath.Join(dir, "cutover.deb")
	if err := os.WriteFile(deb, []byte("!<arch>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &artifacts{bins: bins, deb: deb}
}

// tarEntry is what a staged archive says about one path.
type tarEntry struct {
	typ  byte
	mode int64
	link string
	uid  int
}

func readTar(t *testing.T, data []byte) map[string]tarEntry {
	t.Helper()
	entries := map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[hdr.Name] = tarEntry{hdr.Typeflag, hdr.Mode, hdr.Linkname, hdr.Uid}
	}
}

func TestStageTree(t *testing.T) {
	t.Parallel()
	art := fakeArtifacts(t)
	key, err := newMasterKey("root@node1")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := Options{Name: "c1", Missing: map[string][]string{"node3": {"1.2.0"}}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	specs := opts.specs(testNodes(4))
	tests := []struct {
		name       string
		spec       *demoapp.NodeSpec // nil: a bare node
		master     bool
		want       map[string]tarEntry // entries that must be there
		wantAbsent []string
	}{
		{"node1", specs[0], true, map[string]tarEntry{
			"./":                          {tar.TypeDir, 0o755, "", 0},
			"./root/":                     {tar.TypeDir, 0o700, "", 0},
			"./root/.ssh/":                {tar.TypeDir, 0o700, "", 0},
			"./root/.ssh/authorized_keys": {tar.TypeReg, 0o600, "", 0},
			"./root/.ssh/id_ed25519":      {tar.TypeReg, 0o600, "", 0},
			"./var/cache/cutover.deb":     {tar.TypeReg, 0o644, "", 0},
			"./etc/demoapp/lib":           {tar.TypeSymlink, 0o777, "/usr/lib/demoapp/1.0.0", 0},
			"./usr/lib/demoapp/default":   {tar.TypeSymlink, 0o777, "/etc/demoapp/lib", 0},
			"./usr/lib/demoapp/1.2.0/":    {tar.TypeDir, 0o755, "", 0},
		}, nil},
		{"node3", specs[2], false, map[string]tarEntry{
			"./root/.ssh/authorized_keys": {tar.TypeReg, 0o600, "", 0},
			"./etc/demoapp/share":         {tar.TypeSymlink, 0o777, "/usr/share/demoapp/1.0.0", 0},
			"./usr/lib/demoapp/1.1.0/":    {tar.TypeDir, 0o755, "", 0},
		}, []string{"./root/.ssh/id_ed25519", "./var/cache/cutover.deb", "./usr/sbin/cutover", "./usr/lib/demoapp/1.2.0/", "./usr/share/demoapp/1.2.0/", "./etc/cutover/cutover.toml"}},
		{"bare master", nil, true, map[string]tarEntry{
			"./":                          {tar.TypeDir, 0o755, "", 0},
			"./root/.ssh/":                {tar.TypeDir, 0o700, "", 0},
			"./root/.ssh/authorized_keys": {tar.TypeReg, 0o600, "", 0},
			"./root/.ssh/id_ed25519":      {tar.TypeReg, 0o600, "", 0},
			"./var/cache/cutover.deb":     {tar.TypeReg, 0o644, "", 0},
		}, []string{"./etc/demoapp/", "./usr/lib/demoapp/", "./var/lib/demoapp/", "./etc/boot.d/demoapp", "./etc/cutover/cutover.toml", "./etc/cutover/"}},
		{"bare node", nil, false, map[string]tarEntry{
			"./root/.ssh/authorized_keys": {tar.TypeReg, 0o600, "", 0},
		}, []string{"./root/.ssh/id_ed25519", "./var/cache/cutover.deb", "./etc/demoapp/", "./usr/lib/demoapp/", "./etc/boot.d/demoapp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			// A careless staging directory mode must not reach the node's /.
			if err := os.Chmod(root, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := stageTree(root, art, tt.spec, key, tt.master); err != nil {
				t.Fatalf("stageTree() = %v", err)
			}
			var buf bytes.Buffer
			if err := writeTar(&buf, root); err != nil {
				t.Fatalf("writeTar() = %v", err)
			}
			got := readTar(t, buf.Bytes())
			for name, want := range tt.want {
				e, ok := got[name]
				if !ok {
					t.Errorf("archive lacks %s", name)
					continue
				}
				if e.typ != want.typ || e.mode&0o7777 != want.mode || e.link != want.link {
					t.Errorf("%s = type %c mode %o link %q, want type %c mode %o link %q", name, e.typ, e.mode, e.link, want.typ, want.mode, want.link)
				}
			}
			for name, e := range got {
				if e.uid != 0 {
					t.Errorf("%s is owned by uid %d, want 0", name, e.uid)
				}
			}
			for _, name := range tt.wantAbsent {
				if _, ok := got[name]; ok {
					t.Errorf("archive has %s, want it absent", name)
				}
			}
		})
	}
}

func TestCopyTreeRefusesMergedUsrLinks(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"sbin", "lib", "bin"} {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, dir, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
		// The check comes before Docker is asked anything, so no container is needed.
		err := copyTree(t.Context(), root, "no-such-container")
		if err == nil || !strings.Contains(err.Error(), "/"+dir+" -> usr/"+dir) {
			t.Errorf("copyTree(tree with /%s) = %v, want a refusal naming the link", dir, err)
		}
	}
}

func TestDockerFailed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stderr string
		want   bool
	}{
		{"Error response from daemon: Container 1234 is not running\n", true},
		{"Error: No such container: ct-x-node1\n", true},
		{"Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n", true},
		{"demoapp: daemon-stop failed on demand\n", false},
		{"", false},
		{"ssh: connect to host node2 port 22: Connection timed out\n", false},
	}
	for _, tt := range tests {
		if got := dockerFailed(tt.stderr); got != tt.want {
			t.Errorf("dockerFailed(%q) = %v, want %v", tt.stderr, got, tt.want)
		}
	}
}

func TestResultErr(t *testing.T) {
	t.Parallel()
	if err := (Result{Stdout: "x"}).Err(); err != nil {
		t.Errorf("Result{exit 0}.Err() = %v, want nil", err)
	}
	err := Result{Stderr: "first\nthe reason\n", ExitCode: 3}.Err()
	if err == nil || err.Error() != "exit code 3: the reason" {
		t.Errorf("Result{exit 3}.Err() = %v, want \"exit code 3: the reason\"", err)
	}
}
