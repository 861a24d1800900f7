package fabric

import "github.com/gpuhc/gpuhc/internal/procscan"

// commLen is how much of a name the fixture's stat files keep, as the
// kernel does.
const commLen = procscan.CommLen
