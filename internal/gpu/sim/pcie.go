package sim

// pciePart: healthy defaults and faults for gpu.pcie. To be filled in.
var pciePart = part{name: "pcie"}
