package conn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// Servers tells a Locker's nodes apart by the identity of the server each
// connection reaches (its run_id), not by the spelling of the address: two
// addresses of one server (a host name and its IP, a proxy, a load
// balancer, two Sentinel clients of one group) would otherwise give that
// server two votes.
//
// A node keeps every server it has reached until Close: a restarted server
// has a new run_id and the old one is gone for good, so keeping it costs
// nothing, while forgetting it could let another node claim a server that
// this node's calls still reach.
type Servers struct {
	mu    sync.Mutex
	addrs []string       // the nodes' addresses, for messages
	owner map[string]int // run_id → the node that reached it first
	// refused holds, per node, the error that took it out of every vote:
	// it reached a server that another node had reached first.
	refused []error
}

// NewServers returns the registry of the servers that the nodes with these
// addresses (for messages) reach.
func NewServers(addrs []string) *Servers {
	return &Servers{addrs: addrs, owner: make(map[string]int, len(addrs)), refused: make([]error, len(addrs))}
}

// Identity is one node's handle on its Locker's servers.
type Identity struct {
	s    *Servers
	node int
}

// Node returns node i's handle.
func (s *Servers) Node(i int) *Identity { return &Identity{s: s, node: i} }

// ErrSameServer is the error of a node that reached a server another node
// of the Locker had reached first: it would vote twice. It stays the node's
// error until Close.
var ErrSameServer = errors.New("redlock: same server twice")

// refusedErr is the error that took the node out of every vote, or nil.
func (n *Identity) refusedErr() error {
	if n == nil {
		return nil
	}
	n.s.mu.Lock()
	defer n.s.mu.Unlock()
	return n.s.refused[n.node]
}

// claim records that the node reached the server with run_id run. It fails
// with an error matching ErrSameServer, for good, when another node reached
// that server first.
func (n *Identity) claim(run string) error {
	if n == nil {
		return nil
	}
	s := n.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refused[n.node]; err != nil {
		return err
	}
	if o, seen := s.owner[run]; seen && o != n.node {
		err := fmt.Errorf("%w: nodes %s and %s are the same server (run_id %s): it would vote twice", ErrSameServer, s.addrs[o], s.addrs[n.node], run)
		s.refused[n.node] = err
		return err
	}
	s.owner[run] = n.node
	return nil
}

// connID is a connection's identity on its server.
type connID struct {
	server string // the server's run_id
	client int64  // the connection's CLIENT ID; 0 when unknown
	addr   string // the connection's address as the server sees it
	laddr  string // the server's end of it (CLIENT INFO laddr; "" if not told)
}

// open gives the worker a new connection and prepares it, in one round trip
// before any call is sent on it:
//
//   - It kills the connection this one replaces, if that was dropped with
//     calls in flight (a timeout): the server discards the unread input of
//     a killed client, so whatever the old connection sent has then either
//     run already or never will, and it can neither overtake nor follow the
//     calls sent from now on. The kill names the old connection by its id
//     and its address, so that a restarted server, whose ids start over,
//     cannot take it for a stranger's.
//   - It learns the connection's id and the server's run_id, and refuses
//     the connection when another node of the Locker reached that server.
//   - It loads the scripts: the node may have restarted and lost them.
//     Otherwise a call answered NOSCRIPT would be sent again after the rest
//     of its batch, out of order: an acquisition could then run after the
//     release that undoes it, and leave its key behind until the TTL. A
//     server that refuses SCRIPT LOAD (an ACL, say) is left to the
//     NOSCRIPT fallback of exec.
//   - With UseFunctions, it loads the restart guard's function library
//     (FUNCTION LOAD, no REPLACE: the name carries a hash of the source),
//     for the same reason. A server that refuses it (an ACL, a replica, Redis before
//     7.0) gets the guarded acquisitions as scripts on this connection.
//
// On failure the worker has no connection and the error is the batch's.
func (w *worker) open(ctx context.Context) error {
	p := w.p
	if err := p.ident.refusedErr(); err != nil {
		return err
	}
	// A connection of its own, discarded when dropped, never handed to
	// another worker: what it was in the middle of stays with it.
	w.conn = p.own.EphemeralConn()
	pl := w.conn.Pipeline()
	var kill *redis.IntCmd
	if w.stale.client != 0 {
		kill = redis.NewIntCmd(ctx, "client", "kill", "id", w.stale.client, "addr", w.stale.addr, "skipme", "yes")
		_ = pl.Process(ctx, kill)
	}
	self := redis.NewStringCmd(ctx, "client", "info")
	_ = pl.Process(ctx, self)
	info := pl.Info(ctx, "server")
	// The role, for error text only: a node that is a replica only
	// during a failover must not be refused for good.
	repl := pl.Info(ctx, "replication")
	for _, s := range scripts.All {
		pl.ScriptLoad(ctx, s.Src)
	}
	var lib *redis.StringCmd
	if p.functions.Load() {
		lib = pl.FunctionLoad(ctx, scripts.Library)
	}
	_, execErr := pl.Exec(ctx)
	id, err := handshake(kill, self, info)
	if err != nil && execErr != nil && self.Err() == nil && info.Err() == nil {
		// go-redis leaves an error of the connection's setup (a wrong
		// password, say) off the commands of a pipeline.
		err = execErr
	}
	err = p.admit(err, id, repl)
	p.cause.note(err)
	if err != nil {
		// Nothing of a batch was sent on it: no need to kill it later.
		w.drop()
		return err
	}
	w.id, w.stale = id, connID{}
	w.fn = lib != nil && loaded(lib.Err())
	w.netConn = p.dialed.claim(id.addr, id.laddr)
	return nil
}

// admit is open's verdict on a new connection whose handshake gave err,
// id and repl (INFO replication): the handshake's error, or whether the
// server may vote for this node.
func (p *Pipe) admit(err error, id connID, repl *redis.StringCmd) error {
	if repl.Err() == nil {
		p.replica.Store(strings.Contains(repl.Val(), "role:slave"))
	}
	switch {
	case err != nil:
		return p.checkTLS(err)
	case p.role.only:
		// A Sentinel group's server must be a master as well as the
		// one named: the link routes calls to the named master's pipe,
		// and this check refuses the votes of a server that a later
		// failover, not yet seen by the link, made a replica.
		if err := masterRole(repl); err != nil {
			return err
		}
	}
	return p.ident.claim(id.server)
}

// handshake reads the replies of open's pipeline.
func handshake(kill *redis.IntCmd, self *redis.StringCmd, info *redis.StringCmd) (connID, error) {
	// A timeout or a broken connection is the same error on every reply:
	// report it as it is.
	for _, c := range []redis.Cmder{self, info} {
		var re redis.Error
		if err := c.Err(); err != nil && !errors.As(err, &re) {
			return connID{}, err
		}
	}
	if kill != nil {
		if err := kill.Err(); err != nil {
			return connID{}, fmt.Errorf("redlock: cannot end the node's abandoned connection (CLIENT KILL): %w", err)
		}
	}
	if err := self.Err(); err != nil {
		return connID{}, fmt.Errorf("redlock: cannot learn the connection's id (CLIENT INFO): %w", err)
	}
	if err := info.Err(); err != nil {
		return connID{}, fmt.Errorf("redlock: cannot learn the server's identity (INFO server): %w", err)
	}
	var id connID
	for f := range strings.FieldsSeq(self.Val()) {
		switch k, v, _ := strings.Cut(f, "="); k {
		case "id":
			id.client, _ = strconv.ParseInt(v, 10, 64)
		case "addr":
			id.addr = v
		case "laddr":
			id.laddr = v
		}
	}
	for line := range strings.Lines(info.Val()) {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			id.server = strings.TrimSpace(v)
		}
	}
	if id.client == 0 || id.addr == "" || id.server == "" {
		return connID{}, errors.New("redlock: the server did not say who it is (no id, addr or run_id in CLIENT INFO and INFO server)")
	}
	return id, nil
}

// loaded reports whether FUNCTION LOAD's reply err says the library is on
// the server: loaded now, or already (the same name is the same source).
func loaded(err error) bool {
	return err == nil || strings.Contains(err.Error(), "already exists")
}
