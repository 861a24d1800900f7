package sim

// nvlinkPart: healthy defaults and faults for gpu.nvlink. To be filled in.
var nvlinkPart = part{name: "nvlink"}
