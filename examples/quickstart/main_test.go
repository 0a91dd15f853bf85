package main

import (
	"context"
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
