package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/quorumlock/redlock/internal/redistest"
)

// ensureScript is the repository's installer of redis-server, the one
// `make test` runs.
const ensureScript = "scripts/ensure-redis.sh"

// localServers starts n redis-server processes on free loopback ports, for
// a quick start without servers of one's own. A missing redis-server is
// installed first as `make test` installs it (scripts/ensure-redis.sh, found
// from the working directory up), which prints what it runs to logw. stop
// kills the servers and removes their files; the kernel kills them too if
// the program dies first. On failure nothing is left running.
func localServers(n int, logw io.Writer) (addrs []string, stop func() error, err error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if err := installRedis(logw); err != nil {
			return nil, nil, err
		}
	}
	servers, err := redistest.StartN(n, redistest.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("starting %d local redis-server processes: %w", n, err)
	}
	for _, s := range servers {
		addrs = append(addrs, s.Addr)
	}
	fmt.Fprintf(logw, "quickstart: started %d redis-server processes on %s; they stop at the end\n", n, strings.Join(addrs, " "))
	stop = func() error {
		var err error
		for _, s := range servers {
			err = errors.Join(err, s.Close())
		}
		return err
	}
	return addrs, stop, nil
}

// installRedis runs the repository's installer of redis-server, or says
// how to install it when the program does not run inside the repository.
func installRedis(logw io.Writer) error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	for {
		script := filepath.Join(dir, ensureScript)
		if _, err := os.Stat(script); err == nil {
			cmd := exec.Command("sh", script, "redis-server")
			cmd.Stdout, cmd.Stderr = logw, logw
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("installing redis-server with %s: %w", ensureScript, err)
			}
			if _, err := exec.LookPath("redis-server"); err != nil {
				return errors.New(redistest.InstallHint)
			}
			return nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return fmt.Errorf("%s (or run the quick start from the repository, which installs it)", redistest.InstallHint)
		}
		dir = parent
	}
}
