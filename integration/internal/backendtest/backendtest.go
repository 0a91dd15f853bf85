// Package backendtest gives tests the cluster backends: redis-server
// processes always, containers when a Docker engine answers.
package backendtest

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/quorumlock/redlock/integration/cluster"
)

// Script returns the path of scripts/build-redis-image.sh.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "build-redis-image.sh")
}

// Containers returns the container backend, building the image from the
// host's redis-server first if the engine does not have it. It skips the
// test, saying why, when no Docker engine answers.
func Containers(t testing.TB) *cluster.Containers {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.NewContainers(ctx, "")
	if errors.Is(err, cluster.ErrNoImage) {
		t.Logf("building %s with %s", cluster.DefaultImage, Script())
		if err := cluster.BuildImage(ctx, Script()); err != nil {
			t.Fatal(err)
		}
		c, err = cluster.NewContainers(ctx, "")
	}
	switch {
	case errors.Is(err, cluster.ErrNoEngine):
		t.Skipf("skipping the container backend: %v (start Docker, or set DOCKER_HOST, to run it)", err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
