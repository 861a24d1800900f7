package sim

// thermalPart: healthy defaults and faults for gpu.thermal. To be filled in.
var thermalPart = part{name: "thermal"}
