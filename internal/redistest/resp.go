package redistest

import (
	"bytes"
	"errors"
	"strconv"
)

// The forwarder reads the RESP streams it carries only as far as it needs
// to move a connection: where one command or reply ends and the next
// begins, and the arguments of the commands that set up a connection.

// errRESP reports bytes that are no RESP: the forwarder then stops reading
// the stream and only passes it on.
var errRESP = errors.New("redistest: not RESP")

// respLine returns the line at the start of b without its CRLF and the
// length of the line with it; ok is false when the line is incomplete.
func respLine(b []byte) (line []byte, n int, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, 0, false
	}
	return bytes.TrimSuffix(b[:i], []byte{'\r'}), i + 1, true
}

// respValue returns the length of the RESP2 or RESP3 value at the start of
// b, and whether the value is a push (RESP3 '>'), which answers no command.
// ok is false when b holds only part of the value. An attribute ('|') is
// read together with the value it annotates.
func respValue(b []byte) (n int, push, ok bool, err error) {
	if len(b) == 0 {
		return 0, false, false, nil
	}
	line, n, ok := respLine(b)
	if !ok {
		return 0, false, false, nil
	}
	kind, head := line[0], line[1:]
	switch kind {
	case '+', '-', ':', ',', '#', '_', '(':
		return n, false, true, nil
	case '$', '!', '=':
		size, err := strconv.Atoi(string(head))
		if err != nil {
			return 0, false, false, errRESP
		}
		if size < 0 { // RESP2's null bulk string
			return n, false, true, nil
		}
		if len(b) < n+size+2 {
			return 0, false, false, nil
		}
		return n + size + 2, false, true, nil
	case '*', '~', '>', '%', '|':
		count, err := strconv.Atoi(string(head))
		if err != nil {
			return 0, false, false, errRESP
		}
		if kind == '%' || kind == '|' {
			count *= 2
		}
		for range max(count, 0) {
			m, _, ok, err := respValue(b[n:])
			if !ok || err != nil {
				return 0, false, false, err
			}
			n += m
		}
		if kind == '|' {
			m, push, ok, err := respValue(b[n:])
			if !ok || err != nil {
				return 0, false, false, err
			}
			return n + m, push, true, nil
		}
		return n, kind == '>', true, nil
	}
	return 0, false, false, errRESP
}

// respCommand returns the length of the command at the start of b, as a
// client sends it (an array of bulk strings, or an inline line), and its
// arguments; ok is false when b holds only part of it.
func respCommand(b []byte) (n int, args [][]byte, ok bool, err error) {
	if len(b) == 0 {
		return 0, nil, false, nil
	}
	if b[0] != '*' {
		line, n, ok := respLine(b)
		if !ok {
			return 0, nil, false, nil
		}
		return n, bytes.Fields(line), true, nil
	}
	line, n, ok := respLine(b)
	if !ok {
		return 0, nil, false, nil
	}
	count, err := strconv.Atoi(string(line[1:]))
	if err != nil {
		return 0, nil, false, errRESP
	}
	args = make([][]byte, 0, max(count, 0))
	for range max(count, 0) {
		line, m, ok := respLine(b[n:])
		if !ok {
			return 0, nil, false, nil
		}
		if len(line) == 0 || line[0] != '$' {
			return 0, nil, false, errRESP
		}
		size, err := strconv.Atoi(string(line[1:]))
		if err != nil || size < 0 {
			return 0, nil, false, errRESP
		}
		start := n + m
		if len(b) < start+size+2 {
			return 0, nil, false, nil
		}
		args = append(args, b[start:start+size])
		n = start + size + 2
	}
	return n, args, true, nil
}
