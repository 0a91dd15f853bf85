package redistest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file has the helpers for the ways a server loses writes it
// acknowledged: a crash that takes the last writes of its data files with
// it, and the promotion of a replica that lagged behind its master.

// Dir returns the server's working directory, where its RDB snapshot and
// append-only files live.
func (s *Server) Dir() string { return s.opts.Dir }

// CheckpointT copies the server's data files (RDB snapshot, append-only
// directory) as they are now, and returns a function that crashes the server
// back to them: it kills the process, puts the copied files back in place of
// the current ones, and starts the server again, which reloads them. The
// server then has forgotten every write since the checkpoint, as after a
// power loss with appendfsync everysec or an older snapshot. Redis writes an
// acknowledged write to its files (the page cache) before it replies, except
// that appendfsync everysec postpones the write (up to two seconds) while a
// background fsync is slow; so CheckpointT first waits until the server's
// AOF buffer is empty and no rewrite runs, and the copy then holds every
// write acknowledged before CheckpointT. Failures end the test.
func (s *Server) CheckpointT(t testing.TB) (crash func()) {
	t.Helper()
	s.awaitAOFWrittenT(t)
	saved := t.TempDir()
	if err := copyTree(s.opts.Dir, saved); err != nil {
		t.Fatalf("checkpoint of redis-server %s: %v", s.Addr, err)
	}
	return func() {
		t.Helper()
		if err := s.Kill(); err != nil {
			t.Fatalf("killing redis-server %s: %v", s.Addr, err)
		}
		if err := clearDir(s.opts.Dir); err != nil {
			t.Fatalf("clearing the data of redis-server %s: %v", s.Addr, err)
		}
		if err := copyTree(saved, s.opts.Dir); err != nil {
			t.Fatalf("restoring the checkpoint of redis-server %s: %v", s.Addr, err)
		}
		if err := s.Restart(); err != nil {
			t.Fatalf("restarting redis-server %s: %v", s.Addr, err)
		}
	}
}

// copyTree copies the regular files and directories under src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case !d.Type().IsRegular():
			return nil // sockets and the like are not data
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o600)
	})
}

// clearDir removes everything inside dir, keeping dir.
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Replica is a redis-server that replicates a master through a forwarder of
// its own, so that a test can cut it off from its master (Cut) and let the
// master take writes it never sees, then promote it (Promote), as a failover
// after a partition does.
type Replica struct {
	*Server
	master *Server
	link   *Forwarder
}

// StartReplicaT starts a replica of master for a test, waits until it has
// caught up with every write master took so far, and stops it at cleanup.
// It sets master's repl-diskless-sync-delay to 0.
// opts are the replica's own options (Args get "--replicaof" added).
func StartReplicaT(t testing.TB, master *Server, opts Options) *Replica {
	t.Helper()
	// A master waits 5s by default before a diskless full sync, for more
	// replicas to share it; none will.
	mc := master.NewClient()
	err := mc.ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err()
	_ = mc.Close()
	if err != nil {
		t.Fatal(err)
	}
	link := ForwardT(t, master.Addr)
	host, port, err := net.SplitHostPort(link.Addr)
	if err != nil {
		t.Fatal(err)
	}
	opts.Args = append(append([]string{}, opts.Args...), "--replicaof", host, port)
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing redis-server %s: %v", s.Addr, err)
		}
	})
	r := &Replica{Server: s, master: master, link: link}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// Sync waits until the replica's link to its master is up and it has
// applied every write the master had taken when Sync was called. It fails
// when ctx ends first.
func (r *Replica) Sync(ctx context.Context) error {
	mc, rc := r.master.NewClient(), r.NewClient()
	defer mc.Close()
	defer rc.Close()
	want, err := infoField(ctx, mc, "master_repl_offset")
	if err != nil {
		return fmt.Errorf("replication offset of master %s: %w", r.master.Addr, err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		link, _ := infoString(ctx, rc, "master_link_status")
		got, err := infoField(ctx, rc, "master_repl_offset")
		if err == nil && link == "up" && got >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %s not in sync with %s (link %q, offset %d of %d): %w", r.Addr, r.master.Addr, link, got, want, ctx.Err())
		case <-tick.C:
		}
	}
}

// Cut ends the replica's link to its master for good: writes the master
// takes from now on never reach the replica.
func (r *Replica) Cut() error { return r.link.Close() }

// Promote makes the replica a master (REPLICAOF NO ONE), as a failover does.
func (r *Replica) Promote(ctx context.Context) error {
	c := r.NewClient()
	defer c.Close()
	return c.Do(ctx, "REPLICAOF", "NO", "ONE").Err()
}

var errNoField = errors.New("field not in INFO replication")

func infoString(ctx context.Context, c *redis.Client, field string) (string, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(field) + `:(\S*)\r?$`).FindStringSubmatch(info)
	if m == nil {
		return "", errNoField
	}
	return m[1], nil
}

func infoField(ctx context.Context, c *redis.Client, field string) (int64, error) {
	s, err := infoString(ctx, c, field)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// awaitAOFWrittenT waits, up to ten seconds, until the server has written
// its AOF buffer to its files and no AOF rewrite is under way (a server
// without AOF passes at once).
func (s *Server) awaitAOFWrittenT(t testing.TB) {
	t.Helper()
	c := newClient(s.Addr)
	defer func() { _ = c.Close() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(context.Background(), "persistence").Result()
		if err != nil {
			t.Fatalf("INFO persistence of redis-server %s: %v", s.Addr, err)
		}
		if aofWritten(info) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server %s did not write its AOF buffer within 10s: %s", s.Addr, info)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// aofWritten reports whether INFO persistence says the AOF buffer is
// written and no rewrite runs or waits (a field the server leaves out
// counts as such).
func aofWritten(info string) bool {
	want := map[string]string{"aof_buffer_length": "0", "aof_rewrite_in_progress": "0", "aof_rewrite_scheduled": "0"}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if w, in := want[k]; ok && in && v != w {
			return false
		}
	}
	return true
}
