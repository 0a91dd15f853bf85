package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// The library's warnings (a node down, back, a replica, refusing for good,
// abstaining; a long wait on an outage) reach the user of run, hold and
// elect as one line each on standard error, unless --quiet: a lock taken
// with a node out must not look like one taken with all of them. A node's
// state is said once the lock is held: a failure to obtain it names every
// node's outcome already.

// warnings returns the handler of the command's Locker's logger: one line
// per warning on w, prefixed with the command's name.
func warnings(c *command, w io.Writer) *warnHandler {
	return &warnHandler{cmd: c.name, w: w}
}

// quietLogger drops the library's warnings.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// warnHandler writes a record as "redlock CMD: warning: MESSAGE: DETAIL";
// a node's, only once start was called (before, the last line of each
// node waits). Safe for concurrent use.
type warnHandler struct {
	cmd string
	w   io.Writer

	mu      sync.Mutex
	started bool
	pending map[string]string // a node's last line before start, by node
	order   []string          // the nodes of pending, in order
}

// logger is the Locker's logger that writes through h.
func (h *warnHandler) logger() *slog.Logger { return slog.New(h) }

// start writes the nodes' lines held back so far, and from now on each
// at once: the lock is held.
func (h *warnHandler) start() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = true
	for _, node := range h.order {
		if _, err := fmt.Fprintln(h.w, h.pending[node]); err != nil {
			return err
		}
	}
	h.pending, h.order = nil, nil
	return nil
}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *warnHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *warnHandler) WithGroup(string) slog.Handler                { return h }

func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	a := map[string]string{}
	r.Attrs(func(at slog.Attr) bool {
		a[at.Key] = at.Value.String()
		return true
	})
	msg := strings.TrimPrefix(r.Message, "redlock: ")
	var line string
	switch {
	case a["node"] != "":
		// "node down", "node back", "node replica", ...: name the node.
		line = strings.Replace(msg, "node ", "node "+a["node"]+" ", 1)
		if a["err"] != "" {
			// The node's error, without the library's prefix: the
			// line has the command's.
			line += ": " + strings.TrimPrefix(a["err"], "redlock: ")
		}
		switch spare := a["spare"]; {
		case spare == "0":
			line += " (one more node failure stops the locks)"
		case strings.HasPrefix(spare, "-"):
			line += " (a majority of nodes is out: no lock can be taken)"
		}
	case a["key"] != "":
		line = fmt.Sprintf("%s for %s %s: %s", msg, a["key"], a["waited"], strings.TrimPrefix(a["err"], "redlock: "))
	default:
		line = msg
	}
	line = "redlock " + h.cmd + ": warning: " + line
	h.mu.Lock()
	defer h.mu.Unlock()
	if node := a["node"]; node != "" && !h.started {
		if h.pending == nil {
			h.pending = map[string]string{}
		}
		if _, seen := h.pending[node]; !seen {
			h.order = append(h.order, node)
		}
		h.pending[node] = line
		return nil
	}
	_, err := fmt.Fprintln(h.w, line)
	return err
}
