package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The program does what the README says, against three real servers.
func TestQuickStart(t *testing.T) {
	want := readmeBlock(t, "## Quick start", "text")
	var addrs []string
	for _, s := range redistest.StartT(t, 3, redistest.Options{}) {
		addrs = append(addrs, s.Addr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, &out, addrs); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("the quick start printed:\n%s\nthe README says:\n%s", out.String(), want)
	}
}

// Without addresses the program starts three servers of its own, runs the
// quick start against them, and stops them: nothing listens on their
// addresses afterwards.
func TestQuickStartLocal(t *testing.T) {
	want := readmeBlock(t, "## Quick start", "text")
	var log strings.Builder
	addrs, stop, err := localServers(3, &log)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 3 {
		t.Fatalf("started %d servers, want 3", len(addrs))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out strings.Builder
	runErr := run(ctx, &out, addrs)
	if err := stop(); err != nil {
		t.Errorf("stopping the servers: %v", err)
	}
	if runErr != nil {
		t.Fatal(runErr)
	}
	if out.String() != want {
		t.Errorf("the quick start printed:\n%s\nthe README says:\n%s", out.String(), want)
	}
	if !strings.Contains(log.String(), "started 3 redis-server processes on "+strings.Join(addrs, " ")) {
		t.Errorf("the program did not say which servers it started: %q", log.String())
	}
	for _, addr := range addrs {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			t.Errorf("%s still accepts connections after stop", addr)
		}
	}
}
