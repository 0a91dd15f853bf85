package fenced_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/redlock/fenced"
)

func TestNewTableNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{fenced.DefaultTable, true},
		{"app.lock_fences", true},
		{"_f2", true},
		{"", false},
		{"2fences", false},
		{"fences; DROP TABLE accounts", false},
		{`"Fences"`, false},
		{"a.b.c", false},
		{strings.Repeat("f", 64), false},
	} {
		tab, err := fenced.NewTable(tc.name)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, fenced.ErrInvalid)) {
			t.Errorf("NewTable(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err == nil && (tab.Name() != tc.name || !strings.Contains(tab.Schema(), "CREATE TABLE IF NOT EXISTS "+tc.name+" (")) {
			t.Errorf("NewTable(%q).Schema() = %s", tc.name, tab.Schema())
		}
	}
}

// docs/fencing.md gives the default table's migration and the claim
// statement as they are.
func TestFencingDocSQL(t *testing.T) {
	b, err := os.ReadFile("../../docs/fencing.md")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := fenced.NewTable(fenced.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{tab.Schema(), fenced.ClaimSQL(tab)} {
		if !strings.Contains(doc, "```sql\n"+want+"\n```") {
			t.Errorf("docs/fencing.md has no sql block with:\n%s", want)
		}
	}
}
