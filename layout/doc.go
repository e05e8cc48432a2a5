// Package layout reads and switches an application's side-by-side installation on one node:
// the version trees a package manager installs next to each other, and the two links that
// say which of them is live.
//
// # The tree
//
// For an application app with the directories of [Paths] (as ./configure names them):
//
//	<libdir>/<app>/<VERSIONDIR>/...          arch-dependent tree of one version
//	<datadir>/<app>/<VERSIONDIR>/...         arch-independent tree of one version
//	<sysconfdir>/<app>/lib   -> <libdir>/<app>/<VERSIONDIR>     the switch
//	<sysconfdir>/<app>/share -> <datadir>/<app>/<VERSIONDIR>    the switch
//	<libdir>/<app>/default   -> <sysconfdir>/<app>/lib          stable entry points,
//	<datadir>/<app>/default  -> <sysconfdir>/<app>/share        never touched here
//
// VERSIONDIR is MAJOR.MINOR (version_dirs "minor", Ganeti's default) or the whole version
// ("full"); see [Layout.DirOf]. Debian's ganeti packages install exactly this tree
// (/usr/lib/ganeti/3.0, /etc/ganeti/lib -> /usr/lib/ganeti/3.0).
//
// # Reading
//
// [Layout.Live] returns the live VERSIONDIR from both links, [Layout.Installed] lists the
// versions whose two trees both exist, and [Layout.CheckInstalled] checks one version.
//
// # Switching
//
// [Layout.Switch] points both links at another installed version. Each link is replaced
// atomically (a temporary symlink renamed over it) and read back; a node is either switched
// or left as it was. See its documentation for the exact steps. A switch that returned
// survives a power cut of the node: the links' directory is synced after the last change and
// before Switch returns, once for all the changes when the FS is a [NoSyncFS], or else by the
// [FS] as part of each change.
//
// # Nodes and roots
//
// Every method that touches a node takes its [FS]: [OSFS] for the local machine, or the
// caller's SFTP connection. A [Layout] made with a root other than "" or "/" prefixes every
// path it touches with that root (for tests and chroots) but writes and expects link targets
// without it, exactly as on a real node.
//
// # Errors
//
// Callers tell failures apart with predicates: [IsNotSideBySide] (a link is missing, is not a
// symlink, or points outside the version trees), [IsDisagree] (lib and share name different
// versions) and [IsNotInstalled] (a version lacks a tree). Messages name the path and what was
// found, using root-less paths; the caller adds the node.
package layout
