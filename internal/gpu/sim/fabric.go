package sim

// fabricPart: healthy defaults and faults for gpu.fabric. To be filled in.
var fabricPart = part{name: "fabric"}
