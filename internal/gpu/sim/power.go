package sim

// powerPart: healthy defaults and faults for gpu.power. To be filled in.
var powerPart = part{name: "power"}
