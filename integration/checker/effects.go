package checker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store is the effects checker: a protected resource in a plain Redis of
// its own (never faulted), which lock holders update by read-modify-write,
// in the Jepsen style. It judges effects, not beliefs: a write that
// overwrites a value other than the one its writer read has lost an update,
// whatever the writer believed about its lock.
//
// Fences: every operation that carries one raises the key's highest fence.
// A checked operation (a writer that takes no care of its validity, and
// relies on fencing, as the README says it must) with a fence below the
// highest is rejected: the stale write never lands. An unchecked operation
// (a careful writer, which checks its validity first) is never rejected, so
// that mutual exclusion alone must keep its updates.
//
// The Store keeps all its counts in its Redis, so that client processes
// share them; its methods are safe for concurrent use.
type Store struct {
	rc *redis.Client
}

// NewStore returns a Store over the Redis at addr. Close closes its client.
func NewStore(addr string) *Store {
	return &Store{rc: redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, ContextTimeoutEnabled: true,
	})}
}

// Close closes the Store's connections.
func (s *Store) Close() error { return s.rc.Close() }

// readScript: KEYS value, highest fence; ARGV fence, checked. Returns
// {1, value} or {0} when a checked read carries a stale fence.
var readScript = redis.NewScript(`
local f = tonumber(ARGV[1])
local hi = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[2] == '1' and f < hi then
  redis.call('INCR', 'fx:stale-reads')
  return {0}
end
if f > hi then redis.call('SET', KEYS[2], ARGV[1]) end
return {1, redis.call('GET', KEYS[1]) or '0'}
`)

// writeScript: KEYS value, highest fence, last writer; ARGV fence, checked,
// the value read, the new value, a description of the writer, the writer's
// deadline (Unix microseconds, 0 for none). Returns 1 when the write
// landed, 0 when it was rejected as stale.
var writeScript = redis.NewScript(`
local f = tonumber(ARGV[1])
local hi = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[2] == '1' and f < hi then
  redis.call('INCR', 'fx:stale-writes')
  return 0
end
if f > hi then redis.call('SET', KEYS[2], ARGV[1]) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local deadline = tonumber(ARGV[6])
local late = deadline > 0 and now > deadline
local cur = redis.call('GET', KEYS[1]) or '0'
redis.call('INCR', 'fx:writes')
if late then redis.call('INCR', 'fx:late') end
if cur ~= ARGV[3] then
  local what = 'LOST UPDATE'
  if late and ARGV[2] ~= '1' then
    redis.call('INCR', 'fx:lost-late')
    what = 'LOST BY A LATE WRITER'
  else
    redis.call('INCR', 'fx:lost')
  end
  if redis.call('LLEN', 'fx:lost-log') < 20 then
    local last = redis.call('GET', KEYS[3]) or 'nobody'
    redis.call('RPUSH', 'fx:lost-log', what .. ': ' .. KEYS[1] .. ': ' .. ARGV[5] .. ' read ' .. ARGV[3] .. ' but overwrote ' .. cur ..
      ' (landed at unix ' .. t[1] .. '.' .. string.format('%06d', tonumber(t[2])) .. '; the overwritten write: ' .. last .. ')')
  end
end
redis.call('SET', KEYS[1], ARGV[4])
redis.call('SET', KEYS[3], ARGV[5])
return 1
`)

// ErrStale means the Store rejected a checked operation whose fence was
// below the highest it had seen for the key.
var ErrStale = errors.New("effects store: stale fence rejected")

// Read reads key's counter for the holder of a lock with fence (0 without
// fencing). A checked read with a stale fence fails with ErrStale.
func (s *Store) Read(ctx context.Context, key string, fence uint64, checked bool) (int64, error) {
	res, err := readScript.Run(ctx, s.rc, []string{"fx:v:" + key, "fx:hi:" + key}, fence, flag(checked)).Slice()
	if err != nil {
		return 0, err
	}
	if len(res) < 2 {
		return 0, ErrStale
	}
	str, _ := res[1].(string)
	return strconv.ParseInt(str, 10, 64)
}

// Write sets key's counter to read+1, for the holder that read it. It
// counts a lost update when the counter no longer holds read. A checked
// write with a stale fence fails with ErrStale and changes nothing.
//
// deadline is the writer's lock deadline (zero for none): an unchecked
// write that lands after it comes from a writer stalled past its validity
// (the holder did not stop acting at its deadline, which no lock can make
// it do); the update it loses is counted apart (Effects.LateLost), since
// only fencing prevents it.
func (s *Store) Write(ctx context.Context, key string, fence uint64, checked bool, read int64, deadline time.Time, who string) error {
	var dl int64
	if !deadline.IsZero() {
		dl = deadline.UnixMicro()
	}
	ok, err := writeScript.Run(ctx, s.rc, []string{"fx:v:" + key, "fx:hi:" + key, "fx:who:" + key},
		fence, flag(checked), strconv.FormatInt(read, 10), strconv.FormatInt(read+1, 10), who, dl).Int()
	if err != nil {
		return err
	}
	if ok == 0 {
		return ErrStale
	}
	return nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Effects is what the Store saw.
type Effects struct {
	// Checked is true when the run used the Store.
	Checked bool
	// Writes counts writes that landed; LostUpdates those that overwrote
	// a value their writer had not read, except LateLost: the unchecked
	// writes that did so after their writer's deadline had passed.
	Writes, LostUpdates, LateLost int
	// LateWrites counts writes that landed after their writer's deadline.
	LateWrites int
	// StaleWrites and StaleReads count checked operations rejected for a
	// stale fence.
	StaleWrites, StaleReads int
	// Lost describes the first lost updates.
	Lost []string
}

// Effects reads the Store's counts.
func (s *Store) Effects(ctx context.Context) (Effects, error) {
	vals, err := s.rc.MGet(ctx, "fx:writes", "fx:lost", "fx:stale-writes", "fx:stale-reads", "fx:lost-late", "fx:late").Result()
	if err != nil {
		return Effects{}, fmt.Errorf("reading the effects store: %w", err)
	}
	n := func(i int) int {
		str, _ := vals[i].(string)
		v, _ := strconv.Atoi(str)
		return v
	}
	e := Effects{Checked: true, Writes: n(0), LostUpdates: n(1), StaleWrites: n(2), StaleReads: n(3), LateLost: n(4), LateWrites: n(5)}
	if e.Lost, err = s.rc.LRange(ctx, "fx:lost-log", 0, -1).Result(); err != nil {
		return Effects{}, fmt.Errorf("reading the effects store: %w", err)
	}
	return e, nil
}

func (e Effects) String() string {
	if !e.Checked {
		return "not checked"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d writes, %d lost updates, %d stale writes rejected (%d stale reads); %d writes landed after their writer's deadline, %d updates lost by them unfenced",
		e.Writes, e.LostUpdates, e.StaleWrites, e.StaleReads, e.LateWrites, e.LateLost)
	for _, l := range e.Lost {
		b.WriteString("\n  ")
		b.WriteString(l)
	}
	return b.String()
}
