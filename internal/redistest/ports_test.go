package redistest_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// childEnv makes the test binary run TestPortsChild as another test
// process would: it takes ports while the parent points at its own.
const childEnv = "REDISTEST_PORTS_CHILD"

// Ports a test points at stay its own: while a test holds a killed server,
// or a port where nobody listens, neither another goroutine of its process
// nor another test process is handed that port, so the dead address stays
// dead; and Restart gets the killed server's port back. Both sides take
// thousands of ports, far more than the kernel's free-port lottery needs to
// hand one out twice.
func TestPortsNotReusedWhileHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.StartT(t, 1, redistest.Options{})[0]
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	dead := map[int]bool{srv.Port: true}
	for range 100 {
		p, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if dead[p] {
			t.Fatalf("FreePort handed out port %d twice in one process", p)
		}
		dead[p] = true
	}

	// Another test process takes ports and starts servers meanwhile.
	child := exec.Command(os.Args[0], "-test.run=^TestPortsChild$", "-test.count=1")
	child.Env = append(os.Environ(), childEnv+"=1")
	var stderr bytes.Buffer
	child.Stderr = &stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}

	// And so do goroutines of this one.
	const goroutines, perGoroutine = 4, 200
	taken := make([][]int, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range perGoroutine {
				p, err := redistest.FreePort()
				if err != nil {
					errs[g] = err
					return
				}
				taken[g] = append(taken[g], p)
			}
		})
	}

	var childPorts []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "port "); ok {
			p, err := strconv.Atoi(s)
			if err != nil {
				t.Errorf("child: %q: %v", sc.Text(), err)
				continue
			}
			childPorts = append(childPorts, p)
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("reading the child's output: %v", err)
	}
	if err := child.Wait(); err != nil {
		t.Errorf("child process: %v\n%s", err, stderr.String())
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	mine := map[int]bool{}
	reused, twice := 0, 0
	for _, ps := range taken {
		for _, p := range ps {
			if dead[p] {
				reused++
			}
			if mine[p] {
				twice++
			}
			mine[p] = true
		}
	}
	if reused > 0 || twice > 0 {
		t.Errorf("in this process, %d of %d ports handed out were ports the test still points at, and %d were handed out twice",
			reused, goroutines*perGoroutine, twice)
	}
	reused = 0
	for _, p := range childPorts {
		if dead[p] {
			reused++
		}
	}
	if len(childPorts) < 1000 {
		t.Errorf("the child took %d ports, want at least 1000", len(childPorts))
	}
	if reused > 0 {
		t.Errorf("another process was handed %d of %d ports this test still points at", reused, len(childPorts))
	}

	for p := range dead {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err == nil {
			_ = c.Close()
			t.Errorf("port %d, which the test holds dead, accepts connections", p)
		}
	}

	port := srv.Port
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if srv.Port != port {
		t.Errorf("restarted on port %d, want %d", srv.Port, port)
	}
	c := srv.NewClient()
	defer c.Close()
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Errorf("restarted server: %v", err)
	}
}

// TestPortsChild is the other test process of TestPortsNotReusedWhileHeld:
// it takes ports with FreePort and starts and stops servers, printing each
// port it is handed.
func TestPortsChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestPortsNotReusedWhileHeld")
	}
	for i := range 2000 {
		if i%500 == 0 {
			srv, err := redistest.Start(redistest.Options{})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("port %d\n", srv.Port)
			if err := srv.Close(); err != nil {
				t.Fatal(err)
			}
		}
		p, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("port %d\n", p)
	}
}

// Servers, forwarders, hung listeners and free ports live outside the
// kernel's range of ephemeral ports, so that no client socket's local port
// can take one, not even while its server is down.
func TestPortsOutsideEphemeralRange(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral port range to read here: %v", err)
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(raw), &lo, &hi); err != nil {
		t.Fatalf("ip_local_port_range %q: %v", raw, err)
	}
	if lo <= 21000 && hi >= 64535 {
		t.Skipf("the ephemeral range %d-%d leaves too little room outside it", lo, hi)
	}
	srv := redistest.StartT(t, 1, redistest.Options{})[0]
	fwd := redistest.ForwardT(t, srv.Addr)
	hung := redistest.HangT(t)
	free, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int{"server": srv.Port, "free port": free}
	for name, addr := range map[string]string{"forwarder": fwd.Addr, "hung listener": hung.Addr} {
		_, s, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if ports[name], err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	for name, p := range ports {
		if p >= lo && p <= hi {
			t.Errorf("%s on port %d, inside the ephemeral range %d-%d", name, p, lo, hi)
		}
	}
}
