//go:build release

package upgrade

import "context"

// The release build has no test hooks: no crash point kills cutover and no stage is held,
// whatever the environment says (testhooks.go is the build with them).

// crashPoint does nothing in the release build.
func crashPoint(bool, string, ...any) {}

// holdAt does nothing in the release build.
func holdAt(context.Context, string) error { return nil }
