package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/quorumlock/redlock/internal/redistest"
)

// DefaultImage is the image scripts/build-redis-image.sh builds from the
// host's redis-server.
const DefaultImage = "redlock-redis:local"

var (
	// ErrNoEngine means no Docker engine answered; the container tests skip.
	ErrNoEngine = errors.New("no Docker engine answers")
	// ErrNoImage means the engine does not have the image; build it with
	// scripts/build-redis-image.sh.
	ErrNoImage = errors.New("the Redis image is not built")
)

// Containers is the container backend: each server is a container of an
// image built offline from the host's redis-server (no registry is needed
// or used), reached through a port published on 127.0.0.1. Kill is docker
// kill (SIGKILL), Pause is docker pause (the cgroup freezer); a killed
// container starts again with its own file system, so with persistence it
// reloads its append-only file.
type Containers struct {
	pool  *dockertest.Pool
	image string
}

// NewContainers connects to the Docker engine (DOCKER_HOST or the default
// socket) and checks that it has image (DefaultImage when empty). The error
// matches ErrNoEngine or ErrNoImage when that is why it failed.
func NewContainers(ctx context.Context, image string) (*Containers, error) {
	if image == "" {
		image = DefaultImage
	}
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoEngine, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := &Containers{pool: pool, image: image}
	if err := pool.Client.PingWithContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %v", ErrNoEngine, err)
	}
	if _, err := pool.Client.InspectImage(image); err != nil {
		c.Close()
		if errors.Is(err, dc.ErrNoSuchImage) {
			return nil, fmt.Errorf("%w: %s: run integration/scripts/build-redis-image.sh", ErrNoImage, image)
		}
		return nil, err
	}
	return c, nil
}

// BuildImage runs the image build script (scripts/build-redis-image.sh); it
// is quick when the image is up to date.
func BuildImage(ctx context.Context, script string) error {
	out, err := exec.CommandContext(ctx, script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", script, err, out)
	}
	return nil
}

// Name returns "containers".
func (*Containers) Name() string { return "containers" }

// Close drops the connections to the engine. The containers are removed by
// their clusters.
func (c *Containers) Close() {
	c.pool.Client.HTTPClient.CloseIdleConnections()
}

// Start runs a container with redis-server on a port published on
// 127.0.0.1.
func (c *Containers) Start(ctx context.Context, opts Options) (Server, error) {
	if opts.Replicas || opts.Clock {
		return nil, fmt.Errorf("containers with replicas or a clock shim: %w", ErrUnsupported)
	}
	repo, tag, _ := strings.Cut(c.image, ":")
	args := []string{"--port", "6379", "--protected-mode", "no", "--dir", "/data", "--save", ""}
	if opts.Persistent {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, opts.serverArgs()...)
	var err error
	// The free port may be taken between the probe and docker's bind.
	for range 5 {
		var port int
		if port, err = redistest.FreePort(); err != nil {
			return nil, err
		}
		var res *dockertest.Resource
		res, err = c.pool.RunWithOptions(&dockertest.RunOptions{
			Repository:   repo,
			Tag:          tag,
			Cmd:          args,
			ExposedPorts: []string{"6379/tcp"},
			PortBindings: map[dc.Port][]dc.PortBinding{
				"6379/tcp": {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(port)}},
			},
			Labels: map[string]string{"org.quorumlock.redlock": "chaos"},
		}, func(hc *dc.HostConfig) {
			hc.PublishAllPorts = false
			hc.AutoRemove = false
			hc.RestartPolicy = dc.NeverRestart()
		})
		if err != nil {
			if strings.Contains(err.Error(), "port is already allocated") || strings.Contains(err.Error(), "address already in use") {
				continue
			}
			return nil, err
		}
		ct := &container{pool: c.pool, res: res, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		if err := WaitReady(ctx, ct.addr); err != nil {
			return nil, errors.Join(err, ct.Close(ctx))
		}
		return ct, nil
	}
	return nil, err
}

type container struct {
	pool *dockertest.Pool
	res  *dockertest.Resource
	addr string
}

func (c *container) id() string   { return c.res.Container.ID }
func (c *container) Addr() string { return c.addr }

func (c *container) Kill(ctx context.Context) error {
	err := c.pool.Client.KillContainer(dc.KillContainerOptions{ID: c.id(), Signal: dc.SIGKILL, Context: ctx})
	var notRunning *dc.ContainerNotRunning
	if err != nil && !errors.As(err, &notRunning) {
		return err
	}
	// Kill returns when the signal is sent; wait for the container to stop.
	_, err = c.pool.Client.WaitContainerWithContext(c.id(), ctx)
	return err
}

func (c *container) Start(ctx context.Context) error {
	if err := c.pool.Client.StartContainerWithContext(c.id(), nil, ctx); err != nil {
		return err
	}
	return WaitReady(ctx, c.addr)
}

// Pause freezes the container. runc gives up freezing a cgroup whose tasks
// do not settle in time ("unable to freeze"), which a loaded machine makes
// happen now and then, and thaws it again: try again a few times.
func (c *container) Pause(ctx context.Context) error {
	var err error
	for range 10 {
		err = c.pool.Client.PauseContainer(c.id())
		if err == nil || !strings.Contains(err.Error(), "unable to freeze") {
			return err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		}
	}
	return err
}

func (c *container) Resume(context.Context) error { return c.pool.Client.UnpauseContainer(c.id()) }
func (c *container) Close(context.Context) error  { return c.pool.Purge(c.res) }
