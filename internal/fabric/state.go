package fabric

import (
	"errors"

	"github.com/gpuhc/gpuhc/internal/statefile"
)

// stateFile is the check's record in the state directory.
const stateFile = "fabricmanager-log.json"

// record is what the check keeps between runs (never written in a dry
// run, so a dry run shows the same lines again next time).
//
// Log is the cursor into Fabric Manager's log. With no record (the first
// run on the node, or the file was removed) or a corrupt one, the cursor
// starts at the log's end: lines already there are history, from before
// gpuhc watched, and acting on them would drain every node that ever had
// an NVSwitch error. That run only records where the log ends.
//
// Fatal keeps a fatal line's failure past the run that read it ("sticky"):
// the run after it would otherwise be healthy with the line behind the
// cursor, and the policy would resume the node after resume_after runs,
// while an NVSwitch fatal error leaves the fabric broken until the GPUs
// and switches are reset, which means stopping and restarting Fabric
// Manager or rebooting. So the failure holds for as long as the Fabric
// Manager instance it was seen under runs (Instance: its PID, start time
// and the boot time), and a restart or a reboot clears it. To clear it by
// hand, remove the record: the next run starts at the log's end.
//
//	rm <state_dir>/fabricmanager-log.json   (by default /var/lib/gpuhc/)
//
// A fatal line whose own timestamp is from before the running Fabric
// Manager started (it was restarted, or the node rebooted, between the
// line and this run) belongs to an instance that is gone: the new one set
// the fabric up afresh, and its own lines and NVML's fabric state judge
// the node now. Such a line is a WARN, and is not kept.
//
// PendingUnder is the instance under which GPUs were last seen still
// registering with the fabric: a second such run under the same instance
// FAILs, the first only WARNs (registration takes minutes after a start).
type record struct {
	Log          *logCursor `json:"log,omitempty"`
	Fatal        *sticky    `json:"fatal,omitempty"`
	PendingUnder string     `json:"pending_under,omitempty"`
}

type sticky struct {
	Message string `json:"message"`
	// Instance is the Fabric Manager instance the line was seen under; ""
	// when it was not running, unknownInstance when /proc could not tell.
	Instance string `json:"instance"`
}

// unknownInstance marks a sticky failure recorded while /proc could not be
// read; the next run that can read it adopts the instance it finds.
const unknownInstance = "?"

// load reads the record. A missing or corrupt one is a fresh start; one
// that cannot be read at all is an error, and a fresh start too.
func load(dir statefile.Dir) (record, error) {
	var rec record
	err := dir.Load(stateFile, &rec)
	switch {
	case errors.Is(err, statefile.ErrCorrupt):
		return record{}, nil
	case err != nil:
		return record{}, err
	}
	return rec, nil
}
