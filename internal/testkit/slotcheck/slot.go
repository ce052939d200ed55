package slotcheck

import "github.com/newsletter/newsletter/internal/redisconn"

// Slots is the number of hash slots a Redis Cluster divides its keys into.
const Slots = redisconn.Slots

// Slot returns the hash slot of key as Redis Cluster computes it
// (redisconn.KeySlot, which the replica-acknowledged writes pick their
// marker keys with: one computation of the slot for both).
func Slot(key string) int { return redisconn.KeySlot(key) }
