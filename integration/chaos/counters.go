package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/redlock"
)

// counterPrefix starts the name of every lock key's fencing counter on a
// node: the library's own naming, which the watch has to know.
const counterPrefix = redlock.ReservedPrefix + "fence:"

// counterWatch follows every write to the fencing counters on each node,
// through MONITOR (which shows the commands that scripts run too), and
// records an anomaly when a counter goes back: a node must never count
// below a fence it handed out, or that a holder wrote back to it, or the
// next holder's fence there may be no larger than an earlier one's. It
// knows nothing of restarts, flushes or counters that expire, and suits
// scenarios without them only.
type counterWatch struct {
	addrs []string
	conns []net.Conn
	errs  []error
	wg    sync.WaitGroup
}

// watchEnd is the argument of the ECHO that close sends to every node:
// a watch that sees it has seen every command before it.
const watchEnd = "redlock-chaos-counter-watch-end"

// watchCounters starts watching the servers at addrs (directly, not
// through any proxy), recording into rec.
func watchCounters(addrs []string, rec recorder) (*counterWatch, error) {
	cw := &counterWatch{addrs: addrs, errs: make([]error, len(addrs))}
	for i, addr := range addrs {
		conn, r, err := monitor(addr)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("watching the counters on %s: %w", addr, err), cw.close())
		}
		cw.conns = append(cw.conns, conn)
		cw.wg.Go(func() { cw.errs[i] = follow(i, r, rec) })
	}
	return cw, nil
}

// monitor opens a MONITOR connection to the server at addr, which shows
// every command the server runs from the moment monitor returns.
func monitor(addr string) (net.Conn, *bufio.Reader, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	r := bufio.NewReader(conn)
	err = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if err == nil {
		_, err = conn.Write([]byte("MONITOR\r\n"))
	}
	var ok string
	if err == nil {
		ok, err = r.ReadString('\n')
	}
	if err == nil && ok != "+OK\r\n" {
		err = fmt.Errorf("MONITOR answered %q", ok)
	}
	if err == nil {
		err = conn.SetDeadline(time.Time{})
	}
	if err != nil {
		return nil, nil, errors.Join(err, conn.Close())
	}
	return conn, r, nil
}

// close stops watching, once the watch has seen every command the nodes
// ran before (or after five seconds), and returns what went wrong on the
// way.
func (cw *counterWatch) close() error {
	var errs []error
	for _, addr := range cw.addrs[:len(cw.conns)] {
		errs = append(errs, echo(addr, watchEnd))
	}
	done := make(chan struct{})
	go func() {
		cw.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		errs = append(errs, errors.New("the counter watch did not see the end of the run within 5s"))
	}
	for _, c := range cw.conns {
		_ = c.Close() // ends a follow still reading
	}
	<-done
	return errors.Join(append(errs, cw.errs...)...)
}

// echo sends ECHO msg to the server at addr and reads the reply.
func echo(addr, msg string) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }() // the reply is read; nothing is left to lose
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(conn, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(msg), msg); err != nil {
		return err
	}
	_, err = bufio.NewReader(conn).ReadString('\n')
	return err
}

// follow reads node's MONITOR stream until it shows close's ECHO, or the
// connection is closed, keeping the value of every counter it can tell.
func follow(node int, r *bufio.Reader, rec recorder) error {
	known := make(map[string]int64) // counter → its value, when known
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("counter watch on node %d: %w", node, err)
		}
		args := monitorArgs(line)
		if len(args) == 2 && strings.EqualFold(args[0], "ECHO") && args[1] == watchEnd {
			return nil
		}
		if len(args) < 2 || !strings.HasPrefix(args[1], counterPrefix) {
			continue
		}
		counter := args[1]
		prev, ok := known[counter]
		switch strings.ToUpper(args[0]) {
		case "GET", "PTTL", "TTL", "PEXPIRE", "EXPIRE", "EXISTS":
			// The value stays as it was.
		case "INCR":
			if ok {
				known[counter] = prev + 1
			}
		case "SET":
			v, err := strconv.ParseInt(args[min(2, len(args)-1)], 10, 64)
			if err != nil {
				delete(known, counter)
				continue
			}
			if ok && v < prev {
				rec.AddAnomaly(checker.Anomaly{Kind: "counter-went-back", Client: -1, Key: strings.TrimPrefix(counter, counterPrefix), At: time.Now(),
					Detail: fmt.Sprintf("node %d's fencing counter went back from %d to %d (%s)", node, prev, v, strings.TrimSpace(line))})
			}
			known[counter] = v
		default:
			// Anything else (DEL, a command this watch does not know)
			// leaves the value unknown until the next SET.
			delete(known, counter)
		}
	}
}

// monitorArgs returns the command's arguments from a MONITOR line
// (+time [db client] "arg" "arg" ...), unquoted as far as the counters
// need: nil for a line that shows no command.
func monitorArgs(line string) []string {
	i := strings.Index(line, "] ")
	if !strings.HasPrefix(line, "+") || i < 0 {
		return nil
	}
	var args []string
	rest := line[i+2:]
	for {
		start := strings.IndexByte(rest, '"')
		if start < 0 {
			return args
		}
		var b strings.Builder
		j := start + 1
		for ; j < len(rest) && rest[j] != '"'; j++ {
			if rest[j] == '\\' && j+1 < len(rest) {
				j++ // an escaped byte; none of the counters' own have one
			}
			b.WriteByte(rest[j])
		}
		args = append(args, b.String())
		if j >= len(rest) {
			return args
		}
		rest = rest[j+1:]
	}
}
