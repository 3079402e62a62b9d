package runtime

import "github.com/causeway-stream/causeway/runtime/internal/statedir"

// ErrStateDirInUse is returned by Start when another live worker holds
// the state dir: two workers sharing one would overwrite each other's
// stores (and, with one instance id, fence each other). The error names
// the holder as it wrote itself down. The lock itself is
// runtime/internal/statedir's.
var ErrStateDirInUse = statedir.ErrInUse
