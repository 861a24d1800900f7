package sim

// configPart: healthy defaults and faults for gpu.config. To be filled in.
var configPart = part{name: "config"}
