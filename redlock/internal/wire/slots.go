package wire

import (
	"strconv"
	"strings"
	"sync"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot is the cluster hash slot of key, as Redis computes it: CRC16 of the
// key, or of its hash tag (what stands between the first "{" and the first
// "}" after it, when that is not empty), modulo Slots.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

var slotTags struct {
	once sync.Once
	tags [Slots]string
}

// SlotTag is a short hash tag, braces included, whose keys all hash to
// slot: a key that starts with a prefix without braces and then the tag
// lives in slot, whatever follows. It is how the library's own keys of a
// lock are put in the lock's slot on a cluster, for lock names of any
// bytes, braces included.
func SlotTag(slot int) string {
	slotTags.once.Do(func() {
		left := Slots
		for n := 0; left > 0; n++ {
			t := strconv.FormatUint(uint64(n), 36)
			if s := int(crc16(t) % Slots); slotTags.tags[s] == "" {
				slotTags.tags[s] = "{" + t + "}"
				left--
			}
		}
	})
	return slotTags.tags[slot]
}
