package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
)

// durationValue is a duration flag that also takes a bare number of seconds,
// as flock -w does: "10" is 10s, "0.5" is 500ms.
type durationValue time.Duration

func (fs *flagSet) durationVar(p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }

// kind names the value in --help.
func (*durationValue) kind() string { return "duration" }

// parseDuration parses a Go duration ("1m30s") or a bare number of seconds
// ("90", "1.5").
func parseDuration(s string) (time.Duration, error) {
	num := strings.TrimLeft(s, "+-")
	if num != "" && strings.Trim(num, "0123456789.") == "" {
		s += "s"
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want a duration such as 30s, 1m30s or 500ms, or a number of seconds")
	}
	return d, nil
}

// waitValue is --wait: a duration, a bare number of seconds, or "forever".
type waitValue struct {
	d       time.Duration
	forever bool
}

func (w *waitValue) Set(s string) error {
	if s == "forever" {
		*w = waitValue{forever: true}
		return nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return fmt.Errorf("%w, or \"forever\"", err)
	}
	*w = waitValue{d: d}
	return nil
}

func (w *waitValue) String() string {
	if w.forever {
		return "forever"
	}
	return w.d.String()
}

func (*waitValue) kind() string { return "duration|forever" }

// waits reports whether the lock is waited for, rather than tried once.
func (w *waitValue) waits() bool { return w.forever || w.d > 0 }

// alias makes -short another name of the flag --long, shown with it in
// --help.
func (fs *flagSet) alias(short, long string) {
	f := fs.Lookup(long)
	fs.Var(f.Value, short, f.Usage)
	if fs.short == nil {
		fs.short = map[string]string{}
	}
	fs.short[long] = short
}

// isAlias reports whether name is the short name of another flag.
func (fs *flagSet) isAlias(name string) bool {
	for _, s := range fs.short {
		if s == name {
			return true
		}
	}
	return false
}

// flagKind is the kind of value a flag takes, as --help shows it ("" for a
// boolean flag).
func flagKind(f *flag.Flag) (kind, usage string) {
	kind, usage = flag.UnquoteUsage(f)
	if k, ok := f.Value.(interface{ kind() string }); ok && !strings.Contains(f.Usage, "`") {
		kind = k.kind()
	}
	return kind, usage
}
