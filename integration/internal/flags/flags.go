// Package flags defines the chaos suite's command-line flags.
//
// `go test ./... -args -chaos.duration=10m` hands the flags to the test binary
// of every package in the module, and a binary that does not define a flag
// it is given fails; so every test package of the module imports this one,
// whether it uses the flags or not.
package flags

import (
	"flag"
	"time"
)

var (
	// Duration is how long the chaos scenarios of one backend run in all,
	// shared out among them.
	Duration = flag.Duration("chaos.duration", 9*time.Second,
		"total time of the chaos scenarios per backend, shared out among them (at least 1s each; each scenario also runs until each of its faults has been injected once)")
	// Seed replays a run: the nemesis's schedule and the clients' choices
	// derive from it. 0 picks a fresh one.
	Seed = flag.Uint64("chaos.seed", 0, "seed to replay a chaos run; 0 picks a fresh one")
	// Clients is the number of concurrent lockers.
	Clients = flag.Int("chaos.clients", 4, "concurrent lockers, each with its own Locker and connections")
	// Goroutines is how many goroutines share each client's Locker.
	Goroutines = flag.Int("chaos.goroutines", 4, "goroutines per client, sharing its Locker (locks pass between them by handoff)")
	// TTL is the lock TTL; fault durations and gaps scale with it.
	TTL = flag.Duration("chaos.ttl", 500*time.Millisecond,
		"lock TTL of the chaos clients; fault durations and gaps scale with it")
	// MaxHold bounds how long a client holds a lock.
	MaxHold = flag.Duration("chaos.maxhold", 150*time.Millisecond,
		"clients hold each lock for a random time below this (within its validity, unless paused)")
	// Keys is the number of lock keys the clients share.
	Keys = flag.Int("chaos.keys", 3, "lock keys the clients contend on")
	// LongHolds is the share of holds that last a quarter to half the TTL.
	LongHolds = flag.Float64("chaos.longholds", 0, "share of holds that last a quarter to half the TTL, whatever -chaos.maxhold says (in [0, 1])")
	// ClientProfiles is where client processes write CPU profiles.
	ClientProfiles = flag.String("chaos.clientprofiles", "", "directory where each client process writes its CPU profile (none when empty)")
	// Availability, when set, runs the availability measurement (package
	// availability) with phases this long.
	Availability = flag.Duration("chaos.availability", 0,
		"phase length of the availability measurement: each minority fault on one node of five for a phase, against a phase without, alternated (0 skips it)")
	// Processes is the number of client processes.
	Processes = flag.Int("chaos.processes", 2, "client processes on top of the in-process clients (each one Locker; the client-stop fault freezes them)")
)
