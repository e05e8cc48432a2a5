// Package fleet tests cutover's fleet layer, the Ansible collection in ansible/: the real
// ansible-playbook drives the fleet playbook against three container clusters (package
// test/cluster), each a master and a node, reached over SSH at their masters as an operator's
// Ansible reaches them. The tests also check that ansible-doc renders every plugin of the
// collection and that its Python compiles, run cutover_stage on this machine against a stub of
// cutover (which records its command lines and prints cutover's JSON), and compare the exit codes
// the collection knows with the ones cmd/cutover's source defines and documents.
//
// Ansible's modules run on the master in Python, which the node image lacks (a real master has
// it: Ganeti is written in Python). test/setup.sh downloads Debian's python3 packages into
// [DebsDir]; the tests unpack them into each master.
package fleet

// DebsDir is where test/setup.sh puts Debian's python3 packages for the clusters' masters;
// $CUTOVER_PYTHON_DEBS overrides it.
const DebsDir = "/var/cache/cutover-test/python3-debs"
