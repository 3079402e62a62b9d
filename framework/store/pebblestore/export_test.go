package pebblestore

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"
)

// SetVersionForTest writes another layout version, as an older or newer
// build would have.
func SetVersionForTest(s *Set, v uint64) error {
	return s.db.Set(versionKey, binary.AppendUvarint(nil, v), pebble.NoSync)
}
