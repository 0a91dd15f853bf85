package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/internal/pgtest"
	"github.com/quorumlock/redlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The program refuses the stalled holder's deposit, against a real
// PostgreSQL and three real redis-servers.
func TestFencedPostgres(t *testing.T) {
	pg := pgtest.StartT(t)
	var addrs []string
	for _, s := range redistest.StartT(t, 3, redistest.Options{}) {
		addrs = append(addrs, s.Addr)
	}
	var out strings.Builder
	if err := run(t.Context(), &out, pg.URL("postgres"), addrs); err != nil {
		t.Fatal(err)
	}
	want := "b deposited 50\na's late deposit refused: a newer holder wrote first\nbalance: 150\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}
