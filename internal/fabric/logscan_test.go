package fabric

import (
	"testing"
	"time"
)

func TestLineTime(t *testing.T) {
	utc := time.UTC
	for _, tc := range []struct {
		line string
		want time.Time
	}{
		{"[Jul 23 2024 07:53:55] [ERROR] [tid 841] x", time.Date(2024, 7, 23, 7, 53, 55, 0, utc)},
		{"[Mar  1 2023 12:37:32] [INFO] [tid 2186] x", time.Date(2023, 3, 1, 12, 37, 32, 0, utc)},
		{"[Mar 1 2023 12:37:32] [INFO] x", time.Date(2023, 3, 1, 12, 37, 32, 0, utc)},
		{"moduleId : 3", time.Time{}},
		{"[Feb 30 2025 13:59:45] [INFO] no such day", time.Time{}},
		{"[Foo 12 2025 13:59:45] [INFO] no such month", time.Time{}},
		{" [Jul 23 2024 07:53:55] not at the start", time.Time{}},
		{"[Jul 23 2024 7:53:55] one-digit hour", time.Time{}},
	} {
		if got := lineTime(tc.line, utc); !got.Equal(tc.want) {
			t.Errorf("%q: got %v, want %v", tc.line, got, tc.want)
		}
	}
}
