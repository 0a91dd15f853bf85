package wire_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// A value made by Value is read back by ParseValue, its Holder names its
// prefix and hold, and values the scripts did not write are told apart.
func TestValue(t *testing.T) {
	v, h := wire.Value("tok", "1", "job 7")
	if v != "tok\x001\x00job 7" || h != (wire.Holder{Prefix: "tok\x00", Hold: "1"}) || h.Token() != "tok" {
		t.Fatalf("Value: %q, %+v", v, h)
	}
	for _, tc := range []struct {
		v      string
		token  string
		holds  []string
		meta   string
		parsed bool
	}{
		{v, "tok", []string{"1"}, "job 7", true},
		{"tok\x001:42 x9\x00m\x00n", "tok", []string{"1:42", "x9"}, "m\x00n", true},
		{"tok\x00\x00", "tok", nil, "", true}, // a cooldown
		{"plain", "plain", nil, "", false},
		{"tok\x001", "tok", nil, "", false},
	} {
		token, holds, meta, ok := wire.ParseValue(tc.v)
		if token != tc.token || !slices.Equal(holds, tc.holds) || meta != tc.meta || ok != tc.parsed {
			t.Errorf("ParseValue(%q) = %q, %q, %q, %v", tc.v, token, holds, meta, ok)
		}
	}
	full := wire.AcquireFull{Value: v, TTLMs: 10, Holder: h, Fenced: true, GuardMs: 60000, LifetimeMs: 300000, Start: 7}
	if got := full.Args(); got[wire.AcquireStartArg] != int64(7) || got[3] != "1" || len(got) != 7 {
		t.Errorf("AcquireFull.Args: %v", got)
	}
}

// reply is a server's error reply, as go-redis gives it.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

var _ redis.Error = reply("")

// A script's error reply is split into its code and the rest; any other
// error is no reply.
func TestErrorReply(t *testing.T) {
	for _, tc := range []struct {
		err        error
		code, rest string
		ok         bool
	}{
		{reply("SIZE 3"), wire.CodeSize, "3", true},
		{reply("ABSTAIN node lost its memory"), wire.CodeAbstain, "node lost its memory", true},
		{fmt.Errorf("round: %w", reply("DUPLICATE this server")), wire.CodeDuplicate, "this server", true},
		{errors.New("SIZE 3"), "", "", false},
		{nil, "", "", false},
	} {
		code, rest, ok := wire.ErrorReply(tc.err)
		if code != tc.code || rest != tc.rest || ok != tc.ok {
			t.Errorf("ErrorReply(%v) = %q, %q, %v", tc.err, code, rest, ok)
		}
	}
}
