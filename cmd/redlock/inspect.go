package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/quorumlock/redlock/redlock"
)

// manyJSON is the --json form of inspect --slots and --shared.
type manyJSON struct {
	Key     string       `json:"key"`
	Size    int          `json:"size,omitempty"`
	Permits []statusJSON `json:"permits,omitempty"`
	Writer  *statusJSON  `json:"writer,omitempty"`
	Readers []statusJSON `json:"readers,omitempty"`
}

// inspectMany is inspect of the semaphore KEY (--slots) or of the
// read-write lock KEY (--shared): a summary line, then the table of each
// permit or lease that a node holds, and the writer's.
func (a *app) inspectMany(fs *flagSet, f *inspectFlags, l *redlock.Locker, key string) int {
	ctx, need := context.Background(), l.Quorum()
	var (
		summary string
		shown   []*redlock.Status
		titles  []string // each shown status's title: "permit 2", "writer", "reader TOKEN"
		out     = manyJSON{Key: key}
		err     error
	)
	if f.slots > 0 {
		var slots []*redlock.Status
		slots, err = l.Semaphore(key, f.slots).Inspect(ctx)
		if slots == nil {
			return a.fail(fs.cmd, fmt.Sprintf("inspect %q", key), err)
		}
		held := 0
		for i, st := range slots {
			if st.Holder != "" {
				held++
			}
			if anyHeld(st) {
				shown = append(shown, st)
				titles = append(titles, "permit "+strconv.Itoa(i))
			}
		}
		summary = fmt.Sprintf("semaphore %s of %d: %d held on a majority (%d of %d nodes needed)", strconv.Quote(key), f.slots, held, need, len(slots[0].Nodes))
		out.Size = f.slots
		for _, st := range shown {
			out.Permits = append(out.Permits, toJSON(st, need))
		}
	} else {
		var (
			writer  *redlock.Status
			readers []*redlock.Status
		)
		writer, readers, err = l.RWMutex(key).Inspect(ctx)
		if writer == nil {
			return a.fail(fs.cmd, fmt.Sprintf("inspect %q", key), err)
		}
		state := "no writer"
		if writer.Holder != "" {
			state = "writer " + printable(writer.Holder)
		}
		summary = fmt.Sprintf("read-write lock %s: %s, %d readers (%d of %d nodes needed)", strconv.Quote(key), state, len(readers), need, len(writer.Nodes))
		shown = append([]*redlock.Status{writer}, readers...)
		titles = append(titles, "writer")
		for _, st := range readers {
			titles = append(titles, "reader "+readerName(st))
		}
		w := toJSON(writer, need)
		out.Writer = &w
		for _, st := range readers {
			out.Readers = append(out.Readers, toJSON(st, need))
		}
	}
	if werr := writeMany(a.stdout, f.json, summary, titles, shown, out, need); werr != nil {
		a.errorf(fs.cmd, "writing the status: %v", werr)
		return exitFailure
	}
	if err != nil {
		return a.fail(fs.cmd, fmt.Sprintf("inspect %q", key), err)
	}
	return exitOK
}

// badKind is what is wrong with inspect's --slots and --shared, or "".
func (f *inspectFlags) badKind() string {
	switch {
	case f.shared && f.slots != 0:
		return "--shared and --slots exclude each other"
	case f.slots < 0 || f.slots > redlock.MaxSemaphoreSize:
		return fmt.Sprintf("--slots %d is not between 1 and %d", f.slots, redlock.MaxSemaphoreSize)
	}
	return ""
}

// anyHeld reports whether some node holds st's key.
func anyHeld(st *redlock.Status) bool {
	for _, n := range st.Nodes {
		if n.Held {
			return true
		}
	}
	return false
}

// readerName is a reader's lease as inspect names it: by its token, not by
// the library's own key that holds it.
func readerName(st *redlock.Status) string {
	for _, n := range st.Nodes {
		if n.Held {
			return n.Token
		}
	}
	return st.Holder
}

// writeMany writes the summary and each shown status under its title, or
// out as JSON.
func writeMany(w io.Writer, asJSON bool, summary string, titles []string, shown []*redlock.Status, out manyJSON, need int) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if _, err := fmt.Fprintf(w, "%s\n", summary); err != nil {
		return err
	}
	for i, st := range shown {
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
		if err := writeStatus(w, titles[i], st, need); err != nil {
			return err
		}
	}
	return nil
}

// inspectOtherKinds shows KEY as a read-write lock when readers hold it, or
// as a semaphore when permits of it are held, for an inspect without
// --shared or --slots that found no lock KEY. shown is false when neither
// is held: KEY is then shown as a lock.
func (a *app) inspectOtherKinds(fs *flagSet, f *inspectFlags, l *redlock.Locker, key string) (code int, shown bool) {
	ctx, need := context.Background(), l.Quorum()
	if _, readers, err := l.RWMutex(key).Inspect(ctx); err == nil && len(readers) > 0 {
		f.shared = true
		return a.inspectMany(fs, f, l, key), true
	}
	// The size is not stored where inspect can ask for it cheaply: every
	// slot a semaphore may have is looked at.
	slots, err := l.Semaphore(key, redlock.MaxSemaphoreSize).Inspect(ctx)
	if err != nil {
		return 0, false
	}
	var (
		held   []*redlock.Status
		titles []string
	)
	for i, st := range slots {
		if anyHeld(st) {
			held = append(held, st)
			titles = append(titles, "permit "+strconv.Itoa(i))
		}
	}
	if len(held) == 0 {
		return 0, false
	}
	summary := fmt.Sprintf("semaphore %s: %s held on some node (inspect --slots N shows it with its size N)", strconv.Quote(key), plural(len(held), "permit"))
	if werr := writeMany(a.stdout, false, summary, titles, held, manyJSON{}, need); werr != nil {
		a.errorf(fs.cmd, "writing the status: %v", werr)
		return exitFailure, true
	}
	return exitOK, true
}
