package kernlog

import "github.com/gpuhc/gpuhc/internal/kernlog/kernlogtest"

type fakeReader = kernlogtest.Reader

var replay = kernlogtest.Replay
