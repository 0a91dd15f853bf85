package conn

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// A batch's guarded acquisitions each run a function of the guard's
// library, and each function checks the node (docs/safety.md, "How the
// check runs"). On a connection whose server has the library, two or more
// of them in a batch go out as a single call of the library's batch
// function instead (scripts.Batch): one guard check for all, the same
// replies. Nothing else runs on the server during that call, so each
// acquisition in it is exactly as guarded as on its own.
//
// The batch call takes the place of the first of them; the others move
// up to it, past the calls between, unless one of those touches a key of
// theirs (or shares their Queue): calls that must reach the node in order
// keep it, and so does everything done to one key.

// run is the calls of a batch (their indexes) sent as one call of
// scripts.Batch.
type run struct {
	calls []int
	cmd   *redis.Cmd
}

// wire returns each call's command (cmds, which gets its reply) and the
// commands that carry them (out): a call's own, or in place of guarded
// functions sent together, their batch call (runs; spread gives each its
// reply).
func (w *worker) wire(ctx context.Context, batch []*Call) (cmds, out []*redis.Cmd, runs []run) {
	cmds = make([]*redis.Cmd, len(batch))
	alone := func(i int) *redis.Cmd {
		cmds[i] = redis.NewCmd(ctx, w.line(batch[i])...)
		return cmds[i]
	}
	if !w.fn || len(batch) < 2 {
		for i := range batch {
			alone(i)
		}
		return cmds, cmds, nil
	}
	out = make([]*redis.Cmd, 0, len(batch))
	var (
		// cur is the run being gathered, whose call goes at out[at];
		// passed are the keys of the calls sent after that place.
		cur    []int
		at     int
		passed []string
	)
	end := func() {
		switch {
		case len(cur) == 1:
			out[at] = alone(cur[0])
		case len(cur) > 1:
			for _, i := range cur {
				cmds[i] = redis.NewCmd(ctx) // never sent: spread sets its reply
			}
			r := run{calls: cur, cmd: redis.NewCmd(ctx, batchLine(batch, cur)...)}
			runs = append(runs, r)
			out[at] = r.cmd
		}
		cur, passed = nil, passed[:0]
	}
	for i, c := range batch {
		if !batchable(c) {
			out = append(out, alone(i))
			if cur != nil {
				passed = append(passed, c.Keys...)
				passed = append(passed, c.Queue)
			}
			continue
		}
		if cur != nil && touches(c, passed) {
			end()
		}
		if cur == nil {
			at = len(out)
			out = append(out, nil)
		}
		cur = append(cur, i)
	}
	end()
	return cmds, out, runs
}

// touches reports whether call c has a key, or its Queue, among keys.
func touches(c *Call, keys []string) bool {
	for _, k := range keys {
		if k != "" && (k == c.Queue || slices.Contains(c.Keys, k)) {
			return true
		}
	}
	return false
}

// batchable reports whether c is a call of a function of the library with
// an EVALSHA line as EvalSha makes it.
func batchable(c *Call) bool {
	if c.Script == nil || c.Script.Fn == "" || len(c.Cmd) < 3 {
		return false
	}
	n, ok := c.Cmd[2].(int)
	return ok && n >= 0 && 3+n <= len(c.Cmd)
}

// batchFn is scripts.Batch, boxed once.
var batchFn any = scripts.Batch

// batchLine is the FCALL of scripts.Batch that runs the calls of batch at
// indexes (see library.lua): every call's keys, then the count, each
// call's function and numbers of keys and arguments, and every call's
// arguments.
func batchLine(batch []*Call, indexes []int) []any {
	keys, args := 0, 0
	for _, i := range indexes {
		c := batch[i]
		n := c.Cmd[2].(int)
		keys += n
		args += len(c.Cmd) - 3 - n
	}
	line := make([]any, 0, 4+keys+3*len(indexes)+args)
	line = append(line, "fcall", batchFn, keys)
	for _, i := range indexes {
		c := batch[i]
		line = append(line, c.Cmd[3:3+c.Cmd[2].(int)]...)
	}
	line = append(line, len(indexes))
	for _, i := range indexes {
		c := batch[i]
		n := c.Cmd[2].(int)
		line = append(line, c.Script.FnArg, n, len(c.Cmd)-3-n)
	}
	for _, i := range indexes {
		c := batch[i]
		line = append(line, c.Cmd[3+c.Cmd[2].(int):]...)
	}
	return line
}

// spread gives each call of run r its reply from the batch call's: its
// element of the array, or the batch call's error.
func spread(r run, cmds []*redis.Cmd) {
	vals, err := r.cmd.Slice()
	if err == nil && len(vals) != len(r.calls) {
		err = fmt.Errorf("redlock: a batch of %d calls got %d replies", len(r.calls), len(vals))
	}
	for j, i := range r.calls {
		cmd := cmds[i]
		if err != nil {
			cmd.SetErr(err)
			continue
		}
		switch v := vals[j].(type) {
		case nil, bool:
			// Lua's false, what the library gives for a nil reply.
			cmd.SetErr(redis.Nil)
		case error:
			cmd.SetErr(v)
		default:
			cmd.SetVal(v)
		}
	}
}
