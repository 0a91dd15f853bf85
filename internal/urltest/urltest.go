// Package urltest holds what the fuzz tests of node URLs share: whether an
// error about a URL may be checked for the URL's password.
package urltest

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Checkable reports whether an error about raw can be checked for not
// showing password: not when the password is also part of the rest of the
// URL, or of words the message may hold anyway (words), or is too short to
// tell apart; nor when the URL has bytes that messages quote as escapes.
func Checkable(raw, password string, words ...string) bool {
	rest := strings.Replace(raw, password, "", 1)
	if len(password) < 4 || strings.Contains(rest, password) || strings.ContainsAny(password, "()\" ") ||
		!utf8.ValidString(raw) || strings.ContainsFunc(raw, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return false
	}
	for _, w := range words {
		if strings.Contains(w, password) {
			return false
		}
	}
	return true
}

// Passwords are the fuzz tests' seed passwords: each holds a character
// that a URL gives a meaning to, or that a message might quote.
var Passwords = []string{"secret", "a/b", "a#b", "a?b", "a@b", "a:b", "p%zz", "a b", "[::1]", "a,b"}

// URLs are the node URLs that carry password for the server at hostport:
// with a user name, without one, and over TLS with a path.
func URLs(password, hostport string) []string {
	return []string{
		"redis://user:" + password + "@" + hostport,
		"redis://" + password + "@" + hostport,
		"rediss://:" + password + "@" + hostport + "/x",
	}
}
