package main

import (
	"crypto/rand"
	"encoding/hex"
)

// This file holds the ids harnessd hands out: random and unguessable, for
// runs, conversations, MCP sessions and push configurations alike.

// newID returns a random, unguessable id after prefix: "run_" for runs,
// "conv_" for conversations.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
