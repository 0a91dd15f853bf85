package main

import (
	"runtime"
	"runtime/debug"
)

// version describes this build of redlock: the module version that "go
// install ...@version" records, or the source revision of a build from a
// checkout, and the Go version.
func version() string {
	v := "(unknown)"
	info, ok := debug.ReadBuildInfo()
	if ok {
		v = info.Main.Version
		var rev, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", modified"
				}
			}
		}
		if rev != "" && (v == "" || v == "(devel)") {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			v = "(devel) rev " + rev + modified
		}
	}
	return "redlock " + v + " " + runtime.Version()
}
