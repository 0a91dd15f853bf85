package wire

import "strings"

// A lock's stored value is token, NUL, its holds, NUL, metadata (holds.lua
// says how the holds are written). The scripts know a hold by its Holder.

// Holder is what the scripts know a hold by: the owner's token as the
// value's prefix (token + "\x00"), and the handle's hold id. A Lock, an
// acquisition's undo and its fence write-back each carry the holder of
// their hold, and touch no other.
type Holder struct {
	Prefix string
	Hold   string
}

// Value is the stored value of token's hold hold with metadata, and that
// hold's Holder.
func Value(token, hold, metadata string) (string, Holder) {
	v := token + "\x00" + hold + "\x00" + metadata
	return v, Holder{Prefix: v[:len(token)+1], Hold: hold}
}

// Token is the owner's token of holder h.
func (h Holder) Token() string { return h.Prefix[:len(h.Prefix)-1] }

// ParseValue splits a stored value into its token, its holds (each a hold
// id, maybe with ":" and the fence written back to it; none while a
// cooldown keeps the key) and its metadata; ok is false for a value the
// scripts did not write, whose token is then the whole value.
func ParseValue(v string) (token string, holds []string, metadata string, ok bool) {
	token, rest, found := strings.Cut(v, "\x00")
	if !found {
		return v, nil, "", false
	}
	list, metadata, found := strings.Cut(rest, "\x00")
	if !found {
		return token, nil, "", false
	}
	if list != "" {
		holds = strings.Split(list, " ")
	}
	return token, holds, metadata, true
}
