package redisconn

import "strings"

// Slots is the number of hash slots a Redis Cluster divides its keys into.
const Slots = 16384

// KeySlot returns the hash slot of key as Redis Cluster computes it (the
// cluster specification's "Keys hash tags" section, keyHashSlot in
// cluster.c): CRC16 (XMODEM) mod 16384 of the key, or of the text between
// the first '{' and the first '}' after it when that text is not empty.
// "{user1000}.following" and "{user1000}.followers" share a slot; "{}foo"
// and "foo{}{bar}" hash whole.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) & (Slots - 1))
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no
// reflection), the variant the cluster specification names; its check
// value, crc16("123456789"), is 0x31C3.
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
