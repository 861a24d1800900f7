package sim

// xidPart: healthy defaults and faults for gpu.xid. To be filled in.
var xidPart = part{name: "xid"}
