package sim

// memoryPart: healthy defaults and faults for gpu.memory. To be filled in.
var memoryPart = part{name: "memory"}
