// Package backup writes, verifies, lists and restores the archives cutover takes of an
// application's state before every switch (docs/design.md §4 "Backups", §9 "Hardening"). It never
// imports package upgrade: upgrade imports it, and hands it a [Scope] saying what a backup
// covers.
//
// # Format
//
// An archive is a gzip-compressed tar file, mode 0600, in a 0700 directory, named
// <app>-<from>-to-<to>-<UTC time>.tar.gz (or <app>-<version>-before-restore-<UTC time>.tar.gz
// for the state a restore kept aside). Its first entry is [ManifestName], a JSON [Manifest]
// (format 2) that records every other entry in archive order: its path, type (directory,
// regular file or symlink), owner, group, full mode (setuid, setgid and sticky bits
// included), modification time, and a regular file's size and sha256 or a symlink's target.
// The manifest also lists what the backup did not archive ([Skipped]: sockets, fifos,
// devices, links that lead elsewhere), and the two switch links with their targets. Entry
// names are the absolute paths without the leading slash, so `tar -C / -xpzf` restores an
// archive by hand. The manifest is a gzip member of its own ahead of the entries (a gzip
// file may hold several members; gzip and tar read them as one stream), which lets the
// writer checksum every file while it archives it and still put the manifest first.
//
// # Descriptors, not paths
//
// The users of an application may own directories in its state. A backup and a restore
// therefore never walk or open by path below the top-level directories: every directory is
// opened relative to its parent's descriptor with O_NOFOLLOW, every file is opened with
// O_NOFOLLOW and checked with fstat against the device and inode it was listed with, read
// and checksummed from that one descriptor, and written, chowned and chmodded through the
// descriptor it was created with. A link swapped in between is refused, never followed. Only
// a top-level directory that is itself a link (the state on another disk) is followed, once,
// on purpose. (os.Root does not do: it follows links that stay inside the root, and a user's
// directory swapped for a link to a root-only directory of the same state is such a link.)
//
// # What a restore writes
//
// A restore reads the archive through and checks it against its manifest before it writes
// anything ([Verify]), then checks the disk ([NewPlan]), then reads the archive again and
// writes exactly what it verified ([Plan.Restore]): each file and symlink to a temporary
// name in its directory, and only when the whole archive checked out a second time renamed
// into place; directories get their owner and mode last. A directory that is not the one the
// check saw (swapped for a link, or for another directory) stops the restore.
//
// # Links
//
// A symlink is archived and restored only when its target stays where the application's
// own links lead: the two switch links (<sysconfdir>/<app>/lib and share) must point at a
// version tree of this application, <libdir>/<app>/<VERSIONDIR> and
// <datadir>/<app>/<VERSIONDIR>; any other link must point, absolutely, into such a version
// tree or into one of the directories backed up, or, relatively, at something inside the
// directory backed up that holds it, without a ".." after a name. A backup lists any other
// link as skipped; a restore refuses an archive that holds one. See [Scope.CheckLink].
package backup
