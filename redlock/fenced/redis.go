package fenced

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed set_string.lua
	setStringLua string
	//go:embed set_field.lua
	setFieldLua string

	setStringScript = redis.NewScript(setStringLua)
	setFieldScript  = redis.NewScript(setFieldLua)
)

// SetString writes value to key if h's fence is at or above the fence
// stored with key's current value (or the key is missing), in one script,
// so no other write comes between the check and the write. The value is
// stored with its fence ("<fence>:<value>": read it with GetString), so on
// a cluster the fence lives in the key's own slot. ttl 0 means no expiry.
// On failure nothing is written: ErrStaleFence when a higher fence is
// stored, ErrInvalid for a lock without a fence, a negative ttl, or a key
// that holds a value without a fence.
func SetString(ctx context.Context, c redis.Scripter, h Holder, key, value string, ttl time.Duration) error {
	fence, err := fenceOf(h)
	if err != nil {
		return err
	}
	if ttl < 0 {
		return invalid("negative ttl %v", ttl)
	}
	ms := ttl.Milliseconds()
	if ttl > 0 && ms == 0 {
		ms = 1
	}
	return written(setStringScript.Run(ctx, c, []string{key}, fence, value, ms), fence)
}

// SetField writes value to field of the hash key if h's fence is at or
// above the fence stored with that field's value (or the field is
// missing), in one script; each field keeps its own fence. Read it with
// GetField. It fails as SetString does.
func SetField(ctx context.Context, c redis.Scripter, h Holder, key, field, value string) error {
	fence, err := fenceOf(h)
	if err != nil {
		return err
	}
	return written(setFieldScript.Run(ctx, c, []string{key}, field, fence, value), fence)
}

// written decodes a set script's reply.
func written(cmd *redis.Cmd, fence int64) error {
	reply, err := cmd.Slice()
	if err != nil {
		if strings.HasPrefix(err.Error(), "FENCED ") {
			return invalid("%s", strings.TrimPrefix(err.Error(), "FENCED "))
		}
		return fmt.Errorf("fenced: %w", err)
	}
	if len(reply) != 2 {
		return fmt.Errorf("fenced: unexpected reply %v", reply)
	}
	if ok, _ := reply[0].(int64); ok == 1 {
		return nil
	}
	stored, _ := reply[1].(string)
	return fmt.Errorf("%w (offered %d, stored %s)", ErrStaleFence, fence, stored)
}

// GetString returns key's value and the fence stored with it, written by
// SetString. A missing key is redis.Nil; a value without a fence is an
// ErrInvalid.
func GetString(ctx context.Context, c redis.StringCmdable, key string) (value string, fence uint64, err error) {
	raw, err := c.Get(ctx, key).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return "", 0, err
		}
		return "", 0, fmt.Errorf("fenced: %w", err)
	}
	return decode(raw)
}

// GetField returns field's value in the hash key and the fence stored with
// it, written by SetField. A missing field is redis.Nil; a value without a
// fence is an ErrInvalid.
func GetField(ctx context.Context, c redis.HashCmdable, key, field string) (value string, fence uint64, err error) {
	raw, err := c.HGet(ctx, key, field).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return "", 0, err
		}
		return "", 0, fmt.Errorf("fenced: %w", err)
	}
	return decode(raw)
}

// decode splits a stored "<fence>:<value>".
func decode(raw string) (string, uint64, error) {
	head, value, ok := strings.Cut(raw, ":")
	fence, err := strconv.ParseUint(head, 10, 64)
	if !ok || err != nil || fence == 0 || head[0] == '0' {
		return "", 0, invalid("the value holds no fence")
	}
	return value, fence, nil
}
