package seal

import (
	"errors"
	"fmt"

	"github.com/mcphandler/mcphandler/internal/canon"
)

// ErrInvalidJSON is returned (wrapped) by Digest and Canonical for input that
// is not exactly one JSON value, holds an object with a duplicate key, or
// nests deeper than MaxDepth. The error it wraps alongside is canon's
// (*canon.SyntaxError, *canon.DuplicateKeyError or *canon.LimitError).
var ErrInvalidJSON = errors.New("seal: invalid JSON")

// MaxDepth is the deepest nesting of arrays and objects that Canonical
// accepts.
const MaxDepth = canon.DefaultMaxDepth

// Digest returns the SHA-256 of the Canonical form of the JSON value args,
// for Binding.ArgsDigest. Arguments that differ only in formatting (key
// order, whitespace, number spelling, string escapes) have the same digest;
// arguments that differ in value do not. Empty input (no arguments) is
// treated as null. Invalid JSON is an error wrapping ErrInvalidJSON, never a
// digest, so a caller cannot bind a token to arguments it cannot interpret.
// It is canon.Digest, in time linear in len(args).
func Digest(args []byte) ([32]byte, error) {
	d, err := canon.Digest(args)
	if err != nil {
		return [32]byte{}, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	return d, nil
}

// Canonical returns the canonical encoding of the JSON value in args, as
// canon.Canonical documents it, with errors wrapping ErrInvalidJSON.
func Canonical(args []byte) ([]byte, error) {
	c, err := canon.Canonical(args)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	return c, nil
}
